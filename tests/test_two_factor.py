"""TOTP as a second factor, through HTTP: enrolment, the two-step sign-in, recovery codes."""

from __future__ import annotations

import asyncio
import io
import time

import pyotp
import segno

from hubsvc.app import create_app
from hubsvc.keys import STORE

from .conftest import make_config, sign_up
from .gitcli import git, remote
from .server import ServerProcess
from .test_admin import PASSWORD, cli, fails, ok, sign_in
from .test_chat_link import BOT_KEY, as_chat, link
from .test_orgs import make_org
from .test_repos import create
from .test_ssh import add_key, open_site
from .test_ws import connect, next_of, nothing_for


def code_of(secret: str, offset: int = 0, margin: float = 5.0) -> str:
    """The authenticator's code now (offset: steps later or earlier)."""
    if offset < 0:
        # The step before is accepted only until the next step begins: not so close
        # to a step's end that it is two steps old when the server reads it.
        left = 30 - time.time() % 30
        if left < margin:
            time.sleep(left + 0.1)
    return pyotp.TOTP(secret).at(time.time() + 30 * offset)


def drawn(uri: str) -> str:
    """segno's SVG document of uri, drawn here as the server is meant to."""
    out = io.BytesIO()
    segno.make(uri, error="m").save(out, kind="svg", xmldecl=False, scale=4)
    return out.getvalue().decode()


async def enrol(client, user) -> tuple[str, list[str]]:
    """Turn TOTP on for user; (secret, recovery codes)."""
    resp = await client.post("/api/users/me/2fa/totp", headers=user.headers)
    assert resp.status == 201, await resp.text()
    body = await resp.json()
    secret = body["secret"]
    assert body["uri"].startswith(f"otpauth://totp/hubsvc:{user.username}?")
    assert "issuer=hubsvc" in body["uri"] and f"secret={secret}" in body["uri"]
    # The code shown at enrolment is the previous step's, so the sign-in's own is new.
    resp = await client.post(
        "/api/users/me/2fa/totp/confirm", json={"code": code_of(secret, -1)}, headers=user.headers
    )
    assert resp.status == 200, await resp.text()
    codes = (await resp.json())["recoveryCodes"]
    assert len(codes) == 10 and len(set(codes)) == 10
    return secret, codes


async def password_step(client, user) -> dict:
    resp = await client.post(
        "/auth/sign-in", json={"username": user.username, "password": user.password}
    )
    assert resp.status == 200, await resp.text()
    return await resp.json()


async def test_enrol_and_sign_in_with_totp(client, alice):
    resp = await client.get("/api/users/me/2fa", headers=alice.headers)
    assert await resp.json() == {"totp": False, "webauthn": [], "recoveryCodesLeft": 0}
    secret, _ = await enrol(client, alice)
    resp = await client.get("/api/users/me/2fa", headers=alice.headers)
    assert await resp.json() == {"totp": True, "webauthn": [], "recoveryCodesLeft": 10}

    body = await password_step(client, alice)
    assert body["twoFactorRequired"] is True
    assert body["methods"] == ["totp", "recovery"]
    assert "token" not in body and "user" not in body
    assert not client.session.cookie_jar.filter_cookies(client.make_url("/"))
    resp = await client.post(
        "/auth/sign-in/2fa", json={"challenge": body["challenge"], "code": code_of(secret)}
    )
    assert resp.status == 200, await resp.text()
    signed = await resp.json()
    assert signed["user"]["username"] == "alice"
    resp = await client.get("/api/users/me", headers={"Authorization": f"Bearer {signed['token']}"})
    assert resp.status == 200
    # The session cookie came with it, as a sign-in's does.
    assert client.session.cookie_jar.filter_cookies(client.make_url("/"))


async def test_enrolment_answers_the_uri_as_a_qr_code(client, alice):
    resp = await client.post("/api/users/me/2fa/totp", headers=alice.headers)
    body = await resp.json()
    # segno's drawing of exactly this URI: what an authenticator app's camera reads.
    assert body["qrSvg"] == drawn(body["uri"])
    assert body["qrSvg"].startswith('<svg xmlns="http://www.w3.org/2000/svg"')
    assert "<script" not in body["qrSvg"]


async def second_step(client, challenge: str, code: str):
    return await client.post("/auth/sign-in/2fa", json={"challenge": challenge, "code": code})


async def test_users_without_a_second_factor_see_no_change(client, alice):
    resp = await client.post(
        "/auth/sign-in", json={"username": alice.username, "password": alice.password}
    )
    body = await resp.json()
    assert resp.status == 200 and set(body) == {"user", "token", "expiresAt"}


async def test_a_recovery_code_signs_in_once(client, alice):
    _, codes = await enrol(client, alice)
    challenge = (await password_step(client, alice))["challenge"]
    resp = await second_step(client, challenge, codes[3].upper())  # case and dash forgiven
    assert resp.status == 200, await resp.text()
    token = (await resp.json())["token"]
    resp = await client.get("/api/users/me/2fa", headers={"Authorization": f"Bearer {token}"})
    assert (await resp.json())["recoveryCodesLeft"] == 9
    challenge = (await password_step(client, alice))["challenge"]
    resp = await second_step(client, challenge, codes[3])
    assert resp.status == 401
    assert (await second_step(client, challenge, codes[4])).status == 200


async def test_a_totp_code_is_taken_once(client, alice):
    secret, _ = await enrol(client, alice)
    code = code_of(secret)
    first = (await password_step(client, alice))["challenge"]
    assert (await second_step(client, first, code)).status == 200
    # The same code in its window, on a fresh challenge: refused (the step is in the
    # database, so another process refuses it as well).
    again = (await password_step(client, alice))["challenge"]
    resp = await second_step(client, again, code)
    assert resp.status == 401 and "invalid" in (await resp.json())["error"]
    # A code of the next step is new: accepted, and the challenge was not used up.
    assert (await second_step(client, again, code_of(secret, 1))).status == 200


async def test_a_challenge_is_single_use_and_bound_to_its_account(client, alice, bob):
    alice_secret, _ = await enrol(client, alice)
    bob_secret, _ = await enrol(client, bob)
    challenge = (await password_step(client, alice))["challenge"]
    # Bob's code does not open Alice's challenge, and his challenge does not sign her in.
    assert (await second_step(client, challenge, code_of(bob_secret))).status == 401
    bobs = (await password_step(client, bob))["challenge"]
    assert (await second_step(client, bobs, code_of(alice_secret))).status == 401
    resp = await second_step(client, challenge, code_of(alice_secret))
    assert resp.status == 200 and (await resp.json())["user"]["username"] == "alice"
    # Used: the next code of the same account does not reuse it.
    resp = await second_step(client, challenge, code_of(alice_secret, 1))
    assert resp.status == 401 and "challenge" in (await resp.json())["error"]


async def test_a_code_without_a_challenge_is_refused(client, alice):
    secret, _ = await enrol(client, alice)
    for challenge in ("", "made-up", "x" * 300):
        resp = await second_step(client, challenge, code_of(secret))
        assert resp.status in (400, 401), challenge
        assert "error" in await resp.json()
    resp = await client.post("/auth/sign-in/2fa", json={"code": code_of(secret)})
    assert resp.status == 400


async def test_an_expired_challenge_is_refused(client, alice):
    secret, _ = await enrol(client, alice)
    challenge = (await password_step(client, alice))["challenge"]
    db = client.app[STORE].db
    await db.write(lambda conn: conn.execute("UPDATE sign_in_challenges SET expires_at = 1"))
    resp = await second_step(client, challenge, code_of(secret))
    assert resp.status == 401


async def test_wrong_codes_spend_the_sign_in_budget(database_url, tmp_path, aiohttp_client):
    config = make_config(
        tmp_path,
        database__url=database_url,
        rate_limit__enabled=True,
        rate_limit__sign_in_per_15_minutes=4,
    )
    client = await aiohttp_client(create_app(config))
    alice = await sign_up(client, "alice")
    secret, _ = await enrol(client, alice)
    challenge = (await password_step(client, alice))["challenge"]  # 1 of 4
    for _ in range(3):  # 2, 3, 4
        assert (await second_step(client, challenge, "000000")).status == 401
    resp = await second_step(client, challenge, code_of(secret))
    assert resp.status == 429 and "Retry-After" in resp.headers
    # The password step of the same account shares the budget.
    resp = await client.post(
        "/auth/sign-in", json={"username": "alice", "password": alice.password}
    )
    assert resp.status == 429


async def test_enrolment_needs_the_person_and_a_right_code(client, alice):
    resp = await client.post(
        "/api/users/me/tokens", json={"name": "ci", "scopes": ["user:write"]}, headers=alice.headers
    )
    assert resp.status == 201, await resp.text()
    pat = {"Authorization": f"Bearer {(await resp.json())['secret']}"}
    resp = await client.post("/api/users/me/2fa/totp", headers=pat)
    assert resp.status == 403 and "session" in (await resp.json())["error"]
    resp = await client.post(
        "/api/users/me/2fa/totp/confirm", json={"code": "123456"}, headers=alice.headers
    )
    assert resp.status == 409
    resp = await client.post("/api/users/me/2fa/totp", headers=alice.headers)
    secret = (await resp.json())["secret"]
    wrong = str((int(code_of(secret)) + 1) % 1000000).zfill(6)
    resp = await client.post(
        "/api/users/me/2fa/totp/confirm", json={"code": wrong}, headers=alice.headers
    )
    assert resp.status == 422
    # Not on yet: the password alone still signs in.
    body = await (
        await client.post("/auth/sign-in", json={"username": "alice", "password": alice.password})
    ).json()
    assert "token" in body
    # Never returned again, nor stored in the clear.
    resp = await client.get("/api/users/me/2fa", headers=alice.headers)
    assert secret not in await resp.text()
    stored = await client.app[STORE].two_factor.secret(alice.id)
    assert secret.encode() not in stored[0]


async def test_turning_totp_off_takes_the_password_and_a_code(client, alice):
    secret, codes = await enrol(client, alice)
    url = "/api/users/me/2fa/totp"
    resp = await client.delete(
        url,
        json={"currentPassword": "wrong password", "code": code_of(secret)},
        headers=alice.headers,
    )
    assert resp.status == 403
    resp = await client.delete(
        url, json={"currentPassword": alice.password, "code": "000000"}, headers=alice.headers
    )
    assert resp.status == 403
    resp = await client.delete(
        url, json={"currentPassword": alice.password, "code": codes[0]}, headers=alice.headers
    )
    assert resp.status == 204
    resp = await client.get("/api/users/me/2fa", headers=alice.headers)
    assert await resp.json() == {"totp": False, "webauthn": [], "recoveryCodesLeft": 0}
    body = await (
        await client.post("/auth/sign-in", json={"username": "alice", "password": alice.password})
    ).json()
    assert "token" in body


async def test_git_over_http_takes_a_token_not_the_password(client, alice, tmp_path):
    await create(client, alice, "proj", visibility="private", autoInit=True)
    # Before: the password clones, and is remembered for a while.
    await git("clone", "-q", remote(client, alice, "alice", "proj"), str(tmp_path / "before"))
    await enrol(client, alice)
    code, _, err = await git(
        "clone", "-q", remote(client, alice, "alice", "proj"), str(tmp_path / "pw"), check=False
    )
    assert code != 0
    assert "two-factor authentication is on" in err and "personal access token" in err
    resp = await client.post(
        "/api/users/me/tokens",
        json={"name": "git", "scopes": ["repo:write"]},
        headers=alice.headers,
    )
    secret = (await resp.json())["secret"]
    url = remote(client, alice, "alice", "proj", secret)
    await git("clone", "-q", url, str(tmp_path / "token"))
    await git("commit", "-q", "--allow-empty", "-m", "with a token", cwd=tmp_path / "token")
    await git("push", "-q", url, "HEAD", cwd=tmp_path / "token")


async def make_acme(client, owner, member) -> None:
    """acme, owned by owner, member in it, its private repository app with an issue."""
    await make_org(client, owner, member)
    resp = await client.post(
        "/api/repositories/acme/app/issues", json={"title": "first"}, headers=owner.headers
    )
    assert resp.status == 201


async def feed_names(client, user) -> list[str]:
    resp = await client.get("/api/events", headers=user.headers)
    return [e["repository"]["name"] for e in (await resp.json())["events"]]


async def test_an_organization_requiring_2fa_shuts_out_members_without(
    client, alice, bob, tmp_path
):
    await make_acme(client, alice, bob)
    rule = {"requireTwoFactor": True}
    resp = await client.patch("/api/orgs/acme", json=rule, headers=alice.headers)
    assert resp.status == 409 and "your own account" in (await resp.json())["error"]
    await enrol(client, alice)
    resp = await client.patch("/api/orgs/acme", json=rule, headers=bob.headers)
    assert resp.status == 403  # a member, not an owner
    assert "app" in await feed_names(client, bob)
    resp = await client.patch("/api/orgs/acme", json=rule, headers=alice.headers)
    assert resp.status == 200, await resp.text()
    assert (await resp.json())["organization"]["requireTwoFactor"] is True
    resp = await client.get("/api/orgs/acme", headers=bob.headers)
    assert (await resp.json())["organization"]["requireTwoFactor"] is True

    # Bob, a member without a second factor: the API, git and the feed refuse him.
    resp = await client.get("/api/repositories/acme/app", headers=bob.headers)
    assert resp.status == 403
    assert "acme requires two-factor authentication" in (await resp.json())["error"]
    resp = await client.get("/api/repositories/acme/app/issues", headers=bob.headers)
    assert resp.status == 403
    code, _, err = await git(
        "clone",
        "-q",
        remote(client, bob, "acme", "app", bob.token),
        str(tmp_path / "no"),
        check=False,
    )
    assert code != 0 and "acme requires two-factor authentication" in err
    assert "app" not in await feed_names(client, bob)
    resp = await client.get("/api/users/acme/repositories", headers=bob.headers)
    assert [r["name"] for r in (await resp.json())["repositories"]] == []
    # Alice, who has one, is not held back.
    assert (await client.get("/api/repositories/acme/app", headers=alice.headers)).status == 200

    # Once he turns it on, all of it opens again; turning it off is refused.
    secret, _ = await enrol(client, bob)
    assert (await client.get("/api/repositories/acme/app", headers=bob.headers)).status == 200
    await git("clone", "-q", remote(client, bob, "acme", "app", bob.token), str(tmp_path / "yes"))
    assert "app" in await feed_names(client, bob)
    resp = await client.delete(
        "/api/users/me/2fa/totp",
        json={"currentPassword": bob.password, "code": code_of(secret, 1)},
        headers=bob.headers,
    )
    assert resp.status == 409 and "acme" in (await resp.json())["error"]
    resp = await client.get("/api/users/me/2fa", headers=bob.headers)
    assert (await resp.json())["totp"] is True

    # The rule lifted, members without a factor are back.
    resp = await client.patch(
        "/api/orgs/acme", json={"requireTwoFactor": False}, headers=alice.headers
    )
    assert (await resp.json())["organization"]["requireTwoFactor"] is False


async def test_a_socket_loses_the_organization_s_repositories_under_the_rule(client, alice, bob):
    await make_acme(client, alice, bob)
    await enrol(client, alice)
    ws = await connect(client, bob)
    app = {"owner": "acme", "name": "app"}
    await ws.send_json({"type": "subscribe", "repository": app})
    await next_of(ws, "subscribed")
    resp = await client.patch(
        "/api/orgs/acme", json={"requireTwoFactor": True}, headers=alice.headers
    )
    assert resp.status == 200
    gone = await next_of(ws, "unsubscribed")
    assert gone["repository"] == app and gone["reason"] == "access revoked"
    await client.post(
        "/api/repositories/acme/app/issues", json={"title": "unseen"}, headers=alice.headers
    )
    await nothing_for(ws)
    await ws.send_json({"type": "subscribe", "repository": app})
    assert "requires two-factor authentication" in (await next_of(ws, "error"))["error"]
    await ws.close()


async def test_racing_uses_of_one_code_sign_in_once(client, alice):
    secret, codes = await enrol(client, alice)
    for code in (codes[0], code_of(secret)):
        challenges = [(await password_step(client, alice))["challenge"] for _ in range(4)]
        answers = await asyncio.gather(*(second_step(client, c, code) for c in challenges))
        assert sorted(a.status for a in answers) == [200, 401, 401, 401], code


async def test_another_process_refuses_a_code_this_one_took(database_url, tmp_path, aiohttp_client):
    # Two servers over one database (SQLite file or PostgreSQL), as behind a balancer.
    config = make_config(tmp_path, database__url=database_url)
    first = await aiohttp_client(create_app(config))
    second = await aiohttp_client(create_app(config))
    alice = await sign_up(first, "alice")
    secret, _ = await enrol(first, alice)
    code = code_of(secret)
    one = (await password_step(first, alice))["challenge"]
    two = (await password_step(second, alice))["challenge"]
    assert (await second_step(first, one, code)).status == 200
    assert (await second_step(second, two, code)).status == 401


async def test_codes_from_many_addresses_share_the_account_s_budget(
    database_url, tmp_path, aiohttp_client
):
    config = make_config(
        tmp_path,
        database__url=database_url,
        rate_limit__enabled=True,
        rate_limit__sign_in_per_15_minutes=4,
        server__trusted_proxies=["127.0.0.1/32", "::1/128"],
    )
    client = await aiohttp_client(create_app(config))
    alice = await sign_up(client, "alice")
    secret, _ = await enrol(client, alice)
    challenge = (await password_step(client, alice))["challenge"]
    statuses = []
    for n in range(5):  # each wrong code from an address of its own
        resp = await client.post(
            "/auth/sign-in/2fa",
            json={"challenge": challenge, "code": "000000"},
            headers={"X-Forwarded-For": f"203.0.113.{n + 1}"},
        )
        statuses.append(resp.status)
    assert statuses == [401, 401, 401, 401, 429]


def test_an_administrator_turns_off_a_lost_second_factor(tmp_path):
    data = tmp_path / "data"
    with ServerProcess(data) as server:
        token = server.sign_up("ada", PASSWORD)["token"]
        bearer = {"Authorization": f"Bearer {token}"}
        status, body = server.request("POST", "/api/users/me/2fa/totp", {}, bearer)
        assert status == 201, body
        code = code_of(body["secret"], -1)
        status, _ = server.request("POST", "/api/users/me/2fa/totp/confirm", {"code": code}, bearer)
        assert status == 200
        assert "twoFactorRequired" in sign_in(server, "ada")[1]
        # The authenticator and the recovery codes are lost: the operator steps in.
        assert "turned off two-factor" in ok(cli(data, "reset-2fa", "ada"))
        status, body = sign_in(server, "ada")
        assert status == 200 and "token" in body
        assert "no second factor" in ok(cli(data, "reset-2fa", "ada"))
        assert "no user named nobody" in fails(cli(data, "reset-2fa", "nobody"))


async def test_the_chat_link_keeps_working(database_url, tmp_path, aiohttp_client):
    config = make_config(tmp_path, database__url=database_url, chat__bot_key=BOT_KEY)
    client = await aiohttp_client(create_app(config))
    alice = await sign_up(client, "alice")
    await create(client, alice, "proj", visibility="private", autoInit=True)
    await link(client, alice, "c1")
    await enrol(client, alice)
    for path in ("/api/users/me", "/api/repositories/alice/proj/issues"):
        resp = await client.get(path, headers=as_chat("c1"))
        assert resp.status == 200, (path, await resp.text())
    # The bot cannot touch the factors (enrolment and removal are the person's).
    resp = await client.delete(
        "/api/users/me/2fa/totp", json={"currentPassword": "x", "code": "1"}, headers=as_chat("c1")
    )
    assert resp.status == 403


def test_ssh_keys_keep_working_and_ssh_follows_the_organization_s_rule(tmp_path):
    with open_site(tmp_path) as site:

        def turn_on(user: str) -> None:
            status, body = site.api("POST", "/api/users/me/2fa/totp", {}, user)
            assert status == 201, body
            code = code_of(body["secret"], -1)
            assert (
                site.api("POST", "/api/users/me/2fa/totp/confirm", {"code": code}, user)[0] == 200
            )

        assert site.api("POST", "/api/orgs", {"name": "acme"}, "alice")[0] == 201
        assert site.api("PUT", "/api/orgs/acme/members/bob", {}, "alice")[0] == 201
        body = {"name": "app", "owner": "acme", "visibility": "private", "autoInit": True}
        assert site.api("POST", "/api/repositories", body, "alice")[0] == 201
        turn_on("alice")
        assert site.api("PATCH", "/api/orgs/acme", {"requireTwoFactor": True}, "alice")[0] == 200
        alice_key, _ = add_key(site, "alice", "alice-2fa")
        done = site.git(alice_key, "clone", "-q", site.url("acme", "app"), str(tmp_path / "a"))
        assert done.returncode == 0, done.stderr  # a key is not a password: it keeps working
        bob_key, _ = add_key(site, "bob", "bob-2fa")
        refused = site.git(bob_key, "clone", "-q", site.url("acme", "app"), str(tmp_path / "b"))
        assert refused.returncode != 0
        assert "acme requires two-factor authentication" in refused.stderr
        turn_on("bob")
        done = site.git(bob_key, "clone", "-q", site.url("acme", "app"), str(tmp_path / "c"))
        assert done.returncode == 0, done.stderr
