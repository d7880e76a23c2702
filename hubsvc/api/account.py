"""The signed-in user's credentials: password change and personal access tokens."""

from __future__ import annotations

import time

from aiohttp import web

from schemas.users import (
    PasswordChangeSchema,
    TokenCreatedSchema,
    TokenCreateSchema,
    TokenListSchema,
)

from ..errors import BadRequest, Forbidden, NotFound, Unprocessable
from ..keys import CONFIG, STORE
from ..policy import requires
from ..services import audit
from ..services.revoke import credentials_ended
from ..store.users import MAX_PERSONAL_TOKENS, NEVER
from ..timeutil import iso
from ..web.auth import (
    check_password,
    hash_password,
    new_personal_token,
    require_identity,
    require_user,
    token_digest,
    validate_password,
)
from ..web.openapi import doc
from ..web.permissions import load_repo
from ..web.ratelimit import SIGN_IN_LIMITER, sign_in_key, too_many
from ..web.rest import json_response, read_json

routes = web.RouteTableDef()


async def confirm_password(request: web.Request, user: dict, password: str) -> web.Response | None:
    """None when password is the user's; a 429 to return when out of guesses; else 403."""
    limiter = request.app.get(SIGN_IN_LIMITER)
    if limiter is not None:
        # A stolen token must not make this a way to guess the password without limit.
        allowed, _, wait = await limiter.spend(sign_in_key(request, user["username"], user))
        if not allowed:
            return too_many(request, wait)
    validate_password(password, new=False)
    rounds = request.app[CONFIG]["security"]["bcrypt_rounds"]
    if not await check_password(password, user["password_hash"], rounds):
        raise Forbidden("currentPassword is not the account's password")
    return None


@routes.post("/api/users/me/password")
@doc(
    "Change the password; every other session and token of the user ends",
    body=PasswordChangeSchema,
    responses={204: "changed"},
    errors=(403,),
    tag="users",
    description="A wrong currentPassword answers 403 (not 401: the caller's token is fine, "
    "and a client must not take the answer for a sign-out). Every other sign-in "
    "session, every personal access token and every chat link of the user is "
    "ended (the bot must link again), their "
    "WebSockets closed with 4001; the credential of this request stays valid. "
    "GitHub keeps personal access tokens on a password change; hubsvc ends them, "
    "since a password is changed when it may have leaked, and whoever had it "
    "could have made a token.",
)
@requires("user.write")
async def change_password(request: web.Request) -> web.Response:
    user = require_user(request)
    data = await read_json(request, PasswordChangeSchema())
    refused = await confirm_password(request, user, data["currentPassword"])
    if refused is not None:
        return refused
    rounds = request.app[CONFIG]["security"]["bcrypt_rounds"]
    new_hash = await hash_password(data["newPassword"], rounds)
    keep = require_identity(request).token_digest
    await request.app[STORE].users.set_password(
        user["id"], new_hash, keep=keep, audit=audit.entry(request, "user.password", user=user)
    )
    credentials_ended(request.app, user["id"], keep=keep)
    return web.Response(status=204)


def _token_json(row: dict) -> dict:
    return {
        "id": str(row["id"]),
        "name": row["name"],
        "createdAt": row["created_at"],
        "expiresAt": iso(row["expires_at"]) if row["expires_at"] is not None else None,
        "lastUsedAt": row["last_used_at"],
        "scopes": row["scopes"],
        "repositories": row["repositories"],
    }


def _token_data(row: dict) -> dict:
    """What the security log keeps of a new token (never its secret)."""
    return {"token": str(row["id"]), "name": row["name"], "scopes": row["scopes"]}


@routes.get("/api/users/me/tokens")
@doc(
    "The signed-in user's personal access tokens (never their secrets)",
    responses={200: TokenListSchema},
    tag="users",
)
@requires("user.settings")
async def list_tokens(request: web.Request) -> web.Response:
    user = require_user(request)
    rows = await request.app[STORE].users.personal_tokens(user["id"])
    return json_response({"tokens": [_token_json(row) for row in rows]})


async def _readable_repo_id(request: web.Request, full_name: str) -> int:
    """The id of owner/name (an old name followed) if the caller may read it; else 422."""
    owner, name = full_name.split("/", 1)
    try:
        repo = await load_repo(request, "read", owner, name)
    except NotFound:
        # The same answer for missing and unreadable, so existence never leaks.
        raise Unprocessable(f"repositories: {full_name} not found") from None
    return repo["id"]


@routes.post("/api/users/me/tokens")
@doc(
    "Create a personal access token; its secret is in this answer only",
    body=TokenCreateSchema,
    responses={201: TokenCreatedSchema},
    errors=(403, 409, 422),
    tag="users",
    description="The secret works as `Authorization: Bearer`, as `/ws?token=` and as the "
    "password git sends over HTTP (with the account's username). Only its "
    "SHA-256 is stored. Names are unique per user (409), at most "
    f"{MAX_PERSONAL_TOKENS} tokens per user (409). A personal access token "
    "cannot create tokens (403), as on GitHub: a leaked one cannot breed more. "
    "`scopes` limits what it may do, as GitHub's fine-grained tokens: `repo` (the "
    "repository, its files and git: a `repo:read` token clones and cannot push), `issues` "
    "(issues and pull requests), `statuses`, `org`, `user`, each `:read` or `:write` "
    "(write includes read), and `admin`. A request outside them is 403 naming the scope. "
    "Absent or null: every scope the owner has, as tokens made before scopes existed. "
    "`repositories` (`owner/name`, at most 100) limits it to those; search, the feed, "
    "repository lists and the WebSocket, which span repositories, then hold only those. "
    "Each must be a repository the caller may read (422 naming it otherwise, missing or "
    "not). The limit is kept by repository, not by name: a renamed one stays on it (listed "
    "under its new name), a deleted one leaves it (a token whose every repository is gone "
    "reaches none), and a new repository made under a listed name is not on it.",
)
@requires("user.tokens")
async def create_token(request: web.Request) -> web.Response:
    user = require_user(request)
    data = await read_json(request, TokenCreateSchema())
    expires = None
    if data["expiresAt"] is not None:
        expires = int(data["expiresAt"].timestamp())
        if expires <= time.time():
            raise BadRequest("expiresAt: must be in the future")
        if expires >= NEVER:
            raise BadRequest("expiresAt: too far in the future")
    repo_ids = None
    if data["repositories"] is not None:
        repo_ids = [await _readable_repo_id(request, full) for full in data["repositories"]]
    secret = new_personal_token()
    row = await request.app[STORE].users.add_personal_token(
        user["id"],
        data["name"],
        token_digest(secret),
        expires,
        data["scopes"],
        repo_ids,
        audit=lambda row: audit.entry(request, "token.created", user=user, data=_token_data(row)),
    )
    await audit.notify_user(
        request.app,
        user,
        "A personal access token was created",
        f'A personal access token named "{row["name"]}" was created for your account.',
    )
    return json_response({"token": _token_json(row), "secret": secret}, status=201)


@routes.delete("/api/users/me/tokens/{id}")
@doc(
    "Delete one of the signed-in user's personal access tokens",
    responses={204: "deleted"},
    errors=(404,),
    tag="users",
    description="It stops working at once; WebSockets opened with it close with 4001. "
    "Another user's token id answers 404.",
)
@requires("user.write")
async def delete_token(request: web.Request) -> web.Response:
    user = require_user(request)
    raw = request.match_info["id"]
    if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
        raise NotFound("token not found")
    entry = audit.entry(request, "token.deleted", user=user, data={"token": str(int(raw))})
    digest = await request.app[STORE].users.delete_personal_token(
        user["id"], int(raw), audit=audit.when(entry)
    )
    if digest is None:
        raise NotFound("token not found")
    credentials_ended(request.app, user["id"], {digest})
    return web.Response(status=204)
