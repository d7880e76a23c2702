"""Issues and their comments."""

from __future__ import annotations

from typing import Any, cast

from aiohttp import web
from marshmallow import Schema, validate

from schemas.common import PageQuerySchema
from schemas.issues import (
    CommentCreateSchema,
    CommentEnvelopeSchema,
    CommentListSchema,
    IssueCreateSchema,
    IssueEnvelopeSchema,
    IssueListQuerySchema,
    IssueListSchema,
    IssueUpdateSchema,
    IssueWithCommentsSchema,
)

from ..errors import BadRequest, Forbidden, NotFound, Unprocessable
from ..keys import CONFIG, STORE
from ..policy import requires
from ..services import pulls
from ..services.protection import required_approvals, review_decision
from ..services.publish import event
from ..web import present
from ..web.auth import current_user, require_user
from ..web.conditional import CONDITIONAL, NOT_MODIFIED, conditional_json, entity_tag
from ..web.markdown import with_html
from ..web.names import path_username
from ..web.openapi import doc
from ..web.permissions import allows, load_repo
from ..web.rest import json_response, load, read_json, read_query, shared

routes = web.RouteTableDef()
ISSUES = "/api/repositories/{owner}/{name}/issues"
ASSIGNEES_DOC = (
    "Assignees must exist (400) and, as on GitHub, hold triage access or more, or be "
    "members of the organization that owns the repository (else 422 naming them)."
)


def number_of(request: web.Request) -> int:
    """The :number path parameter; anything but a positive integer is 404."""
    raw = request.match_info["number"]
    if not raw.isdigit() or len(raw) > 12:
        raise NotFound("not found")
    return int(raw)


async def assignee_ids(request: web.Request, repo: dict, usernames: list[str]) -> list[int]:
    """Ids of the named users; 400 naming one that does not exist, 422 those not assignable.

    As on GitHub: people with triage access or more, and the owning organization's
    members. Anyone else, a mere reader of a public repository included, would be told
    by e-mail and chat by whoever names them.
    """
    store = request.app[STORE]
    found = await store.users.by_usernames(usernames)
    for name in usernames:
        if name.lower() not in found:
            raise BadRequest(f"assignees: no user named {name}")
    ids = [found[name.lower()]["id"] for name in usernames]
    allowed = await store.issues.assignable(repo["id"], ids)
    outside = [name for name, id_ in zip(usernames, ids, strict=True) if id_ not in allowed]
    if outside:
        raise Unprocessable(
            "assignees: need triage access to this repository or membership of its"
            " organization: " + ", ".join(outside)
        )
    return ids


async def milestone_fields(request: web.Request, repo: dict, data: dict[str, Any]) -> dict:
    """data with milestone_id for the store when a milestone number (or null) was sent;
    422 naming the field for a number this repository has no milestone under."""
    if "milestone" not in data:
        return data
    if data["milestone"] is None:
        return {**data, "milestone_id": None}
    found = await request.app[STORE].milestones.get(repo["id"], data["milestone"])
    if found is None:
        raise Unprocessable(f"milestone: this repository has no milestone {data['milestone']}")
    return {**data, "milestone_id": found["id"]}


def check_edit(repo: dict, item: dict, user: dict, data: dict[str, Any]) -> None:
    """Author or triagers edit title, body, state; labels and assignees need triage, base write.

    Triage is GitHub's: manage issues and pull requests without pushing.
    """
    triager = allows(repo["role"], "triage")
    if not triager and item["author_id"] != user["id"]:
        raise Forbidden("only the author or someone with triage access may edit this")
    if not triager and any(k in data for k in ("labels", "assignees", "milestone")):
        raise Forbidden("triage access is required to change labels, assignees or milestone")
    if "base" in data and not allows(repo["role"], "write"):
        raise Forbidden("write access is required to change the base")


def state_action(before: dict, after: dict) -> str:
    """opened/closed/reopened/edited, as the event names the change."""
    if before["state"] != after["state"]:
        return "closed" if after["state"] == "closed" else "reopened"
    return "edited"


def edit_changes(before: dict, after: dict, data: dict) -> dict:
    """An edit event's `changes` (the fields sent) and, for assignees, who was added."""
    changes: dict = {"changes": sorted(data)}
    if "assignees" in data:
        had = {a["username"] for a in before["assignees"]}
        changes["assigneesAdded"] = [
            a["username"] for a in after["assignees"] if a["username"] not in had
        ]
    return changes


async def load_issue(request: web.Request, repo: dict, is_pull: bool) -> dict:
    """The issue or pull request of the path, else 404."""
    item = await request.app[STORE].issues.get(repo["id"], number_of(request), is_pull)
    if item is None:
        raise NotFound("pull request not found" if is_pull else "issue not found")
    return item


def comment_json(base_url: str, row: dict) -> dict:
    """A comment, with edited."""
    return {**present.comment(base_url, row), "edited": bool(row["edited"])}


def _issue(request: web.Request, repo: dict, row: dict) -> dict:
    return present.issue(request.app[CONFIG].base_url, repo, row)


def list_query(request: web.Request, schema: type[Schema]) -> dict[str, Any]:
    """A list's query; unknown keys are 400 naming one, unless ignoreUnknown=true skips them.

    With ignoreUnknown=true an unknown state, sort or direction value falls back to the
    default too.
    `me` as assignee or author is the caller.
    """
    raw = {key: request.query.getone(key) for key in request.query}
    lenient = load(
        shared(schema, ("ignoreUnknown",)), {"ignoreUnknown": raw.get("ignoreUnknown", "false")}
    )["ignoreUnknown"]
    known = set(shared(schema).fields)
    unknown = sorted(set(raw) - known)
    if unknown and not lenient:
        raise BadRequest(f"unknown query parameter: {unknown[0]} (ignoreUnknown=true skips it)")
    raw = {k: v for k, v in raw.items() if k in known}
    if lenient:
        for key in ("state", "sort", "direction"):
            choices = cast(validate.OneOf, shared(schema).fields[key].validate).choices
            if raw.get(key) not in (None, *choices):
                raw.pop(key)
    query = load(shared(schema), raw)
    for key in ("assignee", "author"):
        if key in query:
            query[key] = path_username(request, query[key])
    return query


def list_filters(query: dict[str, Any]) -> dict[str, Any]:
    """The store's filters from a loaded list query."""
    return {
        k: query[k]
        for k in ("labels", "assignee", "milestone", "author", "since", "sort", "direction")
        if k in query
    }


LIST_DESCRIPTION = (
    "Filters as on GitHub: labels=bug,ui (every label must be on it), assignee "
    "(username, `none`, `*`), milestone (number, `none`, `*`), author (or creator), since (ISO 8601: updated at or after), "
    "sort=created|updated|comments, direction=asc|desc (default desc). Unknown query "
    "parameters answer 400 naming one, unless ignoreUnknown=true (which also ignores "
    "unknown state, sort and direction values)."
)


@routes.get(ISSUES)
@doc(
    "Issues in a state (default open), newest first",
    query=IssueListQuerySchema,
    responses={200: IssueListSchema, 304: NOT_MODIFIED},
    errors=(400, 404),
    public=True,
    tag="issues",
    description="state: open, closed or all. " + LIST_DESCRIPTION + " " + CONDITIONAL,
)
@requires("issues.read")
async def list_issues(request: web.Request) -> web.Response:
    repo = await load_repo(request)
    query = list_query(request, IssueListQuerySchema)
    rows, more, rows_digest = await request.app[STORE].issues.listed(
        repo["id"], False, query["state"], query["limit"], query["offset"], list_filters(query)
    )
    base = request.app[CONFIG].base_url
    # The page's rows (by their digest) and the repository's row make the answer.
    tag = entity_tag(
        "issues",
        base,
        rows_digest,
        more,
        repo.get("row_digest") or tuple(repo.items()),
        repo["role"],
    )
    return conditional_json(
        request,
        tag,
        lambda: {"issues": [present.issue(base, repo, r) for r in rows], "hasMore": more},
    )


@routes.post(ISSUES)
@doc(
    "Open an issue (any signed-in reader); labels and assignees need write access",
    body=IssueCreateSchema,
    responses={201: IssueEnvelopeSchema},
    errors=(403, 404, 422),
    tag="issues",
    description=ASSIGNEES_DOC,
)
@requires("issues.create")
async def create_issue(request: web.Request) -> web.Response:
    user = require_user(request)
    repo = await load_repo(request)
    data = await read_json(request, IssueCreateSchema())
    if (data["labels"] or data["assignees"] or data.get("milestone")) and not allows(
        repo["role"], "triage"
    ):
        raise Forbidden("triage access is required to set labels, assignees or milestone")
    ids = await assignee_ids(request, repo, data["assignees"])
    data = await milestone_fields(request, repo, data)
    row = await request.app[STORE].issues.create(
        repo_id=repo["id"],
        author_id=user["id"],
        title=data["title"],
        body=data["body"],
        labels=data["labels"],
        assignee_ids=ids,
        milestone_id=data.get("milestone_id"),
        emit=lambda row: [
            event(request, repo, "issue", {"action": "opened", "issue": _issue(request, repo, row)})
        ],
    )
    return json_response({"issue": _issue(request, repo, row)}, status=201)


@routes.get(ISSUES + "/{number}")
@doc(
    "One issue with its comments (oldest first)",
    query=PageQuerySchema,
    responses={200: IssueWithCommentsSchema},
    errors=(404,),
    public=True,
    tag="issues",
    description="limit/offset page through the comments (default 30).",
)
@requires("issues.read")
async def get_issue(request: web.Request) -> web.Response:
    return await show_with_comments(request, False)


async def _comment_page(request: web.Request, is_pull: bool) -> tuple[dict, dict, dict]:
    """The repository, the issue or pull request, and a page of its comments."""
    repo = await load_repo(request)
    item = await load_issue(request, repo, is_pull)
    page = read_query(request, shared(PageQuerySchema))
    rows, more = await request.app[STORE].issues.comments(item["id"], page["limit"], page["offset"])
    base = request.app[CONFIG].base_url
    comments = [comment_json(base, c) for c in rows]
    with_html(request, repo, *comments)
    return repo, item, {"comments": comments, "hasMore": more}


async def pulls_for_caller(request: web.Request, repo: dict, rows: list[dict]) -> list[dict]:
    """Pull request objects for the caller: a private head repository named only to its readers.

    Events and other shared copies use present.pull on the bare row, which names a
    private head repository to nobody.
    """
    readable, required = await pull_context(request, repo, rows)
    return present_pulls(request, repo, rows, readable, required)


async def pull_context(
    request: web.Request, repo: dict, rows: list[dict]
) -> tuple[set[int], dict[str, int]]:
    """What pull request objects need beyond their rows: the private head repositories the
    caller may read, and the approvals each base branch's protection requires."""
    private = [
        r["head_repo_id"]
        for r in rows
        if r.get("head_repo_visibility") == "private" and r["head_repo_id"] != repo["id"]
    ]
    user = current_user(request)
    readable = (
        await request.app[STORE].repos.readable_ids(private, user["id"])
        if private and user
        else set()
    )
    required = await required_approvals(request.app, repo, {r["base"] for r in rows})
    return readable, required


def present_pulls(
    request: web.Request,
    repo: dict,
    rows: list[dict],
    readable: set[int],
    required: dict[str, int],
) -> list[dict]:
    """The pull request objects of rows, given pull_context's answers."""
    base = request.app[CONFIG].base_url
    return [
        present.pull(
            base,
            repo,
            {
                **r,
                "head_visible": r["head_repo_id"] in readable,
                "review_decision": review_decision(r, required[r["base"]]),
            },
        )
        for r in rows
    ]


async def show_with_comments(request: web.Request, is_pull: bool) -> web.Response:
    """Shared by issues and pull requests: the item and a page of its comments."""
    repo, item, comments = await _comment_page(request, is_pull)
    base = request.app[CONFIG].base_url
    key, body = (
        ("pullRequest", (await pulls_for_caller(request, repo, [item]))[0])
        if is_pull
        else ("issue", present.issue(base, repo, item))
    )
    if is_pull:
        body["mergeProblems"] = await pulls.merge_holds(request.app, repo, item)
    with_html(request, repo, body)
    return json_response({key: body, **comments})


@routes.patch(ISSUES + "/{number}")
@doc(
    "Edit title, body, state (author or writers), labels, assignees and milestone (triage)",
    body=IssueUpdateSchema,
    responses={200: IssueEnvelopeSchema},
    errors=(403, 404, 422),
    tag="issues",
    description=ASSIGNEES_DOC,
)
@requires("issues.write")
async def patch_issue(request: web.Request) -> web.Response:
    user = require_user(request)
    repo = await load_repo(request)
    item = await load_issue(request, repo, False)
    data = await read_json(request, IssueUpdateSchema())
    check_edit(repo, item, user, data)
    ids = await assignee_ids(request, repo, data["assignees"]) if "assignees" in data else None
    row = await request.app[STORE].issues.update(
        item["id"],
        await milestone_fields(request, repo, data),
        ids,
        emit=lambda row: [
            event(
                request,
                repo,
                "issue",
                {
                    "action": state_action(item, row),
                    "issue": _issue(request, repo, row),
                    **edit_changes(item, row, data),
                },
            )
        ],
    )
    return json_response({"issue": _issue(request, repo, row)})


@routes.delete(ISSUES + "/{number}")
@doc(
    "Delete an issue (repository owner only)",
    responses={204: "deleted"},
    errors=(403, 404),
    tag="issues",
)
@requires("issues.write")
async def delete_issue(request: web.Request) -> web.Response:
    require_user(request)
    repo = await load_repo(request, "owner")
    item = await load_issue(request, repo, False)
    await request.app[STORE].issues.delete(item["id"])
    return web.Response(status=204)


async def add_comment(request: web.Request, is_pull: bool) -> web.Response:
    """Shared by issues and pull requests: any signed-in reader may comment."""
    user = require_user(request)
    repo = await load_repo(request)
    item = await load_issue(request, repo, is_pull)
    data = await read_json(request, CommentCreateSchema())
    base = request.app[CONFIG].base_url

    def commented(result: tuple[dict, dict]) -> list:
        comment, updated = result
        item_key, item_body = (
            ("pullRequest", present.pull(base, repo, updated))
            if is_pull
            else ("issue", present.issue(base, repo, updated))
        )
        return [
            event(
                request,
                repo,
                "pull_request" if is_pull else "issue",
                {
                    "action": "commented",
                    item_key: item_body,
                    "comment": comment_json(base, comment),
                },
            )
        ]

    comment, _ = await request.app[STORE].issues.add_comment(
        item["id"], user["id"], data["body"], emit=commented
    )
    answer = comment_json(base, comment)
    with_html(request, repo, answer)
    return json_response({"comment": answer}, status=201)


async def list_comments(request: web.Request, is_pull: bool) -> web.Response:
    """Shared by issues and pull requests."""
    return json_response((await _comment_page(request, is_pull))[2])


@routes.post(ISSUES + "/{number}/comments")
@doc(
    "Comment on an issue (any signed-in reader)",
    body=CommentCreateSchema,
    responses={201: CommentEnvelopeSchema},
    errors=(404,),
    tag="issues",
)
@requires("issues.comment")
async def comment_issue(request: web.Request) -> web.Response:
    return await add_comment(request, False)


@routes.get(ISSUES + "/{number}/comments")
@doc(
    "An issue's comments, oldest first",
    query=PageQuerySchema,
    responses={200: CommentListSchema},
    errors=(404,),
    public=True,
    tag="issues",
)
@requires("issues.read")
async def issue_comments(request: web.Request) -> web.Response:
    return await list_comments(request, False)


async def _changeable_comment(request: web.Request, is_pull: bool) -> tuple[dict, dict]:
    """The repository and the comment of the path, if the caller may change it.

    Its author and the repository's admins (and owner) may; other readers get 403.
    """
    user = require_user(request)
    repo = await load_repo(request)
    item = await load_issue(request, repo, is_pull)
    raw = request.match_info["id"]
    found = (
        await request.app[STORE].issues.comment(item["id"], int(raw))
        if raw.isdigit() and len(raw) <= 18
        else None
    )
    if found is None:
        raise NotFound("comment not found")
    if found["author_id"] != user["id"] and not allows(repo["role"], "admin"):
        raise Forbidden("only the comment's author or a repository admin may change it")
    return repo, found


def _comment_events(
    request: web.Request, repo: dict, is_pull: bool, action: str, item: dict, comment: dict
) -> list:
    """The event of a comment's edit or deletion, written with it."""
    base = request.app[CONFIG].base_url
    if is_pull:
        return [
            event(
                request,
                repo,
                "pull_request",
                {
                    "action": action,
                    "pullRequest": present.pull(base, repo, item),
                    "comment": comment,
                },
            )
        ]
    return [
        event(
            request,
            repo,
            "issue",
            {"action": action, "issue": present.issue(base, repo, item), "comment": comment},
        )
    ]


async def edit_comment(request: web.Request, is_pull: bool) -> web.Response:
    """Shared by issues and pull requests: the author or an admin changes the body."""
    repo, found = await _changeable_comment(request, is_pull)
    data = await read_json(request, CommentCreateSchema())
    base = request.app[CONFIG].base_url
    changed = await request.app[STORE].issues.edit_comment(
        found["id"],
        data["body"],
        emit=lambda result: (
            []
            if result is None
            else _comment_events(
                request, repo, is_pull, "comment_edited", result[1], comment_json(base, result[0])
            )
        ),
    )
    if changed is None:
        raise NotFound("comment not found")
    answer = comment_json(base, changed[0])
    with_html(request, repo, answer)
    return json_response({"comment": answer})


async def delete_comment(request: web.Request, is_pull: bool) -> web.Response:
    """Shared by issues and pull requests: the author or an admin deletes a comment."""
    repo, found = await _changeable_comment(request, is_pull)
    # The event names what went, not what it said: the log outlives the comment, and
    # may be read by people the body was never meant for (GitHub's deleted events too).
    before = comment_json(request.app[CONFIG].base_url, found)
    before.pop("body", None)
    item = await request.app[STORE].issues.delete_comment(
        found["id"],
        emit=lambda item: (
            []
            if item is None
            else _comment_events(request, repo, is_pull, "comment_deleted", item, before)
        ),
    )
    if item is None:
        raise NotFound("comment not found")
    return web.Response(status=204)


COMMENT_EDIT_DOC = (
    "The comment's author or a repository admin (or owner); other readers "
    "get 403. The answer and later reads carry edited: true; the "
    "{event} event has action comment_edited."
)
COMMENT_DELETE_DOC = (
    "The comment's author or a repository admin (or owner); other readers "
    "get 403. The {event} event has action comment_deleted and the "
    "comment without its body (id, author, times)."
)


@routes.patch(ISSUES + "/{number}/comments/{id}")
@doc(
    "Edit a comment on an issue",
    body=CommentCreateSchema,
    responses={200: CommentEnvelopeSchema},
    errors=(403, 404),
    tag="issues",
    description=COMMENT_EDIT_DOC.format(event="issue"),
)
@requires("issues.write")
async def patch_issue_comment(request: web.Request) -> web.Response:
    return await edit_comment(request, False)


@routes.delete(ISSUES + "/{number}/comments/{id}")
@doc(
    "Delete a comment on an issue",
    responses={204: "deleted"},
    errors=(403, 404),
    tag="issues",
    description=COMMENT_DELETE_DOC.format(event="issue"),
)
@requires("issues.write")
async def delete_issue_comment(request: web.Request) -> web.Response:
    return await delete_comment(request, False)
