"""Sign-up, sign-in and sign-out."""

from __future__ import annotations

from aiohttp import web
from aiohttp_session import get_session

from schemas.two_factor import SecondFactorSchema, SignInResultSchema
from schemas.users import AuthResultSchema, SignInSchema, SignUpSchema

from ..errors import BadRequest, Forbidden, Unauthorized
from ..keys import CONFIG, STORE
from ..policy import requires
from ..services import audit, two_factor
from ..services.revoke import credentials_ended
from ..web.auth import (
    check_password,
    hash_password,
    require_identity,
    require_user,
    validate_password,
)
from ..web.openapi import doc
from ..web.ratelimit import SIGN_IN_LIMITER, sign_in_key, too_many
from ..web.rest import json_response, read_json

routes = web.RouteTableDef()


@routes.post("/auth/sign-up")
@doc(
    "Create an account; answers the user and a token, and sets the session cookie",
    body=SignUpSchema,
    responses={201: AuthResultSchema},
    errors=(403, 409),
    public=True,
    tag="auth",
    description="The password is 8 to 72 bytes of UTF-8 (bcrypt reads no more); "
    "others → 400. With [auth] open_signup = false this answers 403: only "
    "administrators create accounts then (POST /api/admin/users or run.py create-user).",
)
@requires("public")
async def sign_up(request: web.Request) -> web.Response:
    config = request.app[CONFIG]
    if not config["auth"]["open_signup"]:
        raise Forbidden("sign-up is closed: an administrator creates accounts")
    data = await read_json(request, SignUpSchema())
    password_hash = await hash_password(data.pop("password"), config["security"]["bcrypt_rounds"])
    user = await request.app[STORE].users.create(password_hash=password_hash, **data)
    return await two_factor.finish_sign_in(request, user, 201, created=True)


@routes.post("/auth/sign-in")
@doc(
    "Sign in with e-mail or username and password",
    body=SignInSchema,
    responses={200: SignInResultSchema},
    errors=(401, 403),
    public=True,
    tag="auth",
    description="A wrong e-mail, username or password all answer the same 401, in the same "
    "time (an unknown login checks a dummy hash of the configured bcrypt cost). A password "
    "over 72 bytes → 400. The right password of a disabled account answers 403. Attempts "
    "are limited per client address (IPv6: per /64) and account, one budget whether it is "
    "named by username or e-mail → 429. For an account with a second factor the right "
    "password answers `{twoFactorRequired: true, challenge, methods}` and no token or "
    "session: POST /auth/sign-in/2fa (or the passkey's routes) finishes it.",
)
@requires("public")
async def sign_in(request: web.Request) -> web.Response:
    data = await read_json(request, SignInSchema())
    login = data.get("email") or data.get("username")
    if not login:
        raise BadRequest("email or username is required")
    validate_password(data["password"], new=False)
    user = await request.app[STORE].users.by_login(login)
    limiter = request.app.get(SIGN_IN_LIMITER)
    if limiter is not None:
        allowed, _, wait = await limiter.spend(sign_in_key(request, login, user))
        if not allowed:
            return too_many(request, wait)
    rounds = request.app[CONFIG]["security"]["bcrypt_rounds"]
    ok = await check_password(data["password"], user["password_hash"] if user else None, rounds)
    if not ok or user is None or user["disabled"]:
        # The account's owner sees attempts on it; one on no account, administrators only.
        reason = "disabled" if ok and user is not None else "credentials"
        await audit.record(
            request, "auth.sign-in-failed", actor=None, user=user, data={"reason": reason}
        )
        if not ok or user is None:
            raise Unauthorized("invalid credentials")
        raise Forbidden("this account is disabled")
    methods = await two_factor.methods(request.app, user)
    if methods:
        challenge = await two_factor.start_challenge(request.app, user)
        return json_response(
            {"twoFactorRequired": True, "challenge": challenge, "methods": methods}
        )
    return await two_factor.finish_sign_in(request, user)


@routes.post("/auth/sign-in/2fa")
@doc(
    "Finish a sign-in with a second factor: a TOTP code or a recovery code",
    body=SecondFactorSchema,
    responses={200: AuthResultSchema},
    errors=(401, 403),
    public=True,
    tag="auth",
    description="`challenge` is what POST /auth/sign-in answered (five minutes, one "
    "sign-in); `code` a TOTP code of the authenticator (each accepted once) or one of the "
    "recovery codes (each usable once). Answers as a sign-in does: the user, a token and "
    "the session cookie. Each attempt spends the sign-in budget of the address on the "
    "account and one of the account from every address (429 past either); a wrong code "
    "→ 401, and a few end the challenge.",
)
@requires("public")
async def sign_in_second_factor(request: web.Request) -> web.Response:
    data = await read_json(request, SecondFactorSchema())
    app = request.app
    user = await two_factor.peek_challenge(app, data["challenge"])
    if user is None:
        raise Unauthorized("the sign-in challenge is unknown, used or expired: sign in again")
    refused = await two_factor.spend_attempt(request, user)
    if refused is not None:
        return refused
    used = await two_factor.check_code(app, user["id"], data["code"])
    if used is None:
        await two_factor.fail_challenge(app, data["challenge"])
        await audit.record(request, "auth.2fa-failed", actor=None, user=user)
        raise Unauthorized("invalid two-factor code")
    await audit.record(request, "auth.2fa", actor=user, user=user, data={"method": used})
    if used == "recovery":
        await audit.notify_user(
            app,
            user,
            "a recovery code was used",
            "One of your recovery codes was used to sign in; it cannot be used again.",
        )
    # The code is spent; now the challenge, which only one request can take.
    if await two_factor.take_challenge(app, data["challenge"]) is None:
        raise Unauthorized("the sign-in challenge is unknown, used or expired: sign in again")
    return await two_factor.finish_sign_in(request, user)


@routes.post("/auth/sign-out")
@doc(
    "Revoke the token of this request and clear the cookie",
    responses={204: "signed out"},
    tag="auth",
    description="Whatever token authenticated the request is revoked (a "
    "personal access token too); WebSockets opened with it close with code 4001.",
)
@requires("auth.sign-out")
async def sign_out(request: web.Request) -> web.Response:
    user = require_user(request)
    identity = require_identity(request)
    if identity.token_digest is not None:
        await request.app[STORE].users.revoke_token(identity.token_digest)
        credentials_ended(request.app, user["id"], {identity.token_digest})
    session = await get_session(request)
    session.invalidate()
    return web.Response(status=204)
