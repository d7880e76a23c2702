"""Sign-up, sign-in, sign-out, cookie and bearer flows, revoked and expired tokens."""

from __future__ import annotations

import time

import pytest

from hubsvc.app import create_app
from hubsvc.errors import BadRequest
from hubsvc.keys import STORE
from hubsvc.web.auth import TOKEN_CACHE, dummy_hash, token_digest, validate_password

from .conftest import make_config, sign_up


async def test_sign_up_answers_user_and_token_and_sets_cookie(client):
    resp = await client.post(
        "/auth/sign-up",
        json={
            "email": "Carol@Example.com",
            "username": "carol",
            "password": "longenough",
            "name": "Carol",
        },
    )
    assert resp.status == 201
    body = await resp.json()
    assert set(body["user"]) >= {"id", "email", "username", "name"}
    assert body["user"]["email"] == "Carol@Example.com"
    assert len(body["token"]) >= 43
    cookie = resp.headers["Set-Cookie"]
    assert cookie.startswith("session=") and "HttpOnly" in cookie and "SameSite=Lax" in cookie
    assert "Secure" not in cookie  # base URL is http


async def test_first_account_is_admin_and_second_is_not(client):
    first = await sign_up(client)
    second = await sign_up(client)
    me1 = await (await client.get("/api/users/me", headers=first.headers)).json()
    me2 = await (await client.get("/api/users/me", headers=second.headers)).json()
    assert me1["user"]["isAdmin"] is True
    assert me2["user"]["isAdmin"] is False


async def test_sign_up_validation(client):
    good = {"email": "x@example.com", "username": "xavier", "password": "12345678", "name": "X"}
    cases = [
        ({"username": "-bad"}, "username"),
        ({"username": "bad-"}, "username"),
        ({"username": "a" * 40}, "username"),
        ({"username": "me"}, "username"),
        ({"username": "API"}, "username"),
        ({"password": "short"}, "password"),
        ({"password": "é" * 37}, "password"),  # 74 bytes: over bcrypt's 72
        ({"email": "not-an-email"}, "email"),
        ({"name": 5}, "name"),
    ]
    for change, field in cases:
        resp = await client.post("/auth/sign-up", json={**good, **change})
        assert resp.status == 400, change
        assert field in (await resp.json())["error"]
    missing = {k: v for k, v in good.items() if k != "email"}
    resp = await client.post("/auth/sign-up", json=missing)
    assert resp.status == 400 and "email" in (await resp.json())["error"]


async def test_taken_username_or_email_is_409_ignoring_case(client, alice):
    resp = await client.post(
        "/auth/sign-up",
        json={
            "email": "other@example.com",
            "username": "ALICE",
            "password": "12345678",
            "name": "A",
        },
    )
    assert resp.status == 409
    resp = await client.post(
        "/auth/sign-up",
        json={
            "email": "ALICE@example.com",
            "username": "alice2",
            "password": "12345678",
            "name": "A",
        },
    )
    assert resp.status == 409


async def test_sign_in_by_email_or_username_and_same_error_for_everything_wrong(client, alice):
    for login in ({"email": "alice@example.com"}, {"username": "Alice"}):
        resp = await client.post("/auth/sign-in", json={**login, "password": alice.password})
        assert resp.status == 200
        body = await resp.json()
        assert body["user"]["username"] == "alice"
        assert body["expiresAt"].endswith("Z")
    wrong = [
        {"email": "alice@example.com", "password": "wrong password"},
        {"username": "alice", "password": "wrong password"},
        {"username": "nobody", "password": alice.password},
        {"email": "nobody@example.com", "password": alice.password},
    ]
    for body in wrong:
        resp = await client.post("/auth/sign-in", json=body)
        assert resp.status == 401
        assert await resp.json() == {"error": "invalid credentials"}
    resp = await client.post("/auth/sign-in", json={"password": "x" * 10})
    assert resp.status == 400


async def test_cookie_and_bearer_resolve_to_the_same_user(client, alice):
    resp = await client.post(
        "/auth/sign-in", json={"username": "alice", "password": alice.password}
    )
    token = (await resp.json())["token"]
    by_cookie = await client.get("/api/users/me")  # the cookie jar holds the session cookie
    assert by_cookie.status == 200
    client.session.cookie_jar.clear()
    by_bearer = await client.get("/api/users/me", headers={"Authorization": f"Bearer {token}"})
    assert (await by_cookie.json()) == (await by_bearer.json())
    anonymous = await client.get("/api/users/me")
    assert anonymous.status == 401
    assert await anonymous.json() == {"error": "authentication required"}


async def test_sign_out_revokes_the_token_everywhere(client, alice):
    resp = await client.post(
        "/auth/sign-in", json={"username": "alice", "password": alice.password}
    )
    token = (await resp.json())["token"]
    headers = {"Authorization": f"Bearer {token}"}
    assert (await client.get("/api/users/me")).status == 200
    resp = await client.post("/auth/sign-out")
    assert resp.status == 204
    assert (await client.get("/api/users/me", headers=headers)).status == 401
    # The other token of the user is untouched.
    assert (await client.get("/api/users/me", headers=alice.headers)).status == 200
    # A revoked token is 401 even on a public route.
    assert (await client.get("/health", headers=headers)).status == 401


async def test_sign_out_by_bearer(client, alice):
    assert (await client.post("/auth/sign-out", headers=alice.headers)).status == 204
    resp = await client.get("/api/users/me", headers=alice.headers)
    assert resp.status == 401


async def test_expired_token_is_401(client, alice):
    store = client.app[STORE]
    await store.db.write(
        lambda c: c.execute(
            "UPDATE tokens SET expires_at = ? WHERE hash = ?",
            (int(time.time()) - 1, token_digest(alice.token)),
        )
    )
    client.app[TOKEN_CACHE].forget(token_digest(alice.token))
    resp = await client.get("/api/users/me", headers=alice.headers)
    assert resp.status == 401


async def test_garbage_bearer_is_401(client):
    resp = await client.get("/api/users/me", headers={"Authorization": "Bearer nope"})
    assert resp.status == 401
    assert "error" in await resp.json()


async def test_tokens_are_stored_only_as_hashes(client, alice):
    rows = await client.app[STORE].db.read(
        lambda c: c.execute("SELECT hash FROM tokens").fetchall()
    )
    assert rows and all(bytes(r[0]) != alice.token.encode() for r in rows)
    dump = await client.app[STORE].db.read(
        lambda c: "\n".join(
            str(tuple(r)) for t in ("tokens", "users") for r in c.execute(f"SELECT * FROM {t}")
        )
    )
    assert alice.token not in dump
    assert alice.password not in dump


async def test_cookie_writes_need_an_allowed_origin(client, alice):
    await client.post("/auth/sign-in", json={"username": "alice", "password": alice.password})
    resp = await client.patch(
        "/api/users/me/settings", json={"bio": "x"}, headers={"Origin": "https://evil.example"}
    )
    assert resp.status == 403
    resp = await client.patch(
        "/api/users/me/settings",
        json={"bio": "x"},
        headers={"Referer": "https://evil.example/page"},
    )
    assert resp.status == 403
    good = str(client.make_url("/")).rstrip("/")
    resp = await client.patch(
        "/api/users/me/settings", json={"bio": "ok"}, headers={"Origin": good}
    )
    assert resp.status == 200
    # Bearer requests are not subject to the origin check: a page cannot forge them.
    client.session.cookie_jar.clear()
    resp = await client.patch(
        "/api/users/me/settings",
        json={"bio": "b"},
        headers={**alice.headers, "Origin": "https://evil.example"},
    )
    assert resp.status == 200


async def test_sign_in_attempts_are_limited_per_ip_and_login(aiohttp_client, tmp_path):
    config = make_config(tmp_path, rate_limit__enabled=True, rate_limit__sign_in_per_15_minutes=3)
    client = await aiohttp_client(create_app(config))
    await sign_up(client, "dave")
    for _ in range(3):
        resp = await client.post(
            "/auth/sign-in", json={"username": "dave", "password": "wrongwrong"}
        )
        assert resp.status == 401
    resp = await client.post("/auth/sign-in", json={"username": "dave", "password": "wrongwrong"})
    assert resp.status == 429
    assert int(resp.headers["Retry-After"]) > 0
    # Another login from the same address is counted on its own.
    resp = await client.post("/auth/sign-in", json={"username": "erin", "password": "wrongwrong"})
    assert resp.status == 401


async def test_unknown_login_checks_a_hash_of_the_configured_cost(aiohttp_client, tmp_path):
    # Timing itself is measured in benchmarks/bench_sign_in.py; here: the work is the same,
    # because the dummy hash checked for an unknown login has the real hashes' cost.
    config = make_config(tmp_path, security__bcrypt_rounds=6)
    client = await aiohttp_client(create_app(config))
    await sign_up(client, "gina")
    real = (await client.app[STORE].users.by_login("gina"))["password_hash"]
    resp = await client.post("/auth/sign-in", json={"username": "nobody", "password": "whatever1"})
    assert resp.status == 401
    cost = lambda hashed: int(hashed.split(b"$")[2])  # noqa: E731  $2b$<cost>$<salt+hash>
    assert cost(real.encode()) == 6
    assert cost(dummy_hash(config["security"]["bcrypt_rounds"])) == 6
    assert cost(dummy_hash(12)) == 12


async def test_passwords_over_72_bytes_are_400_naming_the_limit(client, alice):
    long = "é" * 37  # 74 bytes of UTF-8, 37 characters
    resp = await client.post("/auth/sign-in", json={"username": "alice", "password": long})
    assert resp.status == 400
    assert (await resp.json())["error"] == "password: must be 8 to 72 bytes"
    resp = await client.post("/auth/sign-in", json={"username": "nobody", "password": "x" * 73})
    assert resp.status == 400
    # A lone surrogate is no UTF-8 at all: refused, not a crash.
    for path, body in (
        (
            "/auth/sign-up",
            '{"email": "s@example.com", "username": "sur", '
            '"name": "S", "password": "\\ud800abcdefgh"}',
        ),
        ("/auth/sign-in", '{"username": "alice", "password": "\\ud800abcdefgh"}'),
    ):
        resp = await client.post(path, data=body, headers={"Content-Type": "application/json"})
        assert resp.status == 400, path
        assert "password" in (await resp.json())["error"]
    # Exactly 72 bytes is a valid password, at sign-up and at sign-in.
    edge = await sign_up(client, "edge", password="é" * 36)
    resp = await client.post("/auth/sign-in", json={"username": "edge", "password": edge.password})
    assert resp.status == 200


def test_validate_password_is_the_one_check_for_new_passwords():
    for good in ("12345678", "é" * 36, "x" * 72):
        validate_password(good)
    for bad in ("short", "x" * 73, "é" * 37, "\ud800" * 8):
        with pytest.raises(BadRequest, match="password: must be"):
            validate_password(bad)
    validate_password("short", new=False)  # sign-in checks only the upper limit
    with pytest.raises(BadRequest):
        validate_password("x" * 73, new=False)


async def test_one_sign_in_budget_per_account_by_username_or_email(aiohttp_client, tmp_path):
    config = make_config(tmp_path, rate_limit__enabled=True, rate_limit__sign_in_per_15_minutes=3)
    client = await aiohttp_client(create_app(config))
    await sign_up(client, "hank")
    for login in ({"username": "hank"}, {"email": "HANK@example.com"}, {"username": "HANK"}):
        resp = await client.post("/auth/sign-in", json={**login, "password": "wrongwrong"})
        assert resp.status == 401
    resp = await client.post(
        "/auth/sign-in", json={"email": "hank@example.com", "password": "wrongwrong"}
    )
    assert resp.status == 429
    # An unknown login is counted by its casefolded text.
    for _ in range(3):
        resp = await client.post("/auth/sign-in", json={"username": "Ghost", "password": "x" * 8})
        assert resp.status == 401
    resp = await client.post("/auth/sign-in", json={"username": "GHOST", "password": "x" * 8})
    assert resp.status == 429


async def test_sign_in_limit_groups_ipv6_clients_by_64(aiohttp_client, tmp_path):
    config = make_config(
        tmp_path,
        rate_limit__enabled=True,
        rate_limit__sign_in_per_15_minutes=2,
        server__trusted_proxies=["127.0.0.0/8"],
    )
    client = await aiohttp_client(create_app(config))

    async def attempt(ip: str) -> int:
        resp = await client.post(
            "/auth/sign-in",
            headers={"X-Forwarded-For": ip},
            json={"username": "ivy", "password": "wrongwrong"},
        )
        return resp.status

    # Two addresses of one /64 spend one budget ...
    assert await attempt("2001:db8:1:2::1") == 401
    assert await attempt("2001:db8:1:2:ffff::9") == 401
    assert await attempt("2001:db8:1:2::abcd") == 429
    # ... another /64 has its own.
    assert await attempt("2001:db8:1:3::1") == 401


async def test_health_answered_alone_still_refuses_bad_credentials(client, alice):
    """/health skips the later middlewares only for a request carrying nothing they act on."""
    resp = await client.get("/health", headers={"X-Request-Id": "probe-1"})
    assert resp.status == 200 and (await resp.json())["status"] == "ok"
    assert resp.headers["X-Request-Id"] == "probe-1"
    assert (await client.head("/health")).status == 200
    assert (await client.get("/health", headers=alice.headers)).status == 200
    for headers in ({"Authorization": "Bearer nope"}, {"X-Chat-Bot-Key": "nope"}):
        resp = await client.get("/health", headers=headers)
        assert resp.status == 401 and "error" in await resp.json()
    assert (await client.post("/health")).status == 405
