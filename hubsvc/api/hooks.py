"""Per-repository webhooks: managed by the repository's admins, delivered from the event log."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from schemas.common import PageQuerySchema
from schemas.hooks import (
    HookCreateSchema,
    HookDeliveryEnvelopeSchema,
    HookDeliveryListSchema,
    HookEnvelopeSchema,
    HookListSchema,
    HookUpdateSchema,
)

from ..errors import BadRequest, NotFound
from ..events.shape import EVENT_TYPES
from ..keys import STORE
from ..notify.netcheck import Refused, check_url
from ..notify.webhook import HOOKS
from ..policy import requires
from ..services import audit
from ..timeutil import iso
from ..web.auth import require_user
from ..web.openapi import doc
from ..web.permissions import load_repo
from ..web.rest import json_response, read_json, read_query, shared

routes = web.RouteTableDef()
HOOKS_PATH = "/api/repositories/{owner}/{name}/hooks"
WHO = (
    "The repository's admins only (its owner or an admin collaborator): 404 to whoever "
    "cannot read the repository, 403 to those who can but are not admins. "
)


def delivery_view(row: dict[str, Any]) -> dict[str, Any]:
    """A delivery as the API shows it."""
    return {
        "id": str(row["id"]),
        "guid": row["guid"],
        "event": {
            "id": str(row["event_id"]) if row["event_id"] is not None else None,
            "type": row["event_type"],
            "action": row["action"],
        },
        "status": row["status"],
        "attempts": row["attempts"],
        "statusCode": row["last_status"],
        "durationMs": row["last_duration_ms"],
        "error": row["last_error"],
        "responseExcerpt": row["response_excerpt"],
        "nextAttemptAt": iso(row["next_attempt_at"]) if row["status"] == "pending" else None,
        "createdAt": row["created_at"],
        "deliveredAt": row["delivered_at"],
    }


def hook_view(hook: dict[str, Any]) -> dict[str, Any]:
    """A hook as the API shows it: never its secret."""
    last = hook.get("last_delivery")
    return {
        "id": str(hook["id"]),
        "url": hook["url"],
        "format": hook["format"],
        "events": hook["events"],
        "branches": hook["branches"],
        "active": hook["active"],
        "disabledReason": hook["disabled_reason"],
        "hasSecret": bool(hook["secret"]),
        "createdAt": hook["created_at"],
        "lastDelivery": delivery_view(last) if last else None,
    }


async def _admin_repo(request: web.Request) -> dict[str, Any]:
    require_user(request)
    return await load_repo(request, "admin")


def _id(request: web.Request, key: str) -> int:
    raw = request.match_info[key]
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:
        raise NotFound("not found")
    return int(raw)


def _hook_data(hook: dict[str, Any]) -> dict[str, Any]:
    """What the security log keeps of a hook: its id and host, never its path (a chat
    webhook's URL holds its token) or secret."""
    return {"hook": str(hook["id"]), "host": urlsplit(hook["url"]).hostname or ""}


async def _hook(request: web.Request) -> tuple[dict[str, Any], dict[str, Any]]:
    repo = await _admin_repo(request)
    hook = await request.app[STORE].hooks.get(repo["id"], _id(request, "id"))
    if hook is None:
        raise NotFound("hook not found")
    return repo, hook


async def _check_destination(request: web.Request, url: str) -> None:
    try:
        await check_url(request.app[HOOKS].rules, url)
    except (Refused, ValueError) as exc:
        raise BadRequest(f"url: {exc}") from None


def _clean(data: dict[str, Any]) -> dict[str, Any]:
    """Empty branches and secret mean none."""
    for key in ("branches", "secret"):
        if key in data and not data[key]:
            data[key] = None
    if "events" in data:
        data["events"] = [t for t in EVENT_TYPES if t in data["events"]]
    return data


@routes.get(HOOKS_PATH)
@doc(
    "A repository's webhooks, oldest first",
    query=PageQuerySchema,
    responses={200: HookListSchema},
    errors=(401, 403, 404),
    tag="hooks",
    description=WHO,
)
@requires("repo.admin")
async def list_hooks(request: web.Request) -> web.Response:
    repo = await _admin_repo(request)
    page = read_query(request, shared(PageQuerySchema))
    hooks, more = await request.app[STORE].hooks.of_repo(repo["id"], page["limit"], page["offset"])
    return json_response({"hooks": [hook_view(h) for h in hooks], "hasMore": more})


@routes.post(HOOKS_PATH)
@doc(
    "Add a webhook to a repository",
    body=HookCreateSchema,
    responses={201: HookEnvelopeSchema},
    errors=(400, 401, 403, 404, 409),
    tag="hooks",
    description=WHO
    + (
        "It receives the events committed from now on that it matches (a private "
        "repository's too), in log order, at least once: each as a POST with "
        "X-Hubsvc-Event, X-Hubsvc-Delivery (the same for every attempt of one event, so a "
        "receiver drops repeats by it), X-Hubsvc-Hook-Id and, with a secret, "
        "X-Hub-Signature-256. 2xx: delivered. 3xx: failed, redirects are not followed. 4xx "
        "other than 408 and 429: failed for that event (redeliverable), the next goes. "
        "Other answers, errors and timeouts (webhooks.timeout_seconds, 10 s; the same "
        "delivery id is sent again): retried after 2, 4, 8… s up to "
        "webhooks.max_retry_seconds (60 s), a 429 after its Retry-After; later events wait "
        "meanwhile. Failing for webhooks.disable_after_hours (24) without one success, the "
        "hook is set inactive with disabledReason. At most 20 hooks per repository → "
        "else 409. A URL whose host is not public (see url) → 400."
    ),
)
@requires("repo.admin")
async def create_hook(request: web.Request) -> web.Response:
    repo = await _admin_repo(request)
    data = _clean(await read_json(request, HookCreateSchema()))
    await _check_destination(request, data["url"])
    hook = await request.app[STORE].hooks.create(
        repo["id"],
        url=data["url"],
        format=data.get("format", "discord"),
        events=data.get("events", list(EVENT_TYPES)),
        branches=data.get("branches"),
        secret=data.get("secret"),
        active=data.get("active", True),
        created_by=require_user(request)["id"],
        audit=lambda hook: audit.entry(
            request, "repo.hook.created", repo=repo, data=_hook_data(hook)
        ),
    )
    if hook["active"]:
        request.app[HOOKS].run_hook(hook["id"], repo["id"])
    return json_response({"hook": hook_view(hook)}, status=201)


@routes.get(HOOKS_PATH + "/{id}")
@doc(
    "One webhook",
    responses={200: HookEnvelopeSchema},
    errors=(401, 403, 404),
    tag="hooks",
    description=WHO,
)
@requires("repo.admin")
async def get_hook(request: web.Request) -> web.Response:
    _, hook = await _hook(request)
    return json_response({"hook": hook_view(hook)})


@routes.patch(HOOKS_PATH + "/{id}")
@doc(
    "Change a webhook",
    body=HookUpdateSchema,
    responses={200: HookEnvelopeSchema},
    errors=(400, 401, 403, 404),
    tag="hooks",
    description=WHO
    + (
        "Fields left out keep their values. active: true re-activates a hook the server "
        "disabled: it starts over from events committed from then on; deliveries queued "
        "before stay queued and go out."
    ),
)
@requires("repo.admin")
async def update_hook(request: web.Request) -> web.Response:
    repo, hook = await _hook(request)
    data = _clean(await read_json(request, HookUpdateSchema()))
    if "url" in data:
        await _check_destination(request, data["url"])
    changed = sorted(k for k in data if k != "secret") + (["secret"] if "secret" in data else [])
    hook = await request.app[STORE].hooks.update(
        hook["id"],
        data,
        audit=lambda row: (
            row
            and audit.entry(
                request, "repo.hook.changed", repo=repo, data={**_hook_data(row), "fields": changed}
            )
        ),
    )
    if hook is None:
        raise NotFound("hook not found")
    if hook["active"]:
        request.app[HOOKS].run_hook(hook["id"], repo["id"])
    else:
        request.app[HOOKS].stop_hook(hook["id"])
    return json_response({"hook": hook_view(hook)})


@routes.delete(HOOKS_PATH + "/{id}")
@doc(
    "Delete a webhook and its deliveries",
    responses={204: "deleted"},
    errors=(401, 403, 404),
    tag="hooks",
    description=WHO,
)
@requires("repo.admin")
async def delete_hook(request: web.Request) -> web.Response:
    repo, hook = await _hook(request)
    request.app[HOOKS].stop_hook(hook["id"])
    await request.app[STORE].hooks.delete(
        hook["id"],
        audit=audit.entry(request, "repo.hook.deleted", repo=repo, data=_hook_data(hook)),
    )
    return web.Response(status=204)


@routes.post(HOOKS_PATH + "/{id}/test")
@doc(
    "Send a ping to the webhook now",
    responses={200: HookDeliveryEnvelopeSchema},
    errors=(401, 403, 404),
    tag="hooks",
    description=WHO
    + (
        "The ping (X-Hubsvc-Event: ping) is sent at once, also to an inactive hook, and "
        "recorded among its deliveries; the answer is that delivery. It is not retried."
    ),
)
@requires("repo.admin")
async def test_hook(request: web.Request) -> web.Response:
    _, hook = await _hook(request)
    delivery = await request.app[HOOKS].ping(hook)
    return json_response({"delivery": delivery_view(delivery)})


@routes.get(HOOKS_PATH + "/{id}/deliveries")
@doc(
    "A webhook's deliveries, newest first",
    query=PageQuerySchema,
    responses={200: HookDeliveryListSchema},
    errors=(401, 403, 404),
    tag="hooks",
    description=WHO + "Each with its event, attempts, the last attempt's status code, "
    "duration, error and an excerpt of the receiver's answer.",
)
@requires("repo.admin")
async def list_deliveries(request: web.Request) -> web.Response:
    _, hook = await _hook(request)
    page = read_query(request, shared(PageQuerySchema))
    rows, more = await request.app[STORE].hooks.deliveries(
        hook["id"], page["limit"], page["offset"]
    )
    return json_response({"deliveries": [delivery_view(r) for r in rows], "hasMore": more})


@routes.post(HOOKS_PATH + "/{id}/deliveries/{deliveryId}/redeliver")
@doc(
    "Send a delivery again",
    responses={202: HookDeliveryEnvelopeSchema},
    errors=(401, 403, 404),
    tag="hooks",
    description=WHO
    + (
        "The delivery is queued again at once with the same body and the same delivery id "
        "(X-Hubsvc-Delivery), ahead of the hook's later ones; an inactive hook sends it "
        "when re-activated."
    ),
)
@requires("repo.admin")
async def redeliver(request: web.Request) -> web.Response:
    repo, hook = await _hook(request)
    row = await request.app[STORE].hooks.redeliver(hook["id"], _id(request, "deliveryId"))
    if row is None:
        raise NotFound("delivery not found")
    if hook["active"]:
        request.app[HOOKS].run_hook(hook["id"], repo["id"])
    return json_response({"delivery": delivery_view(row)}, status=202)
