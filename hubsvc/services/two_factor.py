"""A second factor: TOTP enrolment, codes taken once, recovery codes, and the sign-in challenge.

A sign-in whose password is right for a user with a second factor gets a challenge, not
a session: a random string good for five minutes and one use, naming the user. Whoever
then proves the factor (a TOTP code, a recovery code, or a passkey through
`take_challenge`) gets the session `finish_sign_in` gives, exactly as a plain sign-in.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import io
import secrets
import time
from typing import Any

import pyotp
import segno
from aiohttp import web
from cryptography.fernet import Fernet, InvalidToken

from ..clients import client_ip
from ..config import Config
from ..errors import Forbidden
from ..keys import CONFIG, STORE
from ..timeutil import iso
from ..web.auth import BASIC_CACHE, is_admin, issue_token
from ..web.present import user_public
from ..web.ratelimit import SIGN_IN_LIMITER, sign_in_key, too_many
from ..web.rest import json_response
from . import audit

CHALLENGE_SECONDS = 300
ISSUER = "hubsvc"
RECOVERY_CODES = 10
STEP_SECONDS = 30
# A code of the step before or after the current one is accepted too: clocks drift.
DRIFT_STEPS = 1


def _key(config: Config, purpose: bytes) -> bytes:
    """32 bytes for one purpose, derived from the configured secret as the cookie key is."""
    return hashlib.sha256(
        b"hubsvc-" + purpose + b":" + config["security"]["secret_key"].encode()
    ).digest()


def _fernet(config: Config) -> Fernet:
    return Fernet(base64.urlsafe_b64encode(_key(config, b"totp")))


def seal(config: Config, secret: str) -> bytes:
    """A TOTP secret as the database keeps it: encrypted."""
    return _fernet(config).encrypt(secret.encode())


def unseal(config: Config, sealed: bytes) -> str | None:
    """The TOTP secret back (None: sealed under another secret_key)."""
    try:
        return _fernet(config).decrypt(sealed).decode()
    except InvalidToken:
        return None


def recovery_digest(config: Config, code: str) -> bytes:
    """What the database keeps of a recovery code: keyed, so a copy of it is not a list to try."""
    normal = "".join(code.split()).replace("-", "").lower()
    return hmac.new(_key(config, b"recovery"), normal.encode(), hashlib.sha256).digest()


def new_recovery_codes() -> list[str]:
    """Ten codes of 10 hex digits as GitHub shows them (xxxxx-xxxxx)."""
    codes = []
    for _ in range(RECOVERY_CODES):
        raw = secrets.token_hex(5)
        codes.append(f"{raw[:5]}-{raw[5:]}")
    return codes


def challenge_digest(challenge: str) -> bytes:
    """What the database keeps of a sign-in challenge."""
    return hashlib.sha256(challenge.encode()).digest()


def is_totp_code(code: str) -> bool:
    """Six digits: a TOTP code (anything else may be a recovery code)."""
    return len(code) == 6 and code.isascii() and code.isdigit()


def matching_step(secret: str, code: str, now: float | None = None) -> int | None:
    """The time step whose code this is, within the drift allowed, or None."""
    totp = pyotp.TOTP(secret, interval=STEP_SECONDS)
    current = int((time.time() if now is None else now) // STEP_SECONDS)
    for step in range(current - DRIFT_STEPS, current + DRIFT_STEPS + 1):
        if hmac.compare_digest(totp.generate_otp(step), code):
            return step
    return None


def provisioning_uri(secret: str, username: str) -> str:
    """otpauth://totp/hubsvc:<user>?secret=…&issuer=hubsvc, for an authenticator app."""
    return pyotp.TOTP(secret, interval=STEP_SECONDS).provisioning_uri(
        name=username, issuer_name=ISSUER
    )


def qr_svg(uri: str) -> str:
    """The URI as a QR code, an SVG document an authenticator app's camera reads."""
    out = io.BytesIO()
    # With its namespace: the dashboard shows it as an <img>, which needs a whole document.
    segno.make(uri, error="m").save(out, kind="svg", xmldecl=False, scale=4)
    return out.getvalue().decode()


async def enroll(app: web.Application, user: dict[str, Any]) -> dict[str, str]:
    """A new pending TOTP secret: {secret, uri, qrSvg}, shown this once."""
    secret = pyotp.random_base32()
    await app[STORE].two_factor.enroll(user["id"], seal(app[CONFIG], secret))
    uri = provisioning_uri(secret, user["username"])
    return {"secret": secret, "uri": uri, "qrSvg": qr_svg(uri)}


async def confirm(app: web.Application, user: dict[str, Any], code: str) -> list[str] | None:
    """Turn the pending TOTP on with a code of it: the recovery codes (None: wrong code)."""
    store = app[STORE].two_factor
    found = await store.secret(user["id"])
    if found is None or found[1]:
        return None
    sealed = found[0]
    secret = unseal(app[CONFIG], sealed)
    step = matching_step(secret, code) if secret is not None and is_totp_code(code) else None
    if step is None:
        return None
    codes = new_recovery_codes()
    digests = [recovery_digest(app[CONFIG], c) for c in codes]
    if not await store.turn_on(user["id"], sealed, step, digests):
        return None
    # Git's Basic passwords this process verified stop working at once.
    app[BASIC_CACHE].forget_user(user["id"])
    return codes


async def check_code(app: web.Application, user_id: int, code: str) -> str | None:
    """Accept a TOTP code (once) or a recovery code (once): which it was, or None."""
    code = "".join(code.split())
    store = app[STORE].two_factor
    if is_totp_code(code):
        found = await store.secret(user_id)
        if found is None or not found[1]:
            return None
        secret = unseal(app[CONFIG], found[0])
        step = matching_step(secret, code) if secret is not None else None
        # The step moves forward in one statement: a replay, here or on another
        # process, finds it taken.
        if step is not None and await store.take_step(user_id, step):
            return "totp"
        return None
    if 0 < len(code) <= 64 and await store.take_recovery_code(
        user_id, recovery_digest(app[CONFIG], code)
    ):
        return "recovery"
    return None


async def methods(app: web.Application, user: dict[str, Any]) -> list[str]:
    """The second factors a user may sign in with (empty: none, the password is enough)."""
    state = await app[STORE].two_factor.state(user["id"])
    if not state["enabled"]:
        return []
    found = ["totp"] if state["totp"] else []
    if await app[STORE].passkeys.count(user["id"]):
        found.append("webauthn")
    # Recovery codes come with TOTP; a passkey alone has none to offer.
    return found + (["recovery"] if state["recovery_left"] else [])


async def start_challenge(app: web.Application, user: dict[str, Any]) -> str:
    """A new sign-in challenge for user: good for five minutes and one use."""
    challenge = secrets.token_urlsafe(32)
    await app[STORE].two_factor.add_challenge(
        user["id"], challenge_digest(challenge), int(time.time()) + CHALLENGE_SECONDS
    )
    return challenge


async def peek_challenge(app: web.Application, challenge: str) -> dict[str, Any] | None:
    """The user of a live challenge, leaving it live (to check a code against)."""
    if not challenge or len(challenge) > 200:
        return None
    user_id = await app[STORE].two_factor.challenge_user(challenge_digest(challenge))
    return await app[STORE].users.by_id(user_id) if user_id is not None else None


async def take_challenge(app: web.Application, challenge: str) -> dict[str, Any] | None:
    """Use a live challenge up: its user to exactly one caller, else None."""
    if not challenge or len(challenge) > 200:
        return None
    user_id = await app[STORE].two_factor.take_challenge(challenge_digest(challenge))
    return await app[STORE].users.by_id(user_id) if user_id is not None else None


async def fail_challenge(app: web.Application, challenge: str) -> None:
    """Count a wrong code against the challenge (a few and it is gone)."""
    await app[STORE].two_factor.fail_challenge(challenge_digest(challenge))


async def spend_attempt(request: web.Request, user: dict[str, Any]) -> web.Response | None:
    """Spend a second-factor attempt: None, or the 429 to answer when out of budget."""
    limiter = request.app.get(SIGN_IN_LIMITER)
    if limiter is None:
        return None
    # The address's budget on the account, as for passwords, and one for the account from
    # every address: whoever is here has the password, and a million codes must not be
    # tried from many addresses at once.
    for key in (sign_in_key(request, user["username"], user), f"2fa|user:{user['id']}"):
        allowed, _, wait = await limiter.spend(key)
        if not allowed:
            return too_many(request, wait)
    return None


def auth_answer(
    request: web.Request, user: dict[str, Any], token: str, expires: int, status: int
) -> web.Response:
    """The answer of a sign-up or a sign-in: the user, the token and its expiry."""
    body = {
        "user": user_public(
            request.app[CONFIG].base_url, user, is_self=True, admin=is_admin(request, user)
        ),
        "token": token,
        "expiresAt": iso(expires),
    }
    return json_response(body, status=status)


async def finish_sign_in(
    request: web.Request, user: dict[str, Any], status: int = 200, created: bool = False
) -> web.Response:
    """Sign user in: a token, the session cookie, and the answer a sign-in gives."""
    if user["disabled"]:
        raise Forbidden("this account is disabled")
    if created:
        entry = audit.entry(request, "account.created", actor=user, user=user)
        token, expires = await issue_token(request, user, audit=entry)
        return auth_answer(request, user, token, expires, status)
    earlier, seen_here = await request.app[STORE].audit.sign_in_addresses(
        user["id"], client_ip(request)
    )
    # The security log's entry is written with the session, naming it.
    token, expires = await issue_token(
        request,
        user,
        audit=lambda session_id: audit.entry(
            request, "auth.sign-in", actor=user, user=user, data={"session": str(session_id)}
        ),
    )
    await audit.sign_in_notice(request, user, first=not earlier, seen_here=seen_here)
    return auth_answer(request, user, token, expires, status)
