"""Organizations: create and read them, their members, teams, and the teams' repositories."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from schemas.common import PageQuerySchema
from schemas.orgs import (
    MemberQuerySchema,
    MembershipSchema,
    OrgCreateSchema,
    OrgEnvelopeSchema,
    OrgListSchema,
    OrgMemberEnvelopeSchema,
    OrgMemberListSchema,
    OrgUpdateSchema,
    TeamCreateSchema,
    TeamEnvelopeSchema,
    TeamListSchema,
    TeamMemberListSchema,
    TeamRepoEnvelopeSchema,
    TeamRepoListSchema,
    TeamRepoSchema,
    TeamUpdateSchema,
)

from ..errors import Forbidden, NotFound
from ..keys import CONFIG, STORE
from ..notify.hub import HUB
from ..policy import requires
from ..services import audit
from ..services.lost_forks import DELETED_FORKS_HEADER, delete_lost_forks, noted
from ..web import present
from ..web.auth import current_user, require_user
from ..web.names import path_username
from ..web.openapi import doc
from ..web.permissions import check_repo, readable_by
from ..web.rest import json_response, read_json, read_query, shared

routes = web.RouteTableDef()
ORG = "/api/orgs/{org}"
TEAM = ORG + "/teams/{team}"


async def load_org(request: web.Request, need: str | None = None) -> dict[str, Any]:
    """The organization of the path (404 if none); need "member" or "owner" else 403."""
    user = current_user(request)
    org = await request.app[STORE].orgs.by_name(
        request.match_info["org"], user["id"] if user else 0
    )
    if org is None:
        raise NotFound("organization not found")
    if need is not None:
        require_user(request)
        if org["role"] is None or (need == "owner" and org["role"] != "owner"):
            raise Forbidden(f"only the organization's {need}s may do this")
    return org


async def _team(request: web.Request, org: dict[str, Any]) -> dict[str, Any]:
    team = await request.app[STORE].orgs.team(org["id"], request.match_info["team"])
    if team is None:
        raise NotFound("team not found")
    return team


async def _person(request: web.Request) -> dict[str, Any]:
    """The user the path names: a person (not an organization, not the ghost)."""
    user = await request.app[STORE].users.by_username(path_username(request))
    if user is None or user["is_ghost"] or user["is_org"]:
        raise NotFound("user not found")
    return user


async def recheck_org(request: web.Request, org: dict[str, Any]) -> None:
    """Open sockets on the organization's repositories lose those they no longer may read."""
    hub = request.app[HUB]
    for repo in await request.app[STORE].orgs.repositories(org["id"]):
        await hub.recheck(repo["id"], {"owner": org["username"], "name": repo["name"]})


def _org_json(request: web.Request, org: dict[str, Any]) -> dict[str, Any]:
    return {"organization": present.organization(request.app[CONFIG].base_url, org)}


@routes.post("/api/orgs")
@doc(
    "Create an organization; the caller becomes its owner",
    body=OrgCreateSchema,
    responses={201: OrgEnvelopeSchema},
    errors=(401, 409),
    tag="organizations",
    description="The name is in the users' namespace: a user and an organization can't share "
    "one (409). An organization owns repositories (`POST /api/repositories` with "
    '`"owner": "<org>"`, listed by `GET /api/users/<org>/repositories`) and cannot sign in.',
)
@requires("org.write")
async def create_org(request: web.Request) -> web.Response:
    user = require_user(request)
    data = await read_json(request, OrgCreateSchema())
    store = request.app[STORE]
    await store.orgs.create(user["id"], data["name"], data["description"])
    org = await store.orgs.by_name(data["name"], user["id"])
    return json_response(_org_json(request, org), status=201)


@routes.get("/api/orgs")
@doc(
    "The caller's organizations, by name",
    query=PageQuerySchema,
    responses={200: OrgListSchema},
    errors=(401,),
    tag="organizations",
)
@requires("org.read")
async def my_orgs(request: web.Request) -> web.Response:
    user = require_user(request)
    page = read_query(request, shared(PageQuerySchema))
    store = request.app[STORE]
    rows, more = await store.orgs.of_user(user["id"], page["limit"], page["offset"])
    base = request.app[CONFIG].base_url
    return json_response(
        {"organizations": [present.organization(base, r) for r in rows], "hasMore": more}
    )


@routes.get(ORG)
@doc(
    "An organization, with the caller's role in it",
    responses={200: OrgEnvelopeSchema},
    errors=(404,),
    public=True,
    tag="organizations",
)
@requires("org.read")
async def get_org(request: web.Request) -> web.Response:
    return json_response(_org_json(request, await load_org(request)))


@routes.patch(ORG)
@doc(
    "Change an organization's description, display name or two-factor rule (owners)",
    body=OrgUpdateSchema,
    responses={200: OrgEnvelopeSchema},
    errors=(401, 403, 404, 409),
    tag="organizations",
    description="`requireTwoFactor: true` needs an owner who has two-factor authentication "
    "on (409 otherwise). While it holds, members and collaborators without a second factor "
    "hold no grant on the organization's repositories: the API and git answer 403 naming "
    "the rule where they would need one, and the feed and sockets leave its private "
    "repositories out; they cannot turn their last factor off (409).",
)
@requires("org.admin")
async def patch_org(request: web.Request) -> web.Response:
    org = await load_org(request, "owner")
    data = await read_json(request, OrgUpdateSchema())
    fields = {"description": data.get("description"), "name": data.get("displayName")}
    store = request.app[STORE]
    if "requireTwoFactor" in data:
        # First: its 409 leaves the rest unchanged too.
        user = require_user(request)
        await store.orgs.set_two_factor_rule(org["id"], user["id"], data["requireTwoFactor"])
        await recheck_org(request, org)
    await store.orgs.update(org["id"], {k: v for k, v in fields.items() if v is not None})
    org = await store.orgs.by_name(org["username"], require_user(request)["id"])
    return json_response(_org_json(request, org))


# Members


@routes.get(ORG + "/members")
@doc(
    "Members and owners of an organization (members only)",
    query=MemberQuerySchema,
    responses={200: OrgMemberListSchema},
    errors=(401, 403, 404),
    tag="organizations",
)
@requires("org.read")
async def list_members(request: web.Request) -> web.Response:
    org = await load_org(request, "member")
    page = read_query(request, shared(MemberQuerySchema))
    rows, more = await request.app[STORE].orgs.members(
        org["id"], page["limit"], page["offset"], page.get("role")
    )
    base = request.app[CONFIG].base_url
    return json_response({"members": [present.org_member(base, r) for r in rows], "hasMore": more})


@routes.put(ORG + "/members/{username}")
@doc(
    "Add a member or set their role, member or owner (owners)",
    body=MembershipSchema,
    responses={200: OrgMemberEnvelopeSchema, 201: OrgMemberEnvelopeSchema},
    errors=(401, 403, 404, 409),
    tag="organizations",
    description="As GitHub's membership, without the invitation: the user is a member at once "
    "(as collaborators are added here). Members read every repository of the organization "
    "(GitHub's default base permission) and may create repositories in it; owners are "
    "owners of every one. Demoting the last owner is 409.",
)
@requires("org.admin")
async def put_member(request: web.Request) -> web.Response:
    org = await load_org(request, "owner")
    data = await read_json(request, MembershipSchema())
    target = await _person(request)
    added = await request.app[STORE].orgs.set_member(
        org["id"],
        target["id"],
        data["role"],
        audit=lambda added: audit.entry(
            request,
            "org.member.added" if added else "org.member.role",
            user=target,
            owner=org,
            data={"role": data["role"]},
        ),
    )
    member = present.org_member(request.app[CONFIG].base_url, {**target, "role": data["role"]})
    return json_response({"member": member}, status=201 if added else 200)


@routes.delete(ORG + "/members/{username}")
@doc(
    "Remove a member (owners), or leave (`me`, or one's own username)",
    responses={204: "removed"},
    errors=(401, 403, 404, 409),
    tag="organizations",
    description="Leaving ends every grant at once: the organization's, its teams' (the "
    "member leaves every team) and the admin they held on the repositories they created or "
    "forked into it; open WebSockets stop receiving what they may no longer read. "
    "As on GitHub, their private forks of the organization's private repositories they may "
    f"no longer read are deleted; the answer names them in `{DELETED_FORKS_HEADER}` "
    "(`owner/name, …`). The last owner can't leave (409).",
)
@requires("org.admin")
async def delete_member(request: web.Request) -> web.Response:
    user = require_user(request)
    org = await load_org(request, "member")
    target = await _person(request)
    if target["id"] != user["id"] and org["role"] != "owner":
        raise Forbidden("only the organization's owners may remove others")
    entry = audit.entry(request, "org.member.removed", user=target, owner=org)
    if not await request.app[STORE].orgs.remove_member(
        org["id"], target["id"], audit=audit.when(entry)
    ):
        raise NotFound("not a member of the organization")
    await recheck_org(request, org)
    deleted = await delete_lost_forks(request.app, org["id"], target["id"])
    return noted(web.Response(status=204), deleted)


# Teams


@routes.get(ORG + "/teams")
@doc(
    "An organization's teams (members only)",
    query=PageQuerySchema,
    responses={200: TeamListSchema},
    errors=(401, 403, 404),
    tag="teams",
)
@requires("org.read")
async def list_teams(request: web.Request) -> web.Response:
    org = await load_org(request, "member")
    page = read_query(request, shared(PageQuerySchema))
    rows, more = await request.app[STORE].orgs.teams(org["id"], page["limit"], page["offset"])
    return json_response(
        {"teams": [present.team(org["username"], r) for r in rows], "hasMore": more}
    )


@routes.post(ORG + "/teams")
@doc(
    "Create a team with a permission on the repositories it will be given (owners)",
    body=TeamCreateSchema,
    responses={201: TeamEnvelopeSchema},
    errors=(401, 403, 404, 409),
    tag="teams",
)
@requires("org.admin")
async def create_team(request: web.Request) -> web.Response:
    org = await load_org(request, "owner")
    data = await read_json(request, TeamCreateSchema())
    row = await request.app[STORE].orgs.create_team(
        org["id"],
        data["name"],
        data["description"],
        data["permission"],
        audit=audit.entry(
            request,
            "org.team.created",
            owner=org,
            data={"team": data["name"], "permission": data["permission"]},
        ),
    )
    return json_response({"team": present.team(org["username"], row)}, status=201)


@routes.get(TEAM)
@doc(
    "A team (members only)",
    responses={200: TeamEnvelopeSchema},
    errors=(401, 403, 404),
    tag="teams",
)
@requires("org.read")
async def get_team(request: web.Request) -> web.Response:
    org = await load_org(request, "member")
    return json_response({"team": present.team(org["username"], await _team(request, org))})


@routes.patch(TEAM)
@doc(
    "Rename a team, change its description or its permission (owners)",
    body=TeamUpdateSchema,
    responses={200: TeamEnvelopeSchema},
    errors=(401, 403, 404, 409),
    tag="teams",
    description="A new permission holds at once, on every repository the team has without a "
    "permission of its own: a team raised from read to write pushes right after.",
)
@requires("org.admin")
async def patch_team(request: web.Request) -> web.Response:
    org = await load_org(request, "owner")
    team = await _team(request, org)
    data = await read_json(request, TeamUpdateSchema())
    row = await request.app[STORE].orgs.update_team(
        team["id"],
        data,
        audit=audit.entry(
            request, "org.team.changed", owner=org, data={"team": team["name"], **data}
        ),
    )
    return json_response({"team": present.team(org["username"], row)})


@routes.delete(TEAM)
@doc(
    "Delete a team; its grants end (owners)",
    responses={204: "deleted"},
    errors=(401, 403, 404),
    tag="teams",
)
@requires("org.admin")
async def delete_team(request: web.Request) -> web.Response:
    org = await load_org(request, "owner")
    team = await _team(request, org)
    await request.app[STORE].orgs.delete_team(
        team["id"],
        audit=audit.entry(request, "org.team.deleted", owner=org, data={"team": team["name"]}),
    )
    await recheck_org(request, org)
    return web.Response(status=204)


@routes.get(TEAM + "/members")
@doc(
    "A team's members (organization members only)",
    query=PageQuerySchema,
    responses={200: TeamMemberListSchema},
    errors=(401, 403, 404),
    tag="teams",
)
@requires("org.read")
async def list_team_members(request: web.Request) -> web.Response:
    org = await load_org(request, "member")
    team = await _team(request, org)
    page = read_query(request, shared(PageQuerySchema))
    rows, more = await request.app[STORE].orgs.team_members(
        team["id"], page["limit"], page["offset"]
    )
    base = request.app[CONFIG].base_url
    return json_response({"users": [present.user_summary(base, r) for r in rows], "hasMore": more})


@routes.put(TEAM + "/members/{username}")
@doc(
    "Put a member of the organization on a team (owners)",
    responses={200: "already on the team", 201: "added"},
    errors=(401, 403, 404, 409, 422),
    tag="teams",
    description="Only members of the organization join its teams (422 otherwise: add them "
    "with `PUT /api/orgs/:org/members/:username` first).",
)
@requires("org.admin")
async def put_team_member(request: web.Request) -> web.Response:
    org = await load_org(request, "owner")
    team = await _team(request, org)
    target = await _person(request)
    entry = audit.entry(
        request, "org.team.member.added", user=target, owner=org, data={"team": team["name"]}
    )
    added = await request.app[STORE].orgs.add_team_member(
        team, target["id"], audit=audit.when(entry)
    )
    return web.Response(status=201 if added else 200)


@routes.delete(TEAM + "/members/{username}")
@doc(
    "Take someone off a team; their grants through it end at once (owners)",
    responses={204: "removed"},
    errors=(401, 403, 404),
    tag="teams",
)
@requires("org.admin")
async def delete_team_member(request: web.Request) -> web.Response:
    org = await load_org(request, "owner")
    team = await _team(request, org)
    target = await _person(request)
    entry = audit.entry(
        request, "org.team.member.removed", user=target, owner=org, data={"team": team["name"]}
    )
    if not await request.app[STORE].orgs.remove_team_member(
        team["id"], target["id"], audit=audit.when(entry)
    ):
        raise NotFound("not on this team")
    await recheck_org(request, org)
    return web.Response(status=204)


@routes.get(TEAM + "/repositories")
@doc(
    "A team's repositories and the permission it holds on each (organization members only)",
    query=PageQuerySchema,
    responses={200: TeamRepoListSchema},
    errors=(401, 403, 404),
    tag="teams",
)
@requires("org.read")
async def list_team_repos(request: web.Request) -> web.Response:
    org = await load_org(request, "member")
    team = await _team(request, org)
    page = read_query(request, shared(PageQuerySchema))
    rows, more = await request.app[STORE].orgs.team_repos(
        team["id"], page["limit"], page["offset"], readable_by(request)
    )
    return json_response(
        {"repositories": [present.team_repo(org["username"], r) for r in rows], "hasMore": more}
    )


async def _org_repo(request: web.Request, org: dict[str, Any]) -> dict[str, Any]:
    repo = await request.app[STORE].repos.by_name(org["username"], request.match_info["name"])
    if repo is None:
        raise NotFound("the organization has no repository of this name")
    check_repo(request, repo)  # a token limited to other repositories may not grant this one
    return repo


@routes.put(TEAM + "/repositories/{name}")
@doc(
    "Give a team one of the organization's repositories (owners)",
    body=TeamRepoSchema,
    responses={200: TeamRepoEnvelopeSchema, 201: TeamRepoEnvelopeSchema},
    errors=(401, 403, 404),
    tag="teams",
    description="With `permission`, this repository's grant (GitHub's per-repository team "
    "permission); without, the team's, following the team's when it changes.",
)
@requires("org.admin")
async def put_team_repo(request: web.Request) -> web.Response:
    org = await load_org(request, "owner")
    team = await _team(request, org)
    data = await read_json(request, TeamRepoSchema())
    repo = await _org_repo(request, org)
    permission = data.get("permission")
    entry = audit.entry(
        request,
        "org.team.repository",
        repo=repo,
        data={"team": team["name"], "permission": permission or team["permission"]},
    )
    added = await request.app[STORE].orgs.set_team_repo(
        team["id"], repo["id"], permission, audit=entry
    )
    body = present.team_repo(
        org["username"],
        {
            "name": repo["name"],
            "visibility": repo["visibility"],
            "permission": permission or team["permission"],
        },
    )
    return json_response({"repository": body}, status=201 if added else 200)


@routes.delete(TEAM + "/repositories/{name}")
@doc(
    "Take a repository from a team; the team's grant on it ends at once (owners)",
    responses={204: "removed"},
    errors=(401, 403, 404),
    tag="teams",
)
@requires("org.admin")
async def delete_team_repo(request: web.Request) -> web.Response:
    org = await load_org(request, "owner")
    team = await _team(request, org)
    repo = await _org_repo(request, org)
    entry = audit.entry(
        request, "org.team.repository.removed", repo=repo, data={"team": team["name"]}
    )
    if not await request.app[STORE].orgs.remove_team_repo(
        team["id"], repo["id"], audit=audit.when(entry)
    ):
        raise NotFound("the team does not have this repository")
    await recheck_org(request, org)
    return web.Response(status=204)
