"""Passkeys and security keys (WebAuthn): register, list and remove them, sign in with one."""

from __future__ import annotations

from aiohttp import web

from schemas.passkeys import (
    OPTIONS_DOC,
    PasskeyEnvelopeSchema,
    PasskeyListSchema,
    PasskeyRegisterSchema,
    PasskeyRemoveSchema,
    PasskeySignInFinishSchema,
    PasskeySignInSchema,
)
from schemas.users import AuthResultSchema

from ..errors import Conflict, NotFound, Unauthorized
from ..keys import CONFIG, STORE
from ..policy import requires
from ..services import audit, passkeys, two_factor
from ..web.auth import BASIC_CACHE, require_user
from ..web.openapi import doc
from ..web.rest import json_response, read_json
from .account import confirm_password

routes = web.RouteTableDef()
OPTIONS = {
    "description": OPTIONS_DOC,
    "content": {"application/json": {"schema": {"type": "object"}}},
}


def options_response(options_json: str) -> web.Response:
    """The library's options JSON as the answer, unchanged."""
    return web.Response(text=options_json, content_type="application/json")


@routes.post("/api/users/me/2fa/webauthn/register")
@doc(
    "Begin registering a passkey or security key: options for navigator.credentials.create",
    responses={200: OPTIONS},
    errors=(403,),
    tag="users",
    description="Answers PublicKeyCredentialCreationOptions as JSON, binary fields "
    "base64url (decode them before navigator.credentials.create). Its challenge is "
    "kept in the database for two and a half minutes and can finish one registration. "
    "The relying party is the host of [server] base_url; pages of that URL's origin "
    "only can use it. Only a session (or sign-in token) may register: 403 for a personal "
    "access token, a git password or the bot key.",
)
@requires("user.two-factor")
async def register_begin(request: web.Request) -> web.Response:
    user = require_user(request)
    options = await passkeys.registration_options(request.app[STORE], request.app[CONFIG], user)
    return options_response(options)


@routes.post("/api/users/me/2fa/webauthn/register/finish")
@doc(
    "Finish registering a passkey: the browser's credential, verified and stored",
    body=PasskeyRegisterSchema,
    responses={201: PasskeyEnvelopeSchema},
    errors=(400, 403, 409),
    tag="users",
    description="`credential` is the PublicKeyCredential's toJSON(). Its challenge must "
    "be a live one this account asked for (400 otherwise: unknown, expired, used, or "
    "another account's); it is used up by this call whatever the outcome. The origin "
    "and relying party id must be this server's (400). A credential registered already "
    "→ 409; at most 20 per account. From then on, signing in with the password asks for "
    "a second factor.",
)
@requires("user.two-factor")
async def register_finish(request: web.Request) -> web.Response:
    user = require_user(request)
    data = await read_json(request, PasskeyRegisterSchema())
    passkey = await passkeys.finish_registration(
        request.app[STORE], request.app[CONFIG], user, data["credential"], data["name"]
    )
    # Git's Basic passwords this process verified stop working at once (second factor on).
    request.app[BASIC_CACHE].forget_user(user["id"])
    await audit.record(request, "2fa.webauthn.added", user=user, data={"id": str(passkey["id"])})
    return json_response({"webauthn": passkeys.passkey_json(passkey)}, status=201)


@routes.get("/api/users/me/2fa/webauthn")
@doc(
    "The signed-in user's passkeys and security keys (never their public keys)",
    responses={200: PasskeyListSchema},
    tag="users",
)
@requires("user.settings")
async def list_passkeys(request: web.Request) -> web.Response:
    user = require_user(request)
    rows = await request.app[STORE].passkeys.listing(user["id"])
    return json_response({"webauthn": [passkeys.passkey_json(row) for row in rows]})


@routes.delete("/api/users/me/2fa/webauthn/{id}")
@doc(
    "Remove one of the signed-in user's passkeys",
    body=PasskeyRemoveSchema,
    responses={204: "removed"},
    errors=(400, 403, 404, 429),
    tag="users",
    description="Needs `currentPassword` (403 when wrong; its guesses count against the "
    "account's sign-in budget, 429). Another user's passkey id answers 404. Only a "
    "session (or sign-in token) may remove one.",
)
@requires("user.two-factor")
async def remove_passkey(request: web.Request) -> web.Response:
    user = require_user(request)
    raw = request.match_info["id"]
    data = await read_json(request, PasskeyRemoveSchema())
    refused = await confirm_password(request, user, data["currentPassword"])
    if refused is not None:
        return refused
    if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
        raise NotFound("passkey not found")
    if not await request.app[STORE].passkeys.delete(user["id"], int(raw)):
        raise NotFound("passkey not found")
    await audit.record(request, "2fa.webauthn.removed", user=user, data={"id": raw})
    return web.Response(status=204)


GONE = "the sign-in challenge is unknown, used or expired: sign in again"


@routes.post("/auth/sign-in/webauthn")
@doc(
    "The passkey step of a sign-in: options for navigator.credentials.get",
    body=PasskeySignInSchema,
    responses={200: OPTIONS},
    errors=(401, 409),
    public=True,
    tag="auth",
    description="`challenge` is what POST /auth/sign-in answered with twoFactorRequired "
    "(it stays live: a code may still be used instead). Answers "
    "PublicKeyCredentialRequestOptions as JSON (binary fields base64url) naming the "
    "account's passkeys; their challenge is good for one POST /auth/sign-in/webauthn/finish "
    "of this sign-in. An unknown, used or expired challenge → 401; an account without "
    "passkeys → 409.",
)
@requires("public")
async def sign_in_begin(request: web.Request) -> web.Response:
    data = await read_json(request, PasskeySignInSchema())
    user = await two_factor.peek_challenge(request.app, data["challenge"])
    if user is None:
        raise Unauthorized(GONE)
    options = await passkeys.sign_in_options(
        request.app[STORE], request.app[CONFIG], user, passkeys.sign_in_bound(data["challenge"])
    )
    if options is None:
        raise Conflict("this account has no passkey: use a code")
    return options_response(options)


@routes.post("/auth/sign-in/webauthn/finish")
@doc(
    "Finish a sign-in with a passkey: the browser's assertion; answers as a sign-in does",
    body=PasskeySignInFinishSchema,
    responses={200: AuthResultSchema},
    errors=(400, 401, 403, 429),
    public=True,
    tag="auth",
    description="`credential` is the assertion's toJSON(). It must answer options asked for "
    "with this very challenge (another sign-in's, even of the same account, → 401), by one "
    "of the account's passkeys (401), signed for this server's origin, with a signature "
    "counter past the one stored (401: a cloned authenticator). Each options' challenge "
    "finishes once; the sign-in challenge is used up by the sign-in. Each call spends the "
    "second step's budgets, the address's on the account and the account's (429 past "
    "either), as a code does; a few refusals end the sign-in challenge. "
    "Answers the user, a token and the session cookie, as POST /auth/sign-in.",
)
@requires("public")
async def sign_in_finish(request: web.Request) -> web.Response:
    data = await read_json(request, PasskeySignInFinishSchema())
    app, challenge = request.app, data["challenge"]
    parsed, asked = passkeys.assertion_challenge(data["credential"])
    user = await two_factor.peek_challenge(app, challenge)
    if user is None:
        raise Unauthorized(GONE)
    refused = await two_factor.spend_attempt(request, user)
    if refused is not None:
        return refused
    store, config = app[STORE], app[CONFIG]
    try:
        owner = await store.passkeys.take_challenge(
            asked, passkeys.SIGN_IN, user_id=user["id"], bound=passkeys.sign_in_bound(challenge)
        )
        if owner is None:
            raise Unauthorized(
                "this passkey answer is not for this sign-in, or was used: ask for new options"
            )
        await passkeys.verify_assertion(store, config, user["id"], parsed, asked)
    except Unauthorized:
        await two_factor.fail_challenge(app, challenge)
        raise
    # The assertion is spent; now the sign-in challenge, which only one request can take.
    if await two_factor.take_challenge(app, challenge) is None:
        raise Unauthorized(GONE)
    return await two_factor.finish_sign_in(request, user)
