"""E-mail is retried like webhooks, with failures visible; STARTTLS only when offered."""

from __future__ import annotations

import asyncio

import pytest
from aiosmtpd.controller import Controller

from hubsvc.app import create_app
from hubsvc.config import load_config

from .conftest import make_config, sign_up
from .server import free_port

BOT_KEY = "mail-retry-bot-key"


class FlakyInbox:
    """Answers the first `refusals` messages with the given SMTP reply, then accepts."""

    def __init__(self, refusals: int, reply: str = "451 4.3.0 try again later") -> None:
        self.refusals, self.reply = refusals, reply
        self.messages: list = []
        self.tries = 0
        self.port = free_port()

    async def handle_DATA(self, server, session, envelope) -> str:
        self.tries += 1
        if self.tries <= self.refusals:
            return self.reply
        self.messages.append(envelope)
        return "250 Message accepted for delivery"


def _server(inbox):
    controller = Controller(inbox, hostname="127.0.0.1", port=inbox.port)
    controller.start()
    return controller


async def _app(aiohttp_client, tmp_path, port):
    # starttls is left at its default: "auto", and this relay offers none.
    config = make_config(
        tmp_path,
        mail__smtp_host="127.0.0.1",
        mail__smtp_port=port,
        chat__bot_key=BOT_KEY,
        webhooks__retry_seconds=0.05,
    )
    client = await aiohttp_client(create_app(config))
    admin = await sign_up(client, "boss")
    await sign_up(client, "dave")
    resp = await client.post(
        "/api/chat/link/generate",
        headers={"X-Chat-Bot-Key": BOT_KEY},
        json={"chatId": "c1", "serviceEmail": "dave@example.com"},
    )
    assert resp.status == 200
    return client, admin


async def _deliveries(client, admin, want, timeout=10.0):
    for _ in range(int(timeout / 0.05)):
        resp = await client.get("/api/admin/deliveries", headers=admin.headers)
        rows = (await resp.json())["deliveries"]
        if rows and rows[0]["status"] == want:
            return rows
        await asyncio.sleep(0.05)
    raise AssertionError(rows)


async def test_transient_smtp_failure_is_retried_on_a_plain_relay(aiohttp_client, tmp_path):
    inbox = FlakyInbox(refusals=2)
    controller = _server(inbox)
    try:
        client, admin = await _app(aiohttp_client, tmp_path, inbox.port)
        [row] = await _deliveries(client, admin, "delivered")
        assert row["attempts"] == 3 and row["to"] == "dave@example.com" and row["kind"] == "mail"
        assert len(inbox.messages) == 1
        assert "/chat/link?" not in str(row)  # the message (a one-time link) is never shown
    finally:
        controller.stop()


async def test_permanent_refusal_is_final_and_visible(aiohttp_client, tmp_path):
    inbox = FlakyInbox(refusals=100, reply="550 5.1.1 no such mailbox")
    controller = _server(inbox)
    try:
        client, admin = await _app(aiohttp_client, tmp_path, inbox.port)
        [row] = await _deliveries(client, admin, "failed")
        assert row["attempts"] == 1 and "550" in row["error"]
        user = await sign_up(client, "plain")
        resp = await client.get("/api/admin/deliveries", headers=user.headers)
        assert resp.status == 403
    finally:
        controller.stop()


async def test_server_down_then_up_delivers(aiohttp_client, tmp_path):
    inbox = FlakyInbox(refusals=0)
    client, admin = await _app(aiohttp_client, tmp_path, inbox.port)  # nobody listens yet
    await asyncio.sleep(0.2)
    rows = (await (await client.get("/api/admin/deliveries", headers=admin.headers)).json())[
        "deliveries"
    ]
    assert rows[0]["status"] == "pending" and "Refused" in rows[0]["error"]
    controller = _server(inbox)
    try:
        await _deliveries(client, admin, "delivered")
        assert len(inbox.messages) == 1
    finally:
        controller.stop()


@pytest.mark.parametrize(
    "value, mode", [(None, "auto"), (True, "always"), (False, "never"), ("auto", "auto")]
)
def test_starttls_defaults_to_auto_and_takes_booleans(tmp_path, value, mode):
    from hubsvc.config import starttls_mode

    config = load_config(None, {"storage.data_dir": str(tmp_path), "mail.starttls": value}, env={})
    assert starttls_mode(config["mail"]["starttls"]) == mode
