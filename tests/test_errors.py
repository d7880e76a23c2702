"""Every error status answers the one shape {"error": message}, with no trace leaked."""

from __future__ import annotations

import logging

from hubsvc.app import create_app
from hubsvc.keys import STATE

from .conftest import make_config, sign_up


async def _error(resp, status: int) -> str:
    assert resp.status == status, await resp.text()
    assert resp.content_type == "application/json"
    body = await resp.json()
    assert isinstance(body.get("error"), str) and body["error"]
    assert set(body) <= {"error", "retryAfter"}
    return body["error"]


async def test_error_shape_for_every_status(aiohttp_client, tmp_path, caplog):
    config = make_config(tmp_path, rate_limit__enabled=True, rate_limit__burst=40,
                         server__max_body_bytes=1024)
    app = create_app(config)

    async def boom(request):
        raise RuntimeError("secret internals /etc/passwd")

    app.router.add_get("/boom", boom)
    client = await aiohttp_client(app)
    user = await sign_up(client, "shape")

    assert "JSON" in await _error(await client.post(
        "/auth/sign-in", data=b"{not json", headers={"Content-Type": "application/json"}), 400)
    await _error(await client.post("/auth/sign-in", json=[1, 2]), 400)
    await _error(await client.get("/api/users/me"), 401)
    await client.post("/auth/sign-in", json={"username": "shape", "password": user.password})
    await _error(await client.patch("/api/users/me/settings", json={},
                                    headers={"Origin": "http://elsewhere.example"}), 403)
    client.session.cookie_jar.clear()
    await _error(await client.get("/no/such/route"), 404)
    await _error(await client.get("/api/users/nobody"), 404)
    assert "not allowed" in await _error(await client.put("/health"), 405)
    await _error(await client.post("/auth/sign-up", json={
        "email": "x@example.com", "username": "shape", "password": "12345678", "name": "x"}), 409)
    await _error(await client.patch("/api/users/me/settings", data=b"{" + b" " * 4096 + b"}",
                                    headers={**user.headers, "Content-Type": "application/json"}),
                 413)
    with caplog.at_level(logging.ERROR):
        resp = await client.get("/boom")
        message = await _error(resp, 500)
    assert "secret" not in message and "Traceback" not in await resp.text()
    assert any(resp.headers["X-Request-Id"] in r.getMessage() for r in caplog.records)
    client.app[STATE]["shutting_down"] = True
    resp = await client.get("/health")
    assert resp.status == 503
    assert (await resp.json())["status"] == "unavailable"
    client.app[STATE]["shutting_down"] = False
    for _ in range(40):
        resp = await client.get("/health")
        if resp.status == 429:
            break
    await _error(resp, 429)


async def test_wrong_field_types_name_the_field(client, alice):
    resp = await client.patch("/api/users/me/settings", json={"website": "javascript:alert(1)"},
                              headers=alice.headers)
    assert "website" in await _error(resp, 400)
    resp = await client.post("/api/users/me/settings/preferences",
                             json={"notifications": {"web": "maybe"}}, headers=alice.headers)
    assert "notifications.web" in await _error(resp, 400)


async def test_unknown_fields_are_ignored(client, alice):
    resp = await client.patch("/api/users/me/settings", json={"bio": "hi", "isAdmin": True,
                                                               "password_hash": "x"},
                              headers=alice.headers)
    assert resp.status == 200
    assert (await resp.json())["settings"]["bio"] == "hi"


async def test_every_answer_has_a_request_id(client):
    resp = await client.get("/health", headers={"X-Request-Id": "abc-123"})
    assert resp.headers["X-Request-Id"] == "abc-123"
    resp = await client.get("/nowhere", headers={"X-Request-Id": "bad id with spaces"})
    assert resp.headers["X-Request-Id"] != "bad id with spaces"
    assert len(resp.headers["X-Request-Id"]) == 16

