"""Milestones and labels of a repository: planning, managed by triagers."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from schemas.common import PageQuerySchema
from schemas.planning import (
    LabelCreateSchema,
    LabelEnvelopeSchema,
    LabelListSchema,
    LabelUpdateSchema,
    MilestoneCreateSchema,
    MilestoneEnvelopeSchema,
    MilestoneListQuerySchema,
    MilestoneListSchema,
    MilestoneUpdateSchema,
)

from ..errors import NotFound
from ..keys import CONFIG, STORE
from ..policy import requires
from ..services.publish import event
from ..web import present
from ..web.auth import require_user
from ..web.openapi import doc
from ..web.permissions import load_repo
from ..web.present_planning import milestone as milestone_json
from ..web.rest import json_response, read_json, read_query
from .issues import number_of

routes = web.RouteTableDef()
REPO = "/api/repositories/{owner}/{name}"
MILESTONES = REPO + "/milestones"
LABELS = REPO + "/labels"
LABEL_PATH = {"label": {"type": "string", "minLength": 1, "maxLength": 50}}


def _milestone(request: web.Request, repo: dict, row: dict) -> dict:
    return milestone_json(request.app[CONFIG].base_url, repo, row)


async def _load_milestone(request: web.Request, repo: dict) -> dict:
    found = await request.app[STORE].milestones.get(repo["id"], number_of(request))
    if found is None:
        raise NotFound("milestone not found")
    return found


def _milestone_event(
    request: web.Request, repo: dict, action: str, row: dict, **extra: Any
) -> list:
    return [
        event(
            request,
            repo,
            "milestone",
            {"action": action, "milestone": _milestone(request, repo, row), **extra},
        )
    ]


@routes.get(MILESTONES)
@doc(
    "Milestones in a state (default open), due soonest first",
    query=MilestoneListQuerySchema,
    responses={200: MilestoneListSchema},
    errors=(400, 404),
    public=True,
    tag="planning",
    description="state: open, closed or all; sort: due_on (default, undated last) or number.",
)
@requires("issues.read")
async def list_milestones(request: web.Request) -> web.Response:
    repo = await load_repo(request)
    q = read_query(request, MilestoneListQuerySchema())
    rows, more = await request.app[STORE].milestones.page(
        repo["id"], q["state"], q["sort"], q["direction"], q["limit"], q["offset"]
    )
    return json_response(
        {"milestones": [_milestone(request, repo, r) for r in rows], "hasMore": more}
    )


@routes.post(MILESTONES)
@doc(
    "Create a milestone (triage access)",
    body=MilestoneCreateSchema,
    responses={201: MilestoneEnvelopeSchema},
    errors=(403, 404, 409),
    tag="planning",
    description="Numbered per repository from 1. A title already used (ignoring case) is 409.",
)
@requires("issues.write")
async def create_milestone(request: web.Request) -> web.Response:
    user = require_user(request)
    repo = await load_repo(request, "triage")
    data = await read_json(request, MilestoneCreateSchema())
    row = await request.app[STORE].milestones.create(
        repo["id"],
        user["id"],
        data["title"],
        data["description"],
        data["dueOn"],
        data["state"],
        emit=lambda row: _milestone_event(request, repo, "created", row),
    )
    return json_response({"milestone": _milestone(request, repo, row)}, status=201)


@routes.get(MILESTONES + "/{number}")
@doc(
    "One milestone with its open and closed counts",
    responses={200: MilestoneEnvelopeSchema},
    errors=(404,),
    public=True,
    tag="planning",
)
@requires("issues.read")
async def get_milestone(request: web.Request) -> web.Response:
    repo = await load_repo(request)
    return json_response(
        {"milestone": _milestone(request, repo, await _load_milestone(request, repo))}
    )


@routes.patch(MILESTONES + "/{number}")
@doc(
    "Edit a milestone's title, description, due date or state (triage access)",
    body=MilestoneUpdateSchema,
    responses={200: MilestoneEnvelopeSchema},
    errors=(403, 404, 409),
    tag="planning",
    description="The milestone event's action is closed, opened or edited, as GitHub's.",
)
@requires("issues.write")
async def patch_milestone(request: web.Request) -> web.Response:
    require_user(request)
    repo = await load_repo(request, "triage")
    found = await _load_milestone(request, repo)
    data = await read_json(request, MilestoneUpdateSchema())

    def action(row: dict) -> str:
        if row["state"] != found["state"]:
            return "closed" if row["state"] == "closed" else "opened"
        return "edited"

    row = await request.app[STORE].milestones.update(
        found["id"],
        data,
        emit=lambda row: (
            []
            if row is None
            else _milestone_event(request, repo, action(row), row, changes=sorted(data))
        ),
    )
    if row is None:
        raise NotFound("milestone not found")
    return json_response({"milestone": _milestone(request, repo, row)})


@routes.delete(MILESTONES + "/{number}")
@doc(
    "Delete a milestone (triage access); its issues keep going without one",
    responses={204: "deleted"},
    errors=(403, 404),
    tag="planning",
)
@requires("issues.write")
async def delete_milestone(request: web.Request) -> web.Response:
    require_user(request)
    repo = await load_repo(request, "triage")
    found = await _load_milestone(request, repo)
    gone = await request.app[STORE].milestones.delete(
        found["id"],
        emit=lambda row: [] if row is None else _milestone_event(request, repo, "deleted", row),
    )
    if gone is None:
        raise NotFound("milestone not found")
    return web.Response(status=204)


# Labels


def _label_event(request: web.Request, repo: dict, action: str, row: dict, **extra: Any) -> list:
    return [event(request, repo, "label", {"action": action, "label": present.label(row), **extra})]


async def _load_label(request: web.Request, repo: dict) -> dict:
    found = await request.app[STORE].labels.get(repo["id"], request.match_info["label"])
    if found is None:
        raise NotFound("label not found")
    return found


@routes.get(LABELS)
@doc(
    "A repository's labels, by name",
    query=PageQuerySchema,
    responses={200: LabelListSchema},
    errors=(400, 404),
    public=True,
    tag="planning",
    description="A label name set on an issue gets its object on first use, grey (ededed).",
)
@requires("issues.read")
async def list_labels(request: web.Request) -> web.Response:
    repo = await load_repo(request)
    page = read_query(request, PageQuerySchema())
    rows, more = await request.app[STORE].labels.page(repo["id"], page["limit"], page["offset"])
    return json_response({"labels": [present.label(r) for r in rows], "hasMore": more})


@routes.post(LABELS)
@doc(
    "Create a label (triage access)",
    body=LabelCreateSchema,
    responses={201: LabelEnvelopeSchema},
    errors=(403, 404, 409),
    tag="planning",
    description="A name already used (ignoring case) is 409.",
)
@requires("issues.write")
async def create_label(request: web.Request) -> web.Response:
    require_user(request)
    repo = await load_repo(request, "triage")
    data = await read_json(request, LabelCreateSchema())
    row = await request.app[STORE].labels.create(
        repo["id"],
        data["name"],
        data["color"],
        data["description"],
        emit=lambda row: _label_event(request, repo, "created", row),
    )
    return json_response({"label": present.label(row)}, status=201)


@routes.get(LABELS + "/{label}")
@doc(
    "One label by name (ignoring case)",
    responses={200: LabelEnvelopeSchema},
    errors=(404,),
    public=True,
    tag="planning",
    path=LABEL_PATH,
)
@requires("issues.read")
async def get_label(request: web.Request) -> web.Response:
    repo = await load_repo(request)
    return json_response({"label": present.label(await _load_label(request, repo))})


@routes.patch(LABELS + "/{label}")
@doc(
    "Rename a label or change its colour or description (triage access)",
    body=LabelUpdateSchema,
    responses={200: LabelEnvelopeSchema},
    errors=(403, 404, 409),
    tag="planning",
    path=LABEL_PATH,
    description="A new name follows onto every issue and pull request carrying the label.",
)
@requires("issues.write")
async def patch_label(request: web.Request) -> web.Response:
    require_user(request)
    repo = await load_repo(request, "triage")
    found = await _load_label(request, repo)
    data = await read_json(request, LabelUpdateSchema())
    row = await request.app[STORE].labels.update(
        found["id"],
        data,
        emit=lambda row: (
            []
            if row is None
            else _label_event(request, repo, "edited", row, changes=sorted(data), was=found["name"])
        ),
    )
    if row is None:
        raise NotFound("label not found")
    return json_response({"label": present.label(row)})


@routes.delete(LABELS + "/{label}")
@doc(
    "Delete a label (triage access); it comes off every issue carrying it",
    responses={204: "deleted"},
    errors=(403, 404),
    tag="planning",
    path=LABEL_PATH,
)
@requires("issues.write")
async def delete_label(request: web.Request) -> web.Response:
    require_user(request)
    repo = await load_repo(request, "triage")
    found = await _load_label(request, repo)
    gone = await request.app[STORE].labels.delete(
        found["id"],
        emit=lambda row: [] if row is None else _label_event(request, repo, "deleted", row),
    )
    if gone is None:
        raise NotFound("label not found")
    return web.Response(status=204)
