"""Chat account linking: tokens, e-mail over real SMTP, the link page, the bot credential."""

from __future__ import annotations

import email
import email.policy
import hashlib
import logging
import os
import re
import stat

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from hubsvc.app import create_app
from hubsvc.keys import STORE
from hubsvc.tasks import BACKGROUND

from .conftest import make_config, sign_up
from .server import free_port

BOT_KEY = "k" * 32
BOT = {"X-Chat-Bot-Key": BOT_KEY}
SMTP_USER = "hubsvc-mailer"
SMTP_PASSWORD = "smtp-secret-Zq81"
BASE = "http://127.0.0.1:8080"


def as_chat(chat_id: str, key: str = BOT_KEY) -> dict[str, str]:
    """The bot credential acting for a chat user."""
    return {"X-Chat-Bot-Key": key, "X-Chat-User-Id": chat_id}


class Inbox:
    """An aiosmtpd handler that keeps every message and every login it is given."""

    def __init__(self) -> None:
        self.messages: list = []
        self.logins: list[tuple[bytes, bytes]] = []
        self.port = free_port()

    async def handle_DATA(self, server, session, envelope) -> str:
        self.messages.append(envelope)
        return "250 Message accepted for delivery"

    def authenticate(self, server, session, envelope, mechanism, auth_data) -> AuthResult:
        if not isinstance(auth_data, LoginPassword):
            return AuthResult(success=False, handled=False)
        self.logins.append((auth_data.login, auth_data.password))
        ok = auth_data.login == SMTP_USER.encode() and auth_data.password == SMTP_PASSWORD.encode()
        return AuthResult(success=ok)

    def parsed(self, index: int = -1) -> email.message.EmailMessage:
        return email.message_from_bytes(self.messages[index].content, policy=email.policy.default)


@pytest.fixture
def smtp():
    inbox = Inbox()
    controller = Controller(
        inbox,
        hostname="127.0.0.1",
        port=inbox.port,
        authenticator=inbox.authenticate,
        auth_require_tls=False,
    )
    controller.start()
    yield inbox
    controller.stop()


@pytest.fixture
def config(tmp_path, smtp):
    # Overrides conftest's config: the client, alice and bob of this module use it.
    return make_config(
        tmp_path,
        mail__smtp_host="127.0.0.1",
        mail__smtp_port=smtp.port,
        mail__starttls=False,
        mail__username=SMTP_USER,
        mail__password=SMTP_PASSWORD,
        chat__bot_key=BOT_KEY,
    )


async def drain(client) -> None:
    """Wait for the background work (the e-mail) that requests started."""
    await client.app[BACKGROUND].close()


async def generate(client, chat_id: str, service_email: str | None = None) -> str:
    body = {"chatId": chat_id}
    if service_email is not None:
        body["serviceEmail"] = service_email
    resp = await client.post("/api/chat/link/generate", json=body, headers=BOT)
    assert resp.status == 200, await resp.text()
    return (await resp.json())["token"]


async def link(client, user, chat_id: str) -> None:
    token = await generate(client, chat_id)
    resp = await client.post(
        "/api/chat/link/verify",
        headers=user.headers,
        json={"token": token, "serviceUserId": user.id},
    )
    assert resp.status == 200, await resp.text()


async def test_generate_needs_the_bot_key_and_answers_a_hex_token(client, alice):
    body = {"chatId": "123456789"}
    for headers in (
        {},
        {"X-Chat-Bot-Key": "wrong"},
        {"X-Chat-Bot-Key": ""},
        alice.headers,
        {**alice.headers, "X-Chat-Bot-Key": BOT_KEY[:-1]},
    ):
        resp = await client.post("/api/chat/link/generate", json=body, headers=headers)
        assert resp.status == 401, headers
        assert set(await resp.json()) == {"error"}
    resp = await client.post("/api/chat/link/generate", json=body, headers=BOT)
    assert resp.status == 200
    answer = await resp.json()
    assert answer["success"] is True
    assert re.fullmatch(r"[0-9a-f]{64}", answer["token"])
    assert answer["url"] == f"{BASE}/chat/link?token={answer['token']}"
    assert answer["expiresAt"].endswith("Z")
    assert await generate(client, "123456789") != answer["token"]
    for bad, field in (
        ({}, "chatId"),
        ({"chatId": ""}, "chatId"),
        ({"chatId": "x" * 65}, "chatId"),
        ({"chatId": "a\nb"}, "chatId"),
        ({"chatId": 5}, "chatId"),
        ({"chatId": "1", "serviceEmail": "nope"}, "serviceEmail"),
    ):
        resp = await client.post("/api/chat/link/generate", json=bad, headers=BOT)
        assert resp.status == 400, bad
        assert field in (await resp.json())["error"]


async def test_no_configured_bot_key_refuses_every_key(aiohttp_client, tmp_path):
    client = await aiohttp_client(create_app(make_config(tmp_path)))
    for key in ("", "anything", "k" * 32):
        resp = await client.post(
            "/api/chat/link/generate", json={"chatId": "1"}, headers={"X-Chat-Bot-Key": key}
        )
        assert resp.status == 401


async def test_verification_email_goes_out_over_smtp(client, alice, smtp):
    resp = await client.post(
        "/api/chat/link/generate",
        headers=BOT,
        json={"chatId": "42", "serviceEmail": "ALICE@example.com"},
    )
    known = await resp.json()
    await drain(client)
    assert len(smtp.messages) == 1
    envelope = smtp.messages[0]
    assert envelope.rcpt_tos == ["alice@example.com"]
    assert envelope.mail_from == "hubsvc@localhost"
    assert smtp.logins == [(SMTP_USER.encode(), SMTP_PASSWORD.encode())]
    message = smtp.parsed()
    assert message["To"] == "alice@example.com"
    assert message["Subject"]
    text = message.get_content()
    assert f"{BASE}/chat/link?token={known['token']}" in text
    assert '"42"' in text and "alice" in text

    # An address without an account: the same answer, and no e-mail.
    resp2 = await client.post(
        "/api/chat/link/generate",
        headers=BOT,
        json={"chatId": "42", "serviceEmail": "nobody@example.com"},
    )
    unknown = await resp2.json()
    await drain(client)
    assert resp2.status == resp.status == 200
    assert set(unknown) == set(known)
    assert resp2.headers["Content-Type"] == resp.headers["Content-Type"]
    assert len(unknown["token"]) == len(known["token"])
    assert len(smtp.messages) == 1


async def test_outbox_folder_without_smtp(aiohttp_client, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    config = make_config(tmp_path, chat__bot_key=BOT_KEY)
    client = await aiohttp_client(create_app(config))
    await sign_up(client, "carol")
    token = await generate(client, "77", "carol@example.com")
    await generate(client, "78", "nobody@example.com")
    await drain(client)
    files = sorted((config.data_dir / "outbox").iterdir())
    assert [f.suffix for f in files] == [".eml"]
    assert stat.S_IMODE(files[0].stat().st_mode) == 0o600
    message = email.message_from_bytes(files[0].read_bytes(), policy=email.policy.default)
    assert message["To"] == "carol@example.com"
    assert f"{BASE}/chat/link?token={token}" in message.get_content()
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("hubsvc")]
    assert any("wrote a message" in line for line in lines)
    assert not any(token in line for line in lines)


async def test_page_renders_escaped_and_does_not_use_the_token(client, alice):
    chat_id = '<b>"x"</b>&'
    token = await generate(client, chat_id)
    resp = await client.get(f"/chat/link?token={token}")
    assert resp.status == 200 and resp.content_type == "text/html"
    page = await resp.text()
    assert "&lt;b&gt;&quot;x&quot;&lt;/b&gt;&amp;" in page
    assert chat_id not in page
    assert re.search(r'<form id="signin">', page)  # not signed in: the sign-in step shows
    assert re.search(r'<div id="confirm" hidden>', page)
    assert "/auth/sign-in" in page and "/api/chat/link/verify" in page
    csp = resp.headers["Content-Security-Policy"]
    nonce = re.search(r"script-src 'nonce-([^']+)'", csp).group(1)
    assert f"style-src 'nonce-{nonce}'" in csp and "default-src 'none'" in csp
    assert "frame-ancestors 'none'" in csp
    assert resp.headers["X-Frame-Options"] == "DENY"
    assert resp.headers["Referrer-Policy"] == "no-referrer"
    assert re.findall(r"<(script|style)\b[^>]*>", page)
    for tag in re.findall(r"<(?:script|style)\b[^>]*>", page):
        assert f'nonce="{nonce}"' in tag
    assert " src=" not in page and "<link" not in page and "http" not in page

    # Signed in with the cookie, the confirm step names the chat account and the user.
    resp = await client.post(
        "/auth/sign-in", json={"username": "alice", "password": alice.password}
    )
    assert resp.status == 200
    page = await (await client.get(f"/chat/link?token={token}")).text()
    assert re.search(r'<div id="confirm">', page) and re.search(r'<form id="signin" hidden>', page)
    assert f'data-user-id="{alice.id}"' in page and ">alice</strong>" in page
    # Looking twice used nothing up: verify (as the page does it, same origin) still works.
    origin = str(client.make_url("/")).rstrip("/")
    resp = await client.post(
        "/api/chat/link/verify",
        headers={"Origin": origin},
        json={"token": token, "serviceUserId": alice.id},
    )
    assert resp.status == 200, await resp.text()
    page = await (await client.get(f"/chat/link?token={token}")).text()
    assert re.search(r'<div id="invalid">', page)  # now used


async def test_page_escapes_the_token_and_renders_for_unknown_ones(client):
    evil = '"><script>alert(1)</script>'
    resp = await client.get("/chat/link", params={"token": evil})
    assert resp.status == 200
    page = await resp.text()
    assert "<script>alert(1)" not in page
    assert "&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert re.search(r'<div id="invalid">', page)
    resp = await client.get("/chat/link")
    assert resp.status == 200 and re.search(r'<div id="invalid">', await resp.text())


async def test_verify_rules(client, alice, bob):
    token = await generate(client, "c1")
    verify = "/api/chat/link/verify"
    body = {"token": token, "serviceUserId": alice.id}
    assert (await client.post(verify, json=body)).status == 401
    assert (await client.post(verify, json=body, headers=bob.headers)).status == 403
    assert (
        await client.post(
            verify, headers=alice.headers, json={"token": token, "serviceUserId": bob.id}
        )
    ).status == 403
    resp = await client.post(verify, headers=alice.headers, json={"token": token})
    assert resp.status == 400 and "serviceUserId" in (await resp.json())["error"]
    resp = await client.post(verify, json=body, headers=alice.headers)
    assert resp.status == 200
    answer = await resp.json()
    assert answer["success"] is True and answer["linked"] is True
    assert answer["user"]["id"] == alice.id and answer["user"]["username"] == "alice"
    assert set(answer["user"]) >= {"id", "username", "name", "avatarUrl"}
    assert "email" not in answer["user"]

    resp = await client.post(verify, json=body, headers=alice.headers)  # used
    assert resp.status == 400 and "token" in (await resp.json())["error"]
    resp = await client.post(
        verify, headers=alice.headers, json={"token": "0" * 64, "serviceUserId": alice.id}
    )
    assert resp.status == 400

    expired = await generate(client, "c2")
    await client.app[STORE].db.write(
        lambda conn: conn.execute("UPDATE chat_link_tokens SET expires_at = 0")
    )
    resp = await client.post(
        verify, headers=alice.headers, json={"token": expired, "serviceUserId": alice.id}
    )
    assert resp.status == 400

    # A token e-mailed to alice is hers alone.
    mailed = await generate(client, "c3", "alice@example.com")
    resp = await client.post(
        verify, headers=bob.headers, json={"token": mailed, "serviceUserId": bob.id}
    )
    assert resp.status == 403
    await drain(client)

    # A new link of the same chat id replaces the earlier one.
    await link(client, bob, "c1")
    status = await (await client.get("/api/chat/link/status/c1", headers=BOT)).json()
    assert status["user"]["username"] == "bob"


async def test_status_and_unlink_by_bot_or_linked_user(client, alice, bob):
    await link(client, alice, "c1")
    for headers in (BOT, alice.headers, as_chat("c1")):
        resp = await client.get("/api/chat/link/status/c1", headers=headers)
        assert resp.status == 200, headers
        status = await resp.json()
        assert status["linked"] is True and status["verified"] is True
        assert status["user"]["id"] == alice.id
        assert set(status["user"]) == {"id", "username", "name", "avatarUrl"}
    assert (await client.get("/api/chat/link/status/c1", headers=bob.headers)).status == 404
    assert (await client.get("/api/chat/link/status/c1")).status == 401
    assert (await client.get("/api/chat/link/status/zz", headers=alice.headers)).status == 404
    resp = await client.get("/api/chat/link/status/zz", headers=BOT)
    assert await resp.json() == {"linked": False, "verified": False, "user": None}

    unlink = "/api/chat/link/unlink"
    assert (await client.post(unlink, json={"chatId": "c1"})).status == 401
    assert (await client.post(unlink, json={"chatId": "c1"}, headers=bob.headers)).status == 404
    assert (await client.post(unlink, json={}, headers=BOT)).status == 400
    resp = await client.post(unlink, json={"chatId": "c1"}, headers=alice.headers)
    assert await resp.json() == {"success": True, "unlinked": True}
    assert (await client.get("/api/chat/link/status/c1", headers=alice.headers)).status == 404
    resp = await client.post(unlink, json={"chatId": "c1"}, headers=BOT)
    assert await resp.json() == {"success": True, "unlinked": False}
    assert (await client.post(unlink, json={"chatId": "c1"}, headers=alice.headers)).status == 404

    await link(client, alice, "c1")
    resp = await client.post(unlink, json={"chatId": "c1"}, headers=BOT)
    assert await resp.json() == {"success": True, "unlinked": True}


async def test_bot_credential_acts_as_the_linked_user(client, alice):
    await link(client, alice, "c1")
    resp = await client.get("/api/users/me", headers=as_chat("c1"))
    assert resp.status == 200
    assert (await resp.json())["user"]["username"] == "alice"
    # A write as alice, within the bot's scope; the cookie Origin check does not apply.
    await client.post("/api/repositories", json={"name": "proj"}, headers=alice.headers)
    resp = await client.post(
        "/api/repositories/alice/proj/issues",
        json={"title": "from chat"},
        headers={**as_chat("c1"), "Origin": "https://elsewhere.example"},
    )
    assert resp.status == 201, await resp.text()
    assert (await resp.json())["issue"]["author"]["username"] == "alice"

    assert (await client.get("/api/users/me", headers=as_chat("c1", "wrong"))).status == 401
    assert (await client.get("/api/users/me", headers=as_chat("nobody"))).status == 401
    await generate(client, "pending")  # a token exists, but nobody verified it
    assert (await client.get("/api/users/me", headers=as_chat("pending"))).status == 401
    await client.app[STORE].db.write(
        lambda conn: conn.execute(
            "INSERT INTO chat_links (chat_id, user_id, verified, created_at)"
            " VALUES ('unverified', ?, 0, '2024-01-01T00:00:00Z')",
            (int(alice.id),),
        )
    )
    assert (await client.get("/api/users/me", headers=as_chat("unverified"))).status == 401
    # A wrong key is refused even on a public endpoint; the key alone is anonymous.
    resp = await client.get("/api/users/alice", headers={"X-Chat-Bot-Key": "wrong"})
    assert resp.status == 401
    assert (await client.get("/api/users/alice", headers=BOT)).status == 200
    assert (await client.get("/api/users/me", headers=BOT)).status == 401
    # The link endpoints still serve the bot for a chat user who is not linked yet.
    resp = await client.post(
        "/api/chat/link/generate", json={"chatId": "nobody"}, headers=as_chat("nobody")
    )
    assert resp.status == 200
    resp = await client.get("/api/chat/link/status/nobody", headers=as_chat("nobody"))
    assert (await resp.json())["linked"] is False

    await client.post("/api/chat/link/unlink", json={"chatId": "c1"}, headers=BOT)
    assert (await client.get("/api/users/me", headers=as_chat("c1"))).status == 401


async def test_tokens_are_stored_hashed(client, alice, config):
    token = await generate(client, "c1", "alice@example.com")
    rows = await client.app[STORE].db.read(
        lambda conn: conn.execute("SELECT * FROM chat_link_tokens").fetchall()
    )
    assert [bytes(r["hash"]) for r in rows] == [hashlib.sha256(token.encode()).digest()]
    assert all(token not in str(v) for r in rows for v in tuple(r))
    await drain(client)
    resp = await client.post(
        "/api/chat/link/verify",
        headers=alice.headers,
        json={"token": token, "serviceUserId": alice.id},
    )
    assert resp.status == 200
    for name in os.listdir(config.data_dir):
        if name.startswith("hubsvc.db"):
            data = (config.data_dir / name).read_bytes()
            assert token.encode() not in data, name


async def test_logs_hold_neither_token_nor_smtp_password(client, alice, smtp, caplog):
    caplog.set_level(logging.DEBUG)
    token = await generate(client, "c1", "alice@example.com")
    await drain(client)
    assert len(smtp.messages) == 1
    resp = await client.post(
        "/api/chat/link/verify",
        headers=alice.headers,
        json={"token": token, "serviceUserId": alice.id},
    )
    assert resp.status == 200
    # mail.log is the test's own SMTP server, which echoes what it receives.
    lines = [f"{r.name} {r.getMessage()}" for r in caplog.records if r.name != "mail.log"]
    assert any("hubsvc.mail" in line and "sent a message" in line for line in lines)
    for line in lines:
        assert token not in line and SMTP_PASSWORD not in line and "/chat/link?" not in line


async def test_failed_delivery_is_logged(aiohttp_client, tmp_path, caplog):
    caplog.set_level(logging.INFO)
    config = make_config(
        tmp_path,
        mail__smtp_host="127.0.0.1",
        mail__smtp_port=free_port(),
        mail__starttls=False,
        mail__password=SMTP_PASSWORD,
        chat__bot_key=BOT_KEY,
    )
    client = await aiohttp_client(create_app(config))
    await sign_up(client, "dave")
    token = await generate(client, "c9", "dave@example.com")
    await drain(client)
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("hubsvc")]
    assert any("could not send" in line for line in lines)
    assert not any(token in line or SMTP_PASSWORD in line for line in lines)
