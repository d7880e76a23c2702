"""Sessions a user can see and end, and the e-mail of a sign-in from a new address (issue 32)."""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest
from aiosmtpd.controller import Controller

from .conftest import make_config, sign_up
from .test_chat_link import Inbox

PROXY = ["127.0.0.1/32"]


@pytest.fixture
def smtp():
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=inbox.port)
    controller.start()
    yield inbox
    controller.stop()


@pytest.fixture
def config(tmp_path, database_url, smtp):
    # The test client is a trusted proxy: X-Forwarded-For sets each request's address.
    return make_config(
        tmp_path,
        database__url=database_url,
        server__trusted_proxies=PROXY,
        mail__smtp_host="127.0.0.1",
        mail__smtp_port=smtp.port,
        mail__starttls=False,
    )


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def sign_in(client, user, ip="198.51.100.7", agent="test-agent/1") -> str:
    resp = await client.post(
        "/auth/sign-in",
        json={"username": user.username, "password": user.password},
        headers={"X-Forwarded-For": ip, "User-Agent": agent},
    )
    assert resp.status == 200, await resp.text()
    client.session.cookie_jar.clear()
    return (await resp.json())["token"]


async def sessions(client, token) -> list[dict]:
    resp = await client.get("/api/users/me/sessions", headers=bearer(token))
    assert resp.status == 200, await resp.text()
    return (await resp.json())["sessions"]


async def test_sessions_are_listed_with_address_agent_and_which_is_current(client, alice):
    laptop = await sign_in(client, alice, "198.51.100.7", "Firefox/140")
    phone = await sign_in(client, alice, "203.0.113.9", "Mobile Safari/18")
    listed = await sessions(client, laptop)
    assert len(listed) == 3  # sign-up's, the laptop's, the phone's
    by_agent = {s["userAgent"]: s for s in listed}
    assert by_agent["Firefox/140"]["ip"] == "198.51.100.7"
    assert by_agent["Firefox/140"]["current"] is True
    assert by_agent["Mobile Safari/18"]["ip"] == "203.0.113.9"
    assert by_agent["Mobile Safari/18"]["current"] is False
    assert all(s["createdAt"] and s["lastSeenAt"] for s in listed)
    assert [s["current"] for s in await sessions(client, phone)].count(True) == 1
    # Another user's list holds none of them.
    bob = await sign_up(client, "bob")
    assert {s["id"] for s in await sessions(client, bob.token)}.isdisjoint(s["id"] for s in listed)


async def test_a_session_ended_from_another_loses_requests_and_socket_at_once(client, alice):
    phone = await sign_in(client, alice, agent="phone")
    laptop = await sign_in(client, alice, agent="laptop")
    assert (await client.get("/api/users/me", headers=bearer(phone))).status == 200  # cached
    ws = await client.ws_connect(f"/ws?token={phone}")
    assert (await ws.receive_json(timeout=5))["type"] == "connected"
    target = next(s for s in await sessions(client, laptop) if s["userAgent"] == "phone")
    start = time.perf_counter()
    resp = await client.delete(f"/api/users/me/sessions/{target['id']}", headers=bearer(laptop))
    assert resp.status == 204, await resp.text()
    assert (await client.get("/api/users/me", headers=bearer(phone))).status == 401
    closed = await ws.receive(timeout=1)
    assert closed.type == aiohttp.WSMsgType.CLOSE and closed.data == 4001
    assert time.perf_counter() - start < 1.0
    assert (await client.get("/api/users/me", headers=bearer(laptop))).status == 200
    # Gone: ending it again, or another user's session, is 404; so is a malformed id.
    again = await client.delete(f"/api/users/me/sessions/{target['id']}", headers=bearer(laptop))
    assert again.status == 404
    bob = await sign_up(client, "bob")
    theirs = (await sessions(client, bob.token))[0]["id"]
    stolen = await client.delete(f"/api/users/me/sessions/{theirs}", headers=bearer(laptop))
    assert stolen.status == 404
    assert (await client.get("/api/users/me", headers=bob.headers)).status == 200
    bad = await client.delete("/api/users/me/sessions/x1", headers=bearer(laptop))
    assert bad.status == 404 and "error" in await bad.json()


async def test_a_session_cookie_ended_is_refused(client, alice):
    resp = await client.post(
        "/auth/sign-in", json={"username": alice.username, "password": alice.password}
    )
    assert resp.status == 200
    assert (await client.get("/api/users/me")).status == 200  # through the cookie
    cookie_session = next(s for s in await sessions(client, alice.token) if not s["current"])
    ended = await client.delete(
        f"/api/users/me/sessions/{cookie_session['id']}", headers=alice.headers
    )
    assert ended.status == 204
    assert (await client.get("/api/users/me")).status == 401


async def test_ending_all_but_the_current_session(client, alice):
    others = [await sign_in(client, alice, agent=f"device{n}") for n in range(3)]
    sockets = [await client.ws_connect(f"/ws?token={t}") for t in others]
    for ws in sockets:
        assert (await ws.receive_json(timeout=5))["type"] == "connected"
    resp = await client.delete("/api/users/me/sessions", headers=alice.headers)
    assert resp.status == 204
    for token, ws in zip(others, sockets):
        assert (await client.get("/api/users/me", headers=bearer(token))).status == 401
        closed = await ws.receive(timeout=1)
        assert closed.type == aiohttp.WSMsgType.CLOSE and closed.data == 4001
    left = await sessions(client, alice.token)
    assert [s["current"] for s in left] == [True]
    # A personal access token is no session: it stays, and it may not end sessions.
    made = await client.post("/api/users/me/tokens", json={"name": "ci"}, headers=alice.headers)
    pat = (await made.json())["secret"]
    await sign_in(client, alice)
    refused = await client.delete("/api/users/me/sessions", headers=bearer(pat))
    assert refused.status == 403 and "session" in (await refused.json())["error"]
    assert (await client.get("/api/users/me", headers=bearer(pat))).status == 200
    assert len(await sessions(client, pat)) == 2
    assert all(not s["current"] for s in await sessions(client, pat))


async def test_last_seen_is_written_at_most_once_a_minute(client, alice):
    token = await sign_in(client, alice)
    first = next(s for s in await sessions(client, token) if s["current"])["lastSeenAt"]
    await asyncio.sleep(1.1)
    for _ in range(3):
        assert (await client.get("/api/users/me", headers=bearer(token))).status == 200
    again = next(s for s in await sessions(client, token) if s["current"])["lastSeenAt"]
    assert again == first  # within the minute: not written on every request


async def test_a_sign_in_from_a_new_address_is_e_mailed_once(client, smtp):
    user = await sign_up(client, "carol")  # sign-up from 127.0.0.1: the first address
    assert smtp.messages == []
    await sign_in(client, user, "127.0.0.1")
    assert smtp.messages == []  # seen already
    await sign_in(client, user, "198.51.100.20", "Unknown-Browser/2")
    assert len(smtp.messages) == 1
    message = smtp.parsed()
    assert message["To"] == "carol@example.com"
    assert "New sign-in" in message["Subject"]
    assert "198.51.100.20" in message.get_content()
    await sign_in(client, user, "198.51.100.20")
    assert len(smtp.messages) == 1  # the same address again: no second e-mail
    # A failed sign-in from a new address sends nothing.
    resp = await client.post(
        "/auth/sign-in",
        json={"username": "carol", "password": "wrong password"},
        headers={"X-Forwarded-For": "192.0.2.99"},
    )
    assert resp.status == 401
    assert len(smtp.messages) == 1


async def test_the_first_sign_in_of_an_account_made_by_an_administrator_mails_nothing(
    client, alice, smtp
):
    made = await client.post(
        "/api/admin/users",
        json={
            "username": "dave",
            "email": "dave@example.com",
            "password": "dave-password",
            "name": "Dave",
        },
        headers=alice.headers,
    )
    assert made.status == 201, await made.text()
    resp = await client.post(
        "/auth/sign-in",
        json={"username": "dave", "password": "dave-password"},
        headers={"X-Forwarded-For": "198.51.100.1"},
    )
    assert resp.status == 200
    assert smtp.messages == []


async def test_a_new_personal_access_token_is_e_mailed(client, alice, smtp):
    resp = await client.post("/api/users/me/tokens", json={"name": "deploy"}, headers=alice.headers)
    assert resp.status == 201
    assert len(smtp.messages) == 1
    message = smtp.parsed()
    assert message["To"] == "alice@example.com" and '"deploy"' in message.get_content()
    assert (await resp.json())["secret"] not in message.get_content()
