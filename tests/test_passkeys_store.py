"""The passkeys' store on both engines, and the options the API answers over HTTP.

Credentials themselves are made by a real authenticator only (tests/test_passkeys.py);
here the challenges' single use, their binding and the counter's compare-and-set.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from webauthn.helpers import bytes_to_base64url

from hubsvc.errors import Conflict
from hubsvc.services.passkeys import relying_party
from hubsvc.store import Store
from hubsvc.store.passkeys import MAX_OPEN

from .conftest import make_config
from .test_two_factor import code_of


async def _user(store: Store, name: str) -> int:
    user = await store.users.create(
        username=name, email=f"{name}@example.com", name=name, password_hash="x"
    )
    return user["id"]


async def test_a_challenge_is_taken_once_by_its_user_and_sign_in(tmp_path, database_url):
    store = Store(tmp_path / "hubsvc.db", url=database_url)
    await store.open()
    try:
        keys = store.passkeys
        alice, bob = await _user(store, "alice"), await _user(store, "bob")
        await keys.add_challenge(alice, "register", b"c1", 60)
        assert await keys.take_challenge(b"c1", "register", user_id=bob) is None
        assert await keys.take_challenge(b"c1", "sign-in", user_id=alice) is None
        # Many at once: exactly one takes it.
        takes = await asyncio.gather(
            *(keys.take_challenge(b"c1", "register", user_id=alice) for _ in range(8))
        )
        assert takes.count(alice) == 1 and takes.count(None) == 7
        # A sign-in's challenge belongs to its password step, whoever asks.
        await keys.add_challenge(alice, "sign-in", b"c2", 60, bound=b"step-a")
        assert await keys.take_challenge(b"c2", "sign-in", bound=b"step-b") is None
        assert await keys.take_challenge(b"c2", "sign-in", bound=b"step-a") == alice
        assert await keys.take_challenge(b"c2", "sign-in", bound=b"step-a") is None
        # Expired: refused, and swept by the next one made.
        await keys.add_challenge(alice, "register", b"c3", -1)
        assert await keys.take_challenge(b"c3", "register", user_id=alice) is None
        await keys.add_challenge(bob, "register", b"c4", 60)
        left = await store.db.read(
            lambda c: [bytes(r[0]) for r in c.execute("SELECT challenge FROM webauthn_challenges")]
        )
        assert left == [b"c4"]
        # Asking again and again keeps the newest few, of this user and ceremony only.
        for n in range(MAX_OPEN + 3):
            await keys.add_challenge(alice, "register", b"r%d" % n, 60 + n)
        left = await store.db.read(
            lambda c: sorted(
                bytes(r[0]) for r in c.execute("SELECT challenge FROM webauthn_challenges")
            )
        )
        assert left == sorted([b"c4"] + [b"r%d" % n for n in range(3, MAX_OPEN + 3)])
        assert await keys.take_challenge(b"r2", "register", user_id=alice) is None
    finally:
        await store.close()


async def test_credentials_are_unique_and_the_counter_moves_once(tmp_path, database_url):
    store = Store(tmp_path / "hubsvc.db", url=database_url)
    await store.open()
    try:
        keys = store.passkeys
        alice, bob = await _user(store, "alice"), await _user(store, "bob")
        added = await keys.add(alice, b"cred", b"pk", 0, "laptop", ["internal"])
        assert added["credential_id"] == b"cred" and added["transports"] == ["internal"]
        with pytest.raises(Conflict):
            await keys.add(bob, b"cred", b"pk2", 0, "stolen", [])
        assert await keys.by_credential(bob, b"cred") is None
        assert (await keys.by_credential(alice, b"cred"))["id"] == added["id"]
        # Two uses that both saw counter 0: only one stores its counter.
        moved = await asyncio.gather(keys.used(added["id"], 0, 1), keys.used(added["id"], 0, 1))
        assert sorted(moved) == [False, True]
        assert (await keys.listing(alice))[0]["sign_count"] == 1
        assert await keys.count(alice) == 1 and await keys.count(bob) == 0
        assert not await keys.delete(bob, added["id"])
        assert await keys.delete(alice, added["id"])
        assert await keys.listing(alice) == []
        # run.py reset-2fa, for a user who lost their passkey: it goes, and its ceremonies.
        await keys.add(alice, b"cred2", b"pk", 0, "lost", [])
        await keys.add_challenge(alice, "register", b"open", 60)
        assert await store.two_factor.enabled(alice)
        assert await store.two_factor.reset(alice) is True
        assert await keys.listing(alice) == [] and not await store.two_factor.enabled(alice)
        assert await keys.take_challenge(b"open", "register", user_id=alice) is None
    finally:
        await store.close()


@pytest.mark.parametrize(
    ("base_url", "rp_id", "origin"),
    [
        ("https://git.example.com", "git.example.com", "https://git.example.com"),
        ("https://git.example.com:443/hub/", "git.example.com", "https://git.example.com"),
        ("http://localhost:8080", "localhost", "http://localhost:8080"),
        ("https://Git.Example.com:8443", "git.example.com", "https://git.example.com:8443"),
    ],
)
def test_the_relying_party_is_the_base_urls_host_and_origin(tmp_path, base_url, rp_id, origin):
    rp = relying_party(make_config(tmp_path, server__base_url=base_url))
    assert (rp.id, rp.origin) == (rp_id, origin)


async def test_registration_options_over_http(client):
    status = await client.post(
        "/auth/sign-up",
        json={"email": "a@example.com", "username": "alice", "password": "12345678", "name": "A"},
    )
    token = (await status.json())["token"]
    auth = {"Authorization": f"Bearer {token}"}
    resp = await client.post("/api/users/me/2fa/webauthn/register", headers=auth)
    assert resp.status == 200
    options = await resp.json()
    assert options["rp"] == {"id": "127.0.0.1", "name": "hubsvc"}  # the default base_url's host
    assert options["user"]["name"] == "alice" and options["excludeCredentials"] == []
    assert len(options["challenge"]) >= 43  # 32 random bytes or more, base64url
    again = await (await client.post("/api/users/me/2fa/webauthn/register", headers=auth)).json()
    assert again["challenge"] != options["challenge"]
    client.session.cookie_jar.clear()  # the sign-up's session cookie
    resp = await client.post("/api/users/me/2fa/webauthn/register")
    assert resp.status == 401
    resp = await client.post(
        "/api/users/me/2fa/webauthn/register/finish",
        json={"credential": {"id": "x", "rawId": "x", "type": "public-key", "response": {}}},
        headers=auth,
    )
    assert resp.status == 400 and (await resp.json())["error"].startswith("credential:")


def _b64(raw: bytes) -> str:
    import base64

    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


async def test_sign_in_endpoints_refuse_without_a_live_password_step(client):
    import json

    import pyotp

    resp = await client.post(
        "/auth/sign-up",
        json={"email": "a@example.com", "username": "alice", "password": "12345678", "name": "A"},
    )
    auth = {"Authorization": f"Bearer {(await resp.json())['token']}"}
    client.session.cookie_jar.clear()
    # Shaped as an assertion, naming a challenge no one gave: refused before any check of it.
    data = {"type": "webauthn.get", "challenge": _b64(b"x" * 32), "origin": "http://127.0.0.1"}
    shaped = {
        "id": _b64(b"cred"),
        "rawId": _b64(b"cred"),
        "type": "public-key",
        "response": {
            "clientDataJSON": _b64(json.dumps(data).encode()),
            "authenticatorData": _b64(b"\0" * 37),
            "signature": _b64(b"sig"),
        },
    }
    for path, body, status in (
        ("/auth/sign-in/webauthn", {"challenge": "made-up"}, 401),
        ("/auth/sign-in/webauthn", {}, 400),
        ("/auth/sign-in/webauthn/finish", {"challenge": "made-up", "credential": shaped}, 401),
        ("/auth/sign-in/webauthn/finish", {"challenge": "made-up", "credential": {}}, 400),
        ("/auth/sign-in/webauthn/finish", {"challenge": "made-up"}, 400),
    ):
        resp = await client.post(path, json=body)
        assert resp.status == status, (path, body, await resp.text())
        assert "error" in await resp.json()
    # A password step of an account with TOTP and no passkey: no options to give.
    resp = await client.post("/api/users/me/2fa/totp", headers=auth)
    secret = (await resp.json())["secret"]
    code = code_of(secret, -1)
    resp = await client.post("/api/users/me/2fa/totp/confirm", json={"code": code}, headers=auth)
    assert resp.status == 200
    resp = await client.post("/auth/sign-in", json={"username": "alice", "password": "12345678"})
    step = await resp.json()
    assert step["methods"] == ["totp", "recovery"]
    resp = await client.post("/auth/sign-in/webauthn", json={"challenge": step["challenge"]})
    assert resp.status == 409 and "no passkey" in (await resp.json())["error"]
    # The assertion names no options of this sign-in: refused, and the sign-in lives on.
    resp = await client.post(
        "/auth/sign-in/webauthn/finish", json={"challenge": step["challenge"], "credential": shaped}
    )
    assert resp.status == 401 and "not for this sign-in" in (await resp.json())["error"]
    resp = await client.post(
        "/auth/sign-in/2fa", json={"challenge": step["challenge"], "code": pyotp.TOTP(secret).now()}
    )
    assert resp.status == 200, await resp.text()


def test_a_server_start_leaves_py_webauthn_unimported():
    # It cost a third of a second of CPU at every start (tests start many servers); the
    # ceremonies import it on first use, and a listing shows ids without it.
    code = (
        "import sys, hubsvc.app, hubsvc.services.passkeys as p; "
        "print('webauthn' in sys.modules, p.passkey_json({'id': 1, 'name': 'k', "
        "'credential_id': b'\\xfb\\xff\\x01', 'transports': [], 'created_at': None, "
        "'last_used_at': None})['credentialId'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    ).stdout.split()
    assert out == ["False", bytes_to_base64url(b"\xfb\xff\x01")]
