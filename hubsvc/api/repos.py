"""Repositories: create, read, update, delete, collaborators, forks and stars."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from schemas.common import PageQuerySchema
from schemas.repos import (
    CollaboratorEnvelopeSchema,
    CollaboratorSchema,
    ForkListSchema,
    ForkSchema,
    RepoCreateSchema,
    RepoEnvelopeSchema,
    RepoListSchema,
    RepoUpdateSchema,
    StarResultSchema,
    UserListSchema,
)

from ..errors import BadRequest, Forbidden, NotFound, Unavailable, Unprocessable
from ..git.files import REPO_FILES
from ..keys import AUTH, CONFIG, STORE
from ..notify.hub import HUB
from ..notify.leader import LEADER
from ..policy import requires
from ..services import audit
from ..services.lost_forks import DELETED_FORKS_HEADER, delete_lost_forks, noted
from ..services.publish import event, publish
from ..web import present
from ..web.auth import caps_of, current_user, require_user
from ..web.conditional import (
    CONDITIONAL,
    NOT_MODIFIED,
    KeptTags,
    conditional_json,
    entity_tag,
    kept_answer,
)
from ..web.names import path_username
from ..web.openapi import doc
from ..web.permissions import allows, load_repo, readable_by, role_of
from ..web.rest import json_response, read_json, read_query, shared

routes = web.RouteTableDef()
# GET /api/repositories/:o/:n's ETag by path, viewer and credential (web.conditional).
KEPT_REPOS = KeptTags()
REPO = "/api/repositories/{owner}/{name}"


def _repo_json(request: web.Request, row: dict) -> dict:
    return present.repo(request.app[CONFIG].base_url, row, current_user(request))


def _viewer_id(request: web.Request) -> int:
    user = current_user(request)
    return user["id"] if user else 0


async def _create_on_disk(
    request: web.Request, row: dict, make: Callable[[], Awaitable[None]]
) -> dict:
    """Run the disk step of a create; if it fails the row goes too, so nothing dangles.

    The row was written marked as in creation by this process: if the process dies
    before the mark ends here, recovery removes the row and any folder (services.recovery),
    since no 201 was sent.
    """
    store = request.app[STORE]
    try:
        await make()
        if not await store.creations.done(row["id"]):
            raise Unavailable("the repository could not be created; try again")
    except BaseException:
        await store.repos.delete(row["id"])
        await request.app[REPO_FILES].remove(row["id"])
        raise
    return row


async def owner_for(request: web.Request, user: dict, owner: str | None) -> tuple[int, bool]:
    """Whose a new repository (or fork) is: the caller's, or an organization's they belong
    to (GitHub's default: members may create); and whether the caller gets admin on it."""
    if owner is None or owner.lower() == user["username"].lower():
        return user["id"], False
    org = await request.app[STORE].orgs.by_name(owner, user["id"])
    if org is None:
        raise Forbidden("owner: repositories are created for yourself or an organization")
    if org["role"] is None:
        raise Forbidden("owner: only the organization's members may create its repositories")
    # As on GitHub, a member who creates one of the organization's repositories is its
    # admin; owners are owners of every one already.
    return org["id"], org["role"] != "owner"


@routes.post("/api/repositories")
@doc(
    "Create a repository owned by the caller or by an organization",
    body=RepoCreateSchema,
    responses={201: RepoEnvelopeSchema},
    errors=(403, 409),
    tag="repositories",
    description="autoInit=true makes a first commit with a README.md on the default branch. "
    "With `owner`, an organization's (its members may create them, as GitHub's default is). "
    "As on GitHub the member who creates one (or forks into the organization) is its admin, "
    "but only while a member: the grant ends with the membership, whether they leave or are "
    "removed (an owner's `PUT …/collaborators/:username` makes it a grant of its own, kept "
    "as an outside collaborator's). Owners hold owner on every repository already.",
)
@requires("repo.create")
async def create_repo(request: web.Request) -> web.Response:
    user = require_user(request)
    data = await read_json(request, RepoCreateSchema())
    owner_id, creator_admin = await owner_for(request, user, data.get("owner"))
    store, files = request.app[STORE], request.app[REPO_FILES]
    row = await store.repos.create(
        owner_id=owner_id,
        name=data["name"],
        description=data["description"],
        visibility=data["visibility"],
        default_branch=data["defaultBranch"],
        admin_id=user["id"] if creator_admin else None,
        viewer=user["id"],
        holder=request.app[LEADER].holder,
    )

    async def make() -> None:
        await files.create(row["id"], data["defaultBranch"])
        if data["autoInit"]:
            readme = f"# {data['name']}\n\n{data['description']}\n".rstrip() + "\n"
            await files.run(
                row["id"],
                lambda g: g.auto_init(
                    data["defaultBranch"],
                    user["name"] or user["username"],
                    f"{user['username']}@users.noreply.hubsvc",
                    readme,
                ),
            )

    await _create_on_disk(request, row, make)
    row["role"] = role_of(row, user)
    body = _repo_json(request, row)
    return json_response({"repo": body, "isOwner": body["isOwner"]}, status=201)


@routes.get("/api/users/{username}/repositories")
@doc(
    "A user's repositories that the caller may read, newest first",
    query=PageQuerySchema,
    responses={200: RepoListSchema},
    errors=(401, 404),
    public=True,
    tag="repositories",
    description="`me` as the username lists the caller's own, private ones included.",
)
@requires("user.read")
async def user_repos(request: web.Request) -> web.Response:
    page = read_query(request, shared(PageQuerySchema))
    owner = await request.app[STORE].users.by_username(path_username(request))
    if owner is None:
        raise NotFound("user not found")
    rows, more = await request.app[STORE].repos.of_owner(
        owner["id"], _viewer_id(request), page["limit"], page["offset"], readable_by(request)
    )
    return json_response({"repositories": [_repo_json(request, r) for r in rows], "hasMore": more})


@routes.get("/api/users/{username}/starred")
@doc(
    "Repositories a user starred that the caller may read, most recently starred first",
    query=PageQuerySchema,
    responses={200: RepoListSchema},
    errors=(401, 404),
    public=True,
    tag="repositories",
    description="`me` as the username lists the caller's own stars.",
)
@requires("user.read")
async def starred(request: web.Request) -> web.Response:
    page = read_query(request, shared(PageQuerySchema))
    user = await request.app[STORE].users.by_username(path_username(request))
    if user is None:
        raise NotFound("user not found")
    rows, more = await request.app[STORE].repos.starred_by(
        user["id"], _viewer_id(request), page["limit"], page["offset"], readable_by(request)
    )
    return json_response({"repositories": [_repo_json(request, r) for r in rows], "hasMore": more})


@routes.get(REPO)
@doc(
    "Repository info",
    responses={200: RepoEnvelopeSchema, 304: NOT_MODIFIED},
    errors=(404,),
    public=True,
    tag="repositories",
    description=CONDITIONAL,
)
@requires("repo.read")
async def get_repo(request: web.Request) -> web.Response:
    db = request.app[STORE].db
    generation = db.generation
    identity = request.get(AUTH)
    match = request.match_info
    # All the answer is made of besides the database: the path, who asks and with what.
    key = (
        match["owner"],
        match["name"],
        identity.user["id"] if identity else None,
        caps_of(identity),
    )
    tag = KEPT_REPOS.get(db, generation, key)
    if tag is not None:
        answer = kept_answer(request, tag)
        if answer is not None:
            return answer
    repo = await load_repo(request)
    viewer = current_user(request)
    base_url = request.app[CONFIG].base_url

    def build() -> dict:
        body = present.repo(base_url, repo, viewer)
        return {"repo": body, "isOwner": body["isOwner"]}

    # The row as read (with the viewer's role and star) and who reads it make the answer.
    seed = repo.get("row_digest") or tuple(repo.items())
    tag = entity_tag("repo", base_url, viewer["id"] if viewer else None, seed, repo["role"])
    answer = conditional_json(request, tag, build)
    if "fresh_until" in repo:
        KEPT_REPOS.put(db, generation, key, tag, repo["fresh_until"])
    return answer


@routes.patch(REPO)
@doc(
    "Change name, description, visibility or default branch",
    description="The owner (and an organization's owners) change anything; maintainers "
    "and admins the description and the default branch. "
    "A fork of a private repository stays private: making it public is 409. "
    "Making a repository public first deletes the git objects no ref reaches "
    "(a branch pushed and deleted while private), and its private-period events "
    "stay with those who could read it then (events carry `public`). "
    "After a rename the old name keeps answering, as on GitHub: API paths with "
    "301 (308 for other methods than GET) to the new path, query kept; git clone, "
    "fetch and push of the old URL work as before. Only readers of the repository "
    "are redirected (others get 404), and a new repository of the old name ends "
    "the redirect for good. Usernames cannot change, so only repositories move.",
    body=RepoUpdateSchema,
    responses={200: RepoEnvelopeSchema},
    errors=(403, 404, 409),
    tag="repositories",
)
@requires("repo.admin")
async def patch_repo(request: web.Request) -> web.Response:
    require_user(request)
    repo = await load_repo(request, "maintain")
    data = await read_json(request, RepoUpdateSchema())
    if ("name" in data or "visibility" in data) and not allows(repo["role"], "owner"):
        raise Forbidden("owner access is required to rename a repository or change its visibility")
    if "defaultBranch" in data:
        exists = await request.app[REPO_FILES].run(
            repo["id"],
            lambda g: g.is_empty() or any(b["name"] == data["defaultBranch"] for b in g.branches()),
        )
        if not exists:
            raise BadRequest("defaultBranch: no such branch")
        await request.app[REPO_FILES].run(
            repo["id"], lambda g: g.set_default_branch(data["defaultBranch"])
        )
    entry = None
    if data.get("visibility", repo["visibility"]) != repo["visibility"]:
        entry = audit.entry(
            request,
            "repo.visibility",
            repo=repo,
            data={"from": repo["visibility"], "to": data["visibility"]},
        )
    if data.get("visibility") == "public" and repo["visibility"] != "public":
        # What was pushed and deleted while private must not become readable by oid:
        # the objects no ref reaches go before anyone else may read the repository.
        files = request.app[REPO_FILES]
        async with files.quiet(repo["id"]):
            await files.prune_unreachable(repo["id"])
            row = await request.app[STORE].repos.update(
                repo["id"], data, _viewer_id(request), audit=entry
            )
    else:
        row = await request.app[STORE].repos.update(
            repo["id"], data, _viewer_id(request), audit=entry
        )
    if data.get("visibility") == "private" and repo["visibility"] != "private":
        await _recheck(request, row)
    row["role"] = repo["role"]
    body = _repo_json(request, row)
    return json_response({"repo": body, "isOwner": body["isOwner"]})


@routes.delete(REPO)
@doc(
    "Delete a repository and its git data (owner only); its forks stay",
    responses={204: "deleted"},
    errors=(403, 404),
    tag="repositories",
)
@requires("repo.admin")
async def delete_repo(request: web.Request) -> web.Response:
    require_user(request)
    repo = await load_repo(request, "owner")
    await request.app[STORE].repos.delete(repo["id"])
    await request.app[REPO_FILES].remove(repo["id"])
    await _recheck(request, repo)
    return web.Response(status=204)


# Collaborators


@routes.get(REPO + "/collaborators")
@doc(
    "Collaborators and their permission (writers only)",
    query=PageQuerySchema,
    responses={200: UserListSchema},
    errors=(401, 403, 404),
    tag="collaborators",
    description="As on GitHub, where listing collaborators needs push access: who holds "
    "which permission is for the repository's writers. A reader gets 403, an "
    "anonymous caller 401 on a public repository, and whoever may not read a "
    "private one 404.",
)
@requires("repo.collaborators")
async def list_collaborators(request: web.Request) -> web.Response:
    repo = await load_repo(request)  # first, so a private repository stays 404
    if not allows(repo["role"], "write"):
        require_user(request)
        raise Forbidden("write access to this repository is required")
    page = read_query(request, shared(PageQuerySchema))
    rows, more = await request.app[STORE].repos.collaborators(
        repo["id"], page["limit"], page["offset"]
    )
    base = request.app[CONFIG].base_url
    return json_response({"users": [present.member(base, r) for r in rows], "hasMore": more})


async def _target_user(request: web.Request) -> dict:
    user = await request.app[STORE].users.by_username(path_username(request))
    # The ghost collaborates on nothing; an organization gives grants through teams.
    if user is None or user["is_ghost"] or user["is_org"]:
        raise NotFound("user not found")
    return user


@routes.put(REPO + "/collaborators/{username}")
@doc(
    "Add a collaborator or change their permission (owner only)",
    body=CollaboratorSchema,
    responses={200: CollaboratorEnvelopeSchema, 201: CollaboratorEnvelopeSchema},
    errors=(403, 404),
    tag="collaborators",
)
@requires("repo.admin")
async def put_collaborator(request: web.Request) -> web.Response:
    require_user(request)
    repo = await load_repo(request, "owner")
    data = await read_json(request, CollaboratorSchema())
    target = await _target_user(request)
    if target["id"] == repo["owner_id"]:
        raise BadRequest("username: the owner is not a collaborator")
    added = await request.app[STORE].repos.set_collaborator(
        repo["id"],
        target["id"],
        data["permission"],
        audit=lambda added: audit.entry(
            request,
            "repo.collaborator.added" if added else "repo.collaborator.permission",
            user=target,
            repo=repo,
            data={"permission": data["permission"]},
        ),
    )
    user = present.member(
        request.app[CONFIG].base_url, {**target, "permission": data["permission"]}
    )
    return json_response({"user": user}, status=201 if added else 200)


@routes.delete(REPO + "/collaborators/{username}")
@doc(
    "Remove a collaborator (owner only)",
    responses={204: "removed"},
    errors=(403, 404),
    tag="collaborators",
    description="On an organization's private repository, as on GitHub, a collaborator who "
    "may no longer read it loses their private forks of it (deleted, git data too); the "
    f"answer names them in `{DELETED_FORKS_HEADER}` (`owner/name, …`).",
)
@requires("repo.admin")
async def delete_collaborator(request: web.Request) -> web.Response:
    require_user(request)
    repo = await load_repo(request, "owner")
    target = await _target_user(request)
    entry = audit.entry(request, "repo.collaborator.removed", user=target, repo=repo)
    if not await request.app[STORE].repos.remove_collaborator(
        repo["id"], target["id"], audit=audit.when(entry)
    ):
        raise NotFound("not a collaborator")
    await _recheck(request, repo)
    deleted = await delete_lost_forks(request.app, repo["owner_id"], target["id"])
    return noted(web.Response(status=204), deleted)


async def _recheck(request: web.Request, repo: dict) -> None:
    """Open sockets subscribed to a repository lose it when they lost read access."""
    # Events are checked against access as it is when they are sent, so none leaks
    # either way; this tells the socket and frees its subscription at once.
    await request.app[HUB].recheck(
        repo["id"], {"owner": repo["owner_username"], "name": repo["name"]}
    )


# Forks and stars


@routes.post(REPO + "/fork")
@doc(
    "Fork into the caller's namespace (or an organization's) with the full history",
    body=ForkSchema,
    responses={201: RepoEnvelopeSchema},
    errors=(403, 404, 409, 422),
    tag="forks",
    description="`owner`: an organization the caller belongs to (a member is admin of the "
    "fork while a member, as of a repository they create there); a private repository is "
    "forked only into the caller's account or its own organization (422). A private fork "
    "of an organization's private repository is deleted when its owner may no longer "
    "read that repository (as on GitHub). The parent's `fork` event carries "
    "`{forkee, forker}`; a private fork is `forkee: null` there, since the parent's readers, hooks and watchers may "
    "not read it.",
)
@requires("repo.fork")
async def fork_repo(request: web.Request) -> web.Response:
    user = require_user(request)
    source = await load_repo(request)
    data = await read_json(request, ForkSchema())
    owner_id, creator_admin = await owner_for(request, user, data.get("owner"))
    private = source["visibility"] == "private" or bool(source["private_lineage"])
    if private and owner_id not in (user["id"], source["owner_id"]):
        # Its members would read a copy of what they may not read.
        raise Unprocessable(
            "owner: a private repository is forked only into your account or its own organization"
        )
    store, files = request.app[STORE], request.app[REPO_FILES]
    row = await store.repos.create(
        admin_id=user["id"] if creator_admin else None,
        viewer=user["id"],
        holder=request.app[LEADER].holder,
        owner_id=owner_id,
        name=data.get("name") or source["name"],
        description=data.get("description", source["description"]),
        visibility=source["visibility"],
        default_branch=source["default_branch"],
        parent_id=source["id"],
        private_lineage=private,
    )
    await _create_on_disk(request, row, lambda: files.fork(source["id"], row["id"]))
    row["role"] = role_of(row, user)
    fork = _repo_json(request, row)
    # The fork is made when its files are: its event is written once they exist. The
    # event goes to every reader of the parent, its hooks and watchers, who need not be
    # able to read a private fork: then it names the forker only (forkee null).
    forkee = fork if fork["visibility"] == "public" else None
    await publish(request, source, "fork", {"forkee": forkee, "forker": fork["owner"]})
    return json_response({"repo": fork, "isOwner": fork["isOwner"]}, status=201)


@routes.get(REPO + "/forks")
@doc(
    "Forks the caller may read, newest first",
    query=PageQuerySchema,
    responses={200: ForkListSchema},
    errors=(404,),
    public=True,
    tag="forks",
)
@requires("repo.read")
async def list_forks(request: web.Request) -> web.Response:
    repo = await load_repo(request)
    page = read_query(request, shared(PageQuerySchema))
    rows, more = await request.app[STORE].repos.forks(
        repo["id"], _viewer_id(request), page["limit"], page["offset"], readable_by(request)
    )
    return json_response({"forks": [_repo_json(request, r) for r in rows], "hasMore": more})


async def _star(request: web.Request, on: bool) -> web.Response:
    user = require_user(request)
    repo = await load_repo(request)
    changed, count = await request.app[STORE].repos.star(
        repo["id"],
        user["id"],
        on,
        emit=lambda result: (
            [
                event(
                    request,
                    repo,
                    "star",
                    {"action": "added" if on else "removed", "starCount": result[1]},
                )
            ]
            if result[0]
            else []
        ),
    )
    return json_response({"starred": on, "starCount": count})


@routes.post(REPO + "/star")
@doc("Star (idempotent)", responses={200: StarResultSchema}, errors=(404,), tag="stars")
@requires("repo.star")
async def star(request: web.Request) -> web.Response:
    return await _star(request, True)


@routes.delete(REPO + "/star")
@doc("Unstar (idempotent)", responses={200: StarResultSchema}, errors=(404,), tag="stars")
@requires("repo.star")
async def unstar(request: web.Request) -> web.Response:
    return await _star(request, False)


@routes.get(REPO + "/stars")
@doc(
    "Users who starred, most recent first",
    query=PageQuerySchema,
    responses={200: UserListSchema},
    errors=(404,),
    public=True,
    tag="stars",
)
@requires("repo.read")
async def list_stars(request: web.Request) -> web.Response:
    repo = await load_repo(request)
    page = read_query(request, shared(PageQuerySchema))
    rows, more = await request.app[STORE].repos.stargazers(
        repo["id"], page["limit"], page["offset"]
    )
    base = request.app[CONFIG].base_url
    return json_response({"users": [present.member(base, r) for r in rows], "hasMore": more})
