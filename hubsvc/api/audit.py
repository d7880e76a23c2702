"""The security log, as each reader may see it: me, an organization's owners, administrators."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from schemas.audit import AuditListSchema, AuditQuerySchema

from ..keys import STORE
from ..policy import requires
from ..web.auth import require_admin, require_user
from ..web.openapi import doc
from ..web.rest import json_response, read_query, shared
from .orgs import load_org

routes = web.RouteTableDef()

_FILTERS = (
    "Newest first, `limit` at a time (1-100, default 30); `before` (an entry id, the "
    "answer's `nextBefore`) gives the next older page. `action` keeps one action, `actor` "
    "one actor by username. Entries are append-only: no route edits or deletes one, and "
    "they are kept `[security] log_days` days (default 400)."
)


def _named(entity_id: int | None, name: str | None) -> dict[str, str] | None:
    return None if entity_id is None else {"id": str(entity_id), "name": name or ""}


def _entry_json(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(row["id"]),
        "createdAt": row["created_at"],
        "action": row["action"],
        "actor": _named(row["actor_id"], row["actor_name"]),
        "user": _named(row["user_id"], row["user_name"]),
        "owner": _named(row["owner_id"], row["owner_name"]),
        "repository": _named(row["repo_id"], row["repo_name"]),
        "ip": row["ip"],
        "userAgent": row["user_agent"],
        "data": row["data"],
    }


async def _page(request: web.Request, **whose: Any) -> web.Response:
    query = read_query(request, shared(AuditQuerySchema))
    rows, more = await request.app[STORE].audit.listing(**whose, **query)
    return json_response(
        {
            "entries": [_entry_json(row) for row in rows],
            "hasMore": more,
            "nextBefore": str(rows[-1]["id"]) if more else None,
        }
    )


@routes.get("/api/users/me/security-log")
@doc(
    "The security log of the signed-in user: what they did, and what was done to them",
    query=AuditQuerySchema,
    responses={200: AuditListSchema},
    tag="users",
    description="Entries where the user is the actor, the target (a sign-in, failed ones "
    "too, a collaborator or membership given to them) or the owner of the repository. " + _FILTERS,
)
@requires("user.settings")
async def my_log(request: web.Request) -> web.Response:
    return await _page(request, about_user=require_user(request)["id"])


@routes.get("/api/orgs/{org}/audit-log")
@doc(
    "The organization's audit log (owners)",
    query=AuditQuerySchema,
    responses={200: AuditListSchema},
    errors=(403, 404),
    tag="organizations",
    description="Membership, team and role changes, and the security changes of its "
    "repositories (visibility, collaborators, protection, hooks). " + _FILTERS,
)
@requires("org.admin")
async def org_log(request: web.Request) -> web.Response:
    org = await load_org(request, "owner")
    return await _page(request, owner=org["id"])


@routes.get("/api/admin/audit-log")
@doc(
    "Every entry of the security log (administrators)",
    query=AuditQuerySchema,
    responses={200: AuditListSchema},
    errors=(403,),
    tag="admin",
    description=_FILTERS,
)
@requires("admin")
async def admin_log(request: web.Request) -> web.Response:
    require_admin(request)
    return await _page(request)
