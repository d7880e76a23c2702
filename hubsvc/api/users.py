"""Users: profiles, summary, avatars, settings and preferences."""

from __future__ import annotations

import hashlib

import orjson
from aiohttp import BodyPartReader, web
from aiohttp.http_exceptions import HttpProcessingError

from schemas.users import (
    PreferencesEnvelopeSchema,
    PreferencesSchema,
    ProfileEnvelopeSchema,
    SettingsEnvelopeSchema,
    SettingsSchema,
    SummarySchema,
    UserEnvelopeSchema,
)

from ..errors import BadRequest, NotFound, PayloadTooLarge, Unprocessable
from ..keys import CONFIG, STORE
from ..notify.hub import HUB
from ..policy import requires
from ..services import audit
from ..services.revoke import user_changed
from ..web import present
from ..web.auth import current_user, is_admin, require_user
from ..web.avatars import BadImage, accept_upload, default_avatar, default_version
from ..web.names import path_username
from ..web.openapi import doc
from ..web.rest import json_response, read_json
from .account import confirm_password

routes = web.RouteTableDef()

IMAGE_RESPONSE = {
    "description": "the image",
    "content": {
        t: {"schema": {"type": "string", "format": "binary"}}
        for t in ("image/png", "image/jpeg", "image/gif", "image/webp")
    },
}
AVATAR_BODY = {
    "multipart/form-data": {
        "type": "object",
        "required": ["avatar"],
        "properties": {"avatar": {"type": "string", "format": "binary"}},
    },
    **{
        t: {"type": "string", "format": "binary"}
        for t in ("image/png", "image/jpeg", "image/gif", "image/webp")
    },
}


# GET /api/users/me's body by user id, with the user object it was made of. That object is
# the token cache's (web.tokens.TokenCache), shared by the requests of its token and never
# changed in place: an account change or a revocation drops it there, and the next
# request reads a new one, which this entry does not match.
_ME: dict[int, tuple[dict, bytes]] = {}
_ME_MOST = 4096


def _user_json(request: web.Request, user: dict) -> dict:
    viewer = current_user(request)
    is_self = viewer is not None and viewer["id"] == user["id"]
    return present.user_public(
        request.app[CONFIG].base_url,
        user,
        is_self=is_self,
        admin=is_self and is_admin(request, user),
    )


async def _user_or_404(request: web.Request) -> dict:
    user = await request.app[STORE].users.by_username(path_username(request))
    if user is None:
        raise NotFound("user not found")
    return user


@routes.get("/api/users/me")
@doc("The signed-in user", responses={200: UserEnvelopeSchema})
@requires("user.read")
async def me(request: web.Request) -> web.Response:
    user = require_user(request)
    kept = _ME.get(user["id"])
    if kept is not None and kept[0] is user:
        body = kept[1]
    else:
        body = orjson.dumps({"user": _user_json(request, user)})
        if len(_ME) >= _ME_MOST:
            del _ME[next(iter(_ME))]  # the oldest: insertion order
        _ME[user["id"]] = (user, body)
    return web.Response(body=body, content_type="application/json")


@routes.get("/api/users/me/summary")
@doc(
    "The signed-in user's username, name and avatar (what the chat bot reads)",
    responses={200: SummarySchema},
)
@requires("user.read")
async def me_summary(request: web.Request) -> web.Response:
    user = require_user(request)
    summary = present.user_summary(request.app[CONFIG].base_url, user)
    return json_response({k: summary[k] for k in ("username", "name", "avatarUrl")})


@routes.get("/api/users/me/settings")
@doc("The signed-in user's settings and preferences", responses={200: SettingsEnvelopeSchema})
@requires("user.settings")
async def get_settings(request: web.Request) -> web.Response:
    return json_response({"settings": present.settings(require_user(request))})


def _forget_cached(request: web.Request, user_id: int) -> None:
    # Cached tokens carry a copy of the user; drop them so the change shows at once.
    user_changed(request.app, user_id)


@routes.patch("/api/users/me/settings")
@doc(
    "Change name, e-mail, bio, location, website or preferences",
    body=SettingsSchema,
    responses={200: SettingsEnvelopeSchema},
    errors=(400, 403, 409),
    description="Changing the e-mail needs the account's password in currentPassword, as "
    "on GitHub and Gitea (the e-mail is where a password reset goes): without "
    "it 400, a wrong one 403, as POST /api/users/me/password answers; tries "
    "count against the sign-in limit. Other fields, and an e-mail sent "
    "unchanged, need no password.",
)
@requires("user.write")
async def patch_settings(request: web.Request) -> web.Response:
    user = require_user(request)
    data = await read_json(request, SettingsSchema())
    password = data.pop("currentPassword", None)
    if "email" in data and data["email"] != user["email"]:
        if password is None:
            raise BadRequest(
                "currentPassword: the account's password is required to change the e-mail"
            )
        refused = await confirm_password(request, user, password)
        if refused is not None:
            return refused
    if "preferences" in data:
        data["preferences"] = _merge_preferences(user, data["preferences"])
    entry = None
    if "email" in data and data["email"] != user["email"]:
        entry = audit.entry(request, "user.email", user=user)  # the addresses are not logged
    updated = await request.app[STORE].users.update(user["id"], data, audit=entry)
    _forget_cached(request, user["id"])
    _apply_preferences(request, updated)
    return json_response({"settings": present.settings(updated)})


def _apply_preferences(request: web.Request, user: dict) -> None:
    """Preferences that act at once: web notifications on the user's open sockets."""
    request.app[HUB].set_web(user["id"], present.preferences(user)["notifications"]["web"])


def _merge_preferences(user: dict, change: dict) -> dict:
    merged = present.preferences(user)
    if "theme" in change:
        merged["theme"] = change["theme"]
    merged["notifications"].update(change.get("notifications", {}))
    return merged


@routes.post("/api/users/me/settings/preferences")
@doc(
    "Change preferences (theme, notifications); fields left out keep their value",
    body=PreferencesSchema,
    responses={200: PreferencesEnvelopeSchema},
)
@requires("user.write")
async def post_preferences(request: web.Request) -> web.Response:
    user = require_user(request)
    change = await read_json(request, PreferencesSchema())
    updated = await request.app[STORE].users.update(
        user["id"], {"preferences": _merge_preferences(user, change)}
    )
    _forget_cached(request, user["id"])
    _apply_preferences(request, updated)
    return json_response({"preferences": present.preferences(updated)})


async def _read_capped(part: BodyPartReader, limit: int) -> bytes:
    data = bytearray()
    while chunk := await part.read_chunk(65536):
        data += chunk
        if len(data) > limit:
            raise PayloadTooLarge(f"avatar is larger than {limit} bytes")
    return bytes(data)


async def _avatar_bytes(request: web.Request, limit: int) -> bytes:
    """The uploaded image: multipart field `avatar`, or the raw body."""
    if request.content_length is not None and request.content_length > limit + 65536:
        raise PayloadTooLarge(f"avatar is larger than {limit} bytes")
    if request.content_type.startswith("multipart/"):
        try:
            reader = await request.multipart()
            while True:
                part = await reader.next()
                if part is None:
                    raise BadRequest("avatar: multipart field 'avatar' is required")
                if isinstance(part, BodyPartReader) and part.name == "avatar":
                    return await _read_capped(part, limit)
                await part.release()
        except (ValueError, HttpProcessingError):  # no boundary, bad part headers, …
            raise BadRequest("avatar: malformed multipart body") from None
    if not request.content_type.startswith("image/"):
        raise BadRequest("avatar: send multipart field 'avatar' or an image body")
    data = bytearray()
    async for chunk in request.content.iter_chunked(65536):
        data += chunk
        if len(data) > limit:
            raise PayloadTooLarge(f"avatar is larger than {limit} bytes")
    return bytes(data)


@routes.patch("/api/users/me/avatar")
@doc(
    "Upload an avatar (PNG, JPEG, GIF or WebP, decoded and stored as a PNG)",
    description="multipart/form-data with field `avatar`, or a raw body with an image "
    "Content-Type. Over limits.avatar_bytes → 413. Not an image, truncated, or declaring "
    "more than 4096×4096 pixels → 422. Stored without metadata, scaled to fit 460×460; "
    "an animated image keeps its first frame.",
    body=AVATAR_BODY,
    responses={200: UserEnvelopeSchema},
    errors=(413, 422),
)
@requires("user.write")
async def patch_avatar(request: web.Request) -> web.Response:
    user = require_user(request)
    data = await _avatar_bytes(request, request.app[CONFIG]["limits"]["avatar_bytes"])
    if not data:
        raise BadRequest("avatar: empty upload")
    try:
        image = await accept_upload(data)
    except BadImage as exc:
        raise Unprocessable(f"avatar: {exc}") from None
    digest = hashlib.sha256(image).hexdigest()
    updated = await request.app[STORE].users.set_avatar(user["id"], "image/png", image, digest)
    _forget_cached(request, user["id"])
    return json_response({"user": _user_json(request, updated)})


@routes.delete("/api/users/me/avatar")
@doc("Remove the avatar; the generated one is served again", responses={204: "removed"})
@requires("user.write")
async def delete_avatar(request: web.Request) -> web.Response:
    user = require_user(request)
    await request.app[STORE].users.delete_avatar(user["id"])
    _forget_cached(request, user["id"])
    return web.Response(status=204)


@routes.get("/api/users/{username}")
@doc(
    "A user's public profile",
    responses={200: UserEnvelopeSchema},
    errors=(401, 404),
    public=True,
    description="`me` as the username is the caller (401 when anonymous), here and on "
    "every path that takes a username.",
)
@requires("user.read")
async def get_user(request: web.Request) -> web.Response:
    return json_response({"user": _user_json(request, await _user_or_404(request))})


@routes.get("/api/users/{username}/profile")
@doc(
    "A user's detailed profile: bio, location, website, counts (`me`: the caller)",
    errors=(401, 404),
    responses={200: ProfileEnvelopeSchema},
    public=True,
)
@requires("user.read")
async def get_profile(request: web.Request) -> web.Response:
    user = await _user_or_404(request)
    profile = _user_json(request, user)
    profile.update(bio=user["bio"], location=user["location"], website=user["website"])
    profile.update(await request.app[STORE].users.profile_counts(user["id"]))
    return json_response({"profile": profile})


@routes.get("/api/users/{username}/avatar")
@doc(
    "A user's avatar; with the current `v` it is cached for a year (`me`: the caller's, "
    "privately cached)",
    errors=(401, 404),
    responses={200: IMAGE_RESPONSE, 304: "not modified"},
    public=True,
)
@requires("user.read")
async def get_avatar(request: web.Request) -> web.StreamResponse:
    user = await _user_or_404(request)
    if user["avatar_hash"]:
        version = user["avatar_hash"][:16]
        stored = await request.app[STORE].users.avatar(user["id"])
        if stored is None:  # deleted between the two reads
            raise NotFound("avatar not found")
        content_type, body = stored
    else:
        version = default_version(user["username"])
        content_type, body = "image/png", None
    etag = f'"{version}"'
    current = request.query.get("v") == version
    # …/me/avatar is a different image for each caller: no shared cache may keep it.
    scope = "private" if request.match_info["username"].lower() == "me" else "public"
    headers = {
        "ETag": etag,
        "Cache-Control": f"{scope}, max-age=31536000, immutable"
        if current
        else f"{scope}, max-age=300, must-revalidate",
        "X-Content-Type-Options": "nosniff",
    }
    if etag in request.headers.get("If-None-Match", ""):
        return web.Response(status=304, headers=headers)
    if body is None:
        # Cached by username (the version derives from it); a miss draws off the loop.
        body = await default_avatar(user["username"])
    return web.Response(body=body, content_type=content_type, headers=headers)
