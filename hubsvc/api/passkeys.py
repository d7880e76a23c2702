"""Passkeys and security keys (WebAuthn): register, list and remove them, sign in with one."""

from __future__ import annotations

from aiohttp import web

from schemas.passkeys import (
    OPTIONS_DOC,
    PasskeyEnvelopeSchema,
    PasskeyListSchema,
    PasskeyRegisterSchema,
    PasskeyRemoveSchema,
)

from ..errors import NotFound
from ..keys import CONFIG, STORE
from ..policy import requires
from ..services import passkeys
from ..web.auth import require_user
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
    return web.Response(status=204)
