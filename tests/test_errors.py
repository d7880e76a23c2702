"""Every error status answers the one shape {"error": message}, with no trace leaked."""

from __future__ import annotations

import logging

from hubsvc.app import create_app
from hubsvc.keys import STATE
from hubsvc.policy import requires

from .conftest import make_config, sign_up


async def _error(resp, status: int) -> str:
    assert resp.status == status, await resp.text()
    assert resp.content_type == "application/json"
    body = await resp.json()
    assert isinstance(body.get("error"), str) and body["error"]
    assert set(body) <= {"error", "retryAfter"}
    return body["error"]


async def test_error_shape_for_every_status(aiohttp_client, tmp_path, caplog):
    config = make_config(
        tmp_path, rate_limit__enabled=True, rate_limit__burst=40, server__max_body_bytes=1024
    )
    app = create_app(config)

    @requires("public")  # every route declares its action, this one too
    async def boom(request):
        raise RuntimeError("secret internals /etc/passwd")

    app.router.add_get("/boom", boom)
    client = await aiohttp_client(app)
    user = await sign_up(client, "shape")

    assert "JSON" in await _error(
        await client.post(
            "/auth/sign-in", data=b"{not json", headers={"Content-Type": "application/json"}
        ),
        400,
    )
    await _error(await client.post("/auth/sign-in", json=[1, 2]), 400)
    await _error(await client.get("/api/users/me"), 401)
    await client.post("/auth/sign-in", json={"username": "shape", "password": user.password})
    await _error(
        await client.patch(
            "/api/users/me/settings", json={}, headers={"Origin": "http://elsewhere.example"}
        ),
        403,
    )
    client.session.cookie_jar.clear()
    await _error(await client.get("/no/such/route"), 404)
    await _error(await client.get("/api/users/nobody"), 404)
    assert "not allowed" in await _error(await client.put("/health"), 405)
    await _error(
        await client.post(
            "/auth/sign-up",
            json={
                "email": "x@example.com",
                "username": "shape",
                "password": "12345678",
                "name": "x",
            },
        ),
        409,
    )
    await _error(
        await client.patch(
            "/api/users/me/settings",
            data=b"{" + b" " * 4096 + b"}",
            headers={**user.headers, "Content-Type": "application/json"},
        ),
        413,
    )
    assert "application/json" in await _error(
        await client.post(
            "/auth/sign-in",
            data=b'{"username": "shape", "password": "x"}',
            headers={"Content-Type": "text/plain"},
        ),
        415,
    )
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
        resp = await client.get("/nothing-here")  # /health itself is never limited
        if resp.status == 429:
            break
    await _error(resp, 429)


async def test_wrong_field_types_name_the_field(client, alice):
    resp = await client.patch(
        "/api/users/me/settings", json={"website": "javascript:alert(1)"}, headers=alice.headers
    )
    assert "website" in await _error(resp, 400)
    resp = await client.post(
        "/api/users/me/settings/preferences",
        json={"notifications": {"web": "maybe"}},
        headers=alice.headers,
    )
    assert "notifications.web" in await _error(resp, 400)


async def test_unknown_fields_are_ignored(client, alice):
    resp = await client.patch(
        "/api/users/me/settings",
        json={"bio": "hi", "isAdmin": True, "password_hash": "x"},
        headers=alice.headers,
    )
    assert resp.status == 200
    assert (await resp.json())["settings"]["bio"] == "hi"


async def test_every_answer_has_a_request_id(client):
    resp = await client.get("/health", headers={"X-Request-Id": "abc-123"})
    assert resp.headers["X-Request-Id"] == "abc-123"
    resp = await client.get("/nowhere", headers={"X-Request-Id": "bad id with spaces"})
    assert resp.headers["X-Request-Id"] != "bad id with spaces"
    assert len(resp.headers["X-Request-Id"]) == 16


async def test_deeply_nested_json_is_400_naming_the_depth_limit(client, alice):
    for body in (
        b"[" * 100_000,
        b'{"a":' * 50_000 + b"1" + b"}" * 50_000,
        b'{"name": ' + b"[" * 65 + b"]" * 65 + b"}",
    ):
        resp = await client.post(
            "/api/repositories",
            data=body,
            headers={**alice.headers, "Content-Type": "application/json"},
        )
        assert resp.status == 400
        assert (await resp.json())["error"] == "JSON nested deeper than 64 levels"
    # Within the limit the body is parsed as usual (here: a wrong type for name).
    resp = await client.post(
        "/api/repositories",
        data=b'{"name": ' + b"[" * 63 + b"]" * 63 + b"}",
        headers={**alice.headers, "Content-Type": "application/json"},
    )
    assert resp.status == 400 and "name" in (await resp.json())["error"]


async def test_depth_limit_is_configurable(aiohttp_client, tmp_path):
    client = await aiohttp_client(create_app(make_config(tmp_path, limits__json_depth=2)))
    resp = await client.post("/auth/sign-in", json={"username": "x", "password": [[1]]})
    assert resp.status == 400 and "deeper than 2 levels" in (await resp.json())["error"]


async def test_json_endpoints_refuse_other_content_types_with_415(client, alice):
    body = b'{"username": "alice", "password": "correct horse"}'
    for media in (
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data",
        "application/jsonp",
        "text/json",
        "",
    ):
        resp = await client.post(
            "/auth/sign-in",
            data=body,
            skip_auto_headers=["Content-Type"],
            headers={"Content-Type": media} if media else {},
        )
        assert resp.status == 415, media
        assert "Content-Type" in (await resp.json())["error"]
    for media in (
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON",
        "application/merge-patch+json",
    ):
        resp = await client.post("/auth/sign-in", data=body, headers={"Content-Type": media})
        assert resp.status == 200, media
    # No body at all needs no type (a fork takes an optional one).
    await client.post("/api/repositories", json={"name": "src"}, headers=alice.headers)
    resp = await client.post(
        "/api/repositories/alice/src/fork", headers={**alice.headers, "Content-Type": "text/plain"}
    )
    assert resp.status != 415, await resp.text()
