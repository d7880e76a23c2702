"""TOTP as a second factor, through HTTP: enrolment, the two-step sign-in, recovery codes."""

from __future__ import annotations

import time

import pyotp


def code_of(secret: str, offset: int = 0) -> str:
    """The authenticator's code now (offset: steps later or earlier)."""
    return pyotp.TOTP(secret).at(time.time() + 30 * offset)


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
