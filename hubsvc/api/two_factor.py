"""The signed-in user's second factors: TOTP enrolment and removal, and what is on."""

from __future__ import annotations

from aiohttp import web

from schemas.two_factor import (
    CodeSchema,
    RecoveryCodesSchema,
    TotpEnrolmentSchema,
    TotpRemovalSchema,
    TwoFactorStateSchema,
)

from ..errors import Conflict, Forbidden, Unprocessable
from ..keys import STORE
from ..policy import requires
from ..services import audit, two_factor
from ..services.passkeys import passkey_json
from ..web.auth import require_user
from ..web.openapi import doc
from ..web.rest import json_response, read_json
from .account import confirm_password

routes = web.RouteTableDef()
BASE = "/api/users/me/2fa"


@routes.get(BASE)
@doc(
    "The signed-in user's second factors",
    responses={200: TwoFactorStateSchema},
    errors=(401,),
    tag="users",
    description="`totp`: an authenticator app is on; `webauthn`: the passkeys and security "
    "keys; `recoveryCodesLeft`: recovery codes not yet used. Never a secret.",
)
@requires("user.settings")
async def get_state(request: web.Request) -> web.Response:
    user = require_user(request)
    state = await request.app[STORE].two_factor.state(user["id"])
    keys = [passkey_json(p) for p in await request.app[STORE].passkeys.listing(user["id"])]
    return json_response(
        {"totp": state["totp"], "webauthn": keys, "recoveryCodesLeft": state["recovery_left"]}
    )


@routes.post(BASE + "/totp")
@doc(
    "Start TOTP enrolment: a new secret, its otpauth:// URI and that URI's QR code, once",
    responses={201: TotpEnrolmentSchema},
    errors=(401, 403, 409),
    tag="users",
    description="Nothing changes until POST /api/users/me/2fa/totp/confirm proves the "
    "authenticator holds the secret; asking again replaces a pending secret. 409 when TOTP "
    "is already on. Only in a signed-in session (or its sign-in token): never a personal "
    "access token, a git password or the chat bot.",
)
@requires("user.two-factor")
async def start_totp(request: web.Request) -> web.Response:
    user = require_user(request)
    return json_response(await two_factor.enroll(request.app, user), status=201)


@routes.post(BASE + "/totp/confirm")
@doc(
    "Turn TOTP on with a code of the new secret; answers the ten recovery codes, once",
    body=CodeSchema,
    responses={200: RecoveryCodesSchema},
    errors=(401, 403, 409, 422),
    tag="users",
    description="A wrong or stale code → 422 (the pending secret stays); none pending → 409. "
    "The recovery codes are kept hashed: they are shown only in this answer, each "
    "signs in once in place of a code.",
)
@requires("user.two-factor")
async def confirm_totp(request: web.Request) -> web.Response:
    user = require_user(request)
    data = await read_json(request, CodeSchema())
    state = await request.app[STORE].two_factor.state(user["id"])
    if not state["pending"]:
        raise Conflict("no TOTP enrolment is pending: POST /api/users/me/2fa/totp first")
    codes = await two_factor.confirm(request.app, user, "".join(data["code"].split()))
    if codes is None:
        raise Unprocessable("code: not a current code of the new secret")
    await audit.record(request, "2fa.totp.enabled", user=user)
    return json_response({"recoveryCodes": codes})


@routes.delete(BASE + "/totp")
@doc(
    "Turn TOTP off, with the password and a code (or a recovery code)",
    body=TotpRemovalSchema,
    responses={204: "turned off"},
    errors=(401, 403, 409, 429),
    tag="users",
    description="A wrong password or code → 403; guesses spend the sign-in budget (429). "
    "409 when TOTP is not on, or while an organization the user belongs to requires "
    "two-factor authentication and no other factor would remain. The recovery codes go "
    "with the last factor.",
)
@requires("user.two-factor")
async def remove_totp(request: web.Request) -> web.Response:
    user = require_user(request)
    data = await read_json(request, TotpRemovalSchema())
    if not (await request.app[STORE].two_factor.state(user["id"]))["totp"]:
        raise Conflict("TOTP is not on")
    refused = await confirm_password(request, user, data["currentPassword"])
    if refused is not None:
        return refused
    used = await two_factor.check_code(request.app, user["id"], data["code"])
    if used is None:
        raise Forbidden("code: not a current code or an unused recovery code")
    await request.app[STORE].two_factor.turn_off(user["id"])
    await audit.record(request, "2fa.totp.disabled", user=user, data={"with": used})
    await audit.notify_user(
        request.app,
        user,
        "two-factor authentication was turned off",
        "The authenticator app (TOTP) was removed from your account.",
    )
    return web.Response(status=204)
