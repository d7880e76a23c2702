"""Administration over the API: list, create, disable, demote and delete accounts."""

from __future__ import annotations

from aiohttp import web

from schemas.users import (
    AdminUserCreateSchema,
    AdminUserEnvelopeSchema,
    AdminUserListSchema,
    AdminUserPatchSchema,
    AdminUserQuerySchema,
)

from ..errors import Conflict, NotFound
from ..git.files import REPO_FILES
from ..keys import CONFIG, STORE
from ..policy import requires
from ..services import audit
from ..services.revoke import credentials_ended, user_changed
from ..web import present
from ..web.auth import hash_password, require_admin
from ..web.openapi import doc
from ..web.rest import json_response, read_json, read_query, shared

routes = web.RouteTableDef()
USER = "/api/admin/users/{username}"


def _admin_json(request: web.Request, user: dict) -> dict:
    data = present.user_public(
        request.app[CONFIG].base_url, user, is_self=True, admin=user["is_admin"]
    )
    data["disabled"] = user["disabled"]
    return data


async def _target(request: web.Request) -> dict:
    user = await request.app[STORE].users.by_username(request.match_info["username"])
    # An organization shares the users' namespace but is no account: no admin, no sign-in.
    if user is None or user["is_org"]:
        raise NotFound("user not found")
    if user["is_ghost"]:
        raise Conflict("the ghost account holds deleted users' work and cannot be changed")
    return user


@routes.get("/api/admin/users")
@doc(
    "Every account, oldest first, with e-mail, isAdmin and disabled (administrators only)",
    query=AdminUserQuerySchema,
    responses={200: AdminUserListSchema},
    errors=(403,),
    tag="admin",
)
@requires("admin")
async def list_users(request: web.Request) -> web.Response:
    require_admin(request)
    page = read_query(request, shared(AdminUserQuerySchema))
    rows, more = await request.app[STORE].users.listing(page["limit"], page["offset"])
    return json_response({"users": [_admin_json(request, u) for u in rows], "hasMore": more})


@routes.post("/api/admin/users")
@doc(
    "Create an account (administrators only); works whatever [auth] open_signup says",
    body=AdminUserCreateSchema,
    responses={201: AdminUserEnvelopeSchema},
    errors=(403, 409),
    tag="admin",
    description="The sign-up rules apply; no token is issued: the new user "
    "signs in with the password given here.",
)
@requires("admin")
async def create_user(request: web.Request) -> web.Response:
    require_admin(request)
    data = await read_json(request, AdminUserCreateSchema())
    rounds = request.app[CONFIG]["security"]["bcrypt_rounds"]
    password_hash = await hash_password(data.pop("password"), rounds)
    is_admin = data.pop("isAdmin")
    user = await request.app[STORE].users.create(
        password_hash=password_hash,
        is_admin=is_admin,
        **data,
        audit=lambda user: audit.entry(
            request, "admin.user.created", user=user, data={"isAdmin": user["is_admin"]}
        ),
    )
    return json_response({"user": _admin_json(request, user)}, status=201)


@routes.patch(USER)
@doc(
    "Disable or enable an account, grant or revoke administrator rights (administrators only)",
    body=AdminUserPatchSchema,
    responses={200: AdminUserEnvelopeSchema},
    errors=(403, 404, 409),
    tag="admin",
    description="A disabled account's tokens, sessions, git credentials and WebSockets stop "
    "working at once (sockets close with 4001) and its chat links end; enabling "
    "it again brings back its unexpired tokens, not the chat links. The last enabled administrator cannot be demoted or "
    "disabled (409). The ghost account answers 409.",
)
@requires("admin")
async def patch_user(request: web.Request) -> web.Response:
    require_admin(request)
    data = await read_json(request, AdminUserPatchSchema())
    target = await _target(request)
    change = {
        key: data[key]
        for key, was in (("isAdmin", target["is_admin"]), ("disabled", target["disabled"]))
        if key in data and data[key] != was
    }
    entry = audit.entry(request, "admin.user.changed", user=target, data=change)
    user = await request.app[STORE].users.set_flags(
        target["id"],
        is_admin=data.get("isAdmin"),
        disabled=data.get("disabled"),
        audit=entry if change else None,
    )
    if user["disabled"]:
        credentials_ended(request.app, target["id"])
    else:
        # Cached tokens carry a copy of the user (its admin flag): drop them so it shows now.
        user_changed(request.app, target["id"])
    return json_response({"user": _admin_json(request, user)})


@routes.delete(USER)
@doc(
    "Delete an account (administrators only); its issues and comments stay, by the ghost",
    responses={204: "deleted"},
    errors=(403, 404, 409),
    tag="admin",
    description="As on GitHub: issues, pull requests and comments the user wrote elsewhere "
    "stay, shown as written by the user `ghost`; the repositories the user owns "
    "are deleted with their git data (forks others made stay, without a parent); "
    "stars, collaborations, tokens and chat links go. The username becomes free. "
    "The last enabled administrator cannot be deleted (409).",
)
@requires("admin")
async def delete_user(request: web.Request) -> web.Response:
    require_admin(request)
    target = await _target(request)
    repo_ids = await request.app[STORE].users.delete(
        target["id"], audit=audit.entry(request, "admin.user.deleted", user=target)
    )
    credentials_ended(request.app, target["id"])
    files = request.app[REPO_FILES]
    for repo_id in repo_ids:
        await files.remove(repo_id)
    return web.Response(status=204)
