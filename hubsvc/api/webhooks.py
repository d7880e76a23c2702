"""The chat webhook: inbound events, administrators' tests, deliveries and redelivery."""

from __future__ import annotations

import hashlib
import hmac
import json
import time

from aiohttp import web

from schemas.common import PageQuerySchema
from schemas.hooks import MailDeliveryListSchema
from schemas.webhooks import (
    AcceptedSchema,
    DeliveryEnvelopeSchema,
    DeliveryListSchema,
    InboundEventSchema,
    WebhookTestSchema,
)

from ..errors import BadRequest, Conflict, NotFound, Unauthorized, Unavailable
from ..keys import CONFIG, STORE
from ..notify.messages import ping_message
from ..notify.webhook import WEBHOOK, sign_inbound
from ..policy import requires
from ..services.publish import publish
from ..timeutil import iso
from ..web.auth import current_user, require_admin, require_user
from ..web.openapi import doc
from ..web.permissions import load_repo
from ..web.rest import (
    check_json_type,
    json_depth,
    json_response,
    load,
    parse_json,
    read_query,
    shared,
)

routes = web.RouteTableDef()


TIMESTAMP_HEADER = "X-Hubsvc-Timestamp"
SIGNATURE_HEADER = "X-Hub-Signature-256"


def _check_signature(request: web.Request, secret: str, raw: bytes) -> tuple[str, int]:
    """401 unless the request is signed, over its timestamp and body, within the tolerance."""
    timestamp = request.headers.get(TIMESTAMP_HEADER, "")
    if not (timestamp.isascii() and timestamp.isdigit() and len(timestamp) <= 12):
        raise Unauthorized(f"missing or invalid {TIMESTAMP_HEADER} (Unix seconds)")
    given = request.headers.get(SIGNATURE_HEADER, "")
    # Constant-time comparison over the raw bytes as received.
    if not hmac.compare_digest(sign_inbound(secret, timestamp, raw).encode(), given.encode()):
        raise Unauthorized(f"missing or invalid {SIGNATURE_HEADER}")
    tolerance = request.app[CONFIG]["chat"]["webhook_tolerance_seconds"]
    now = int(time.time())
    if abs(now - int(timestamp)) > tolerance:
        raise Unauthorized(f"{TIMESTAMP_HEADER} is more than {tolerance} seconds from now")
    return given, now


def _secret_may_post_to(request: web.Request, repo: dict) -> bool:
    """The shared secret reaches public repositories and the private ones listed for it."""
    if repo["visibility"] == "public":
        return True
    listed = {r.lower() for r in request.app[CONFIG]["chat"]["webhook_repositories"]}
    return f"{repo['owner_username']}/{repo['name']}".lower() in listed


@routes.post("/api/webhooks/chat")
@doc(
    "Accept an event: signed with the webhook secret, or from a writer of the repository",
    body=InboundEventSchema,
    responses={202: AcceptedSchema},
    errors=(403, 404, 409),
    public=True,
    tag="webhooks",
    description=(
        "With chat.webhook_secret set, the request needs X-Hubsvc-Timestamp (Unix seconds) and "
        "X-Hub-Signature-256: sha256=<hex HMAC-SHA256 with the secret of "
        "\"<timestamp>.\" followed by the raw body> (Slack's scheme, GitHub's header); else "
        "401. A timestamp more than chat.webhook_tolerance_seconds (300) from now → 401; the "
        "same signed request a second time → 409. The secret may post to public repositories "
        "and to the private ones listed in chat.webhook_repositories; any other → 404, as "
        "for a missing one. Without a secret the caller must be signed in with write access. "
        "data is checked by type (see its schema) before the 202 → else 400. Accepted events "
        "go to the outbox, the feed and the WebSocket with `inbound: true` (chat messages "
        "say so); they never send e-mail or chat notices, and every link in what the server "
        "sends is built by the server, never taken from the event."
    ),
)
@requires("repo.write")
async def inbound(request: web.Request) -> web.Response:
    raw = await request.read()
    secret = request.app[CONFIG]["chat"]["webhook_secret"]
    if secret:
        signature, now = _check_signature(request, secret, raw)
    else:
        require_user(request)
    check_json_type(request, raw)
    body = parse_json(raw, json_depth(request)) if raw.strip() else None
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    data = load(InboundEventSchema(), body)
    ref = data["repository"]
    if secret:
        repo = await request.app[STORE].repos.by_name(ref["owner"], ref["name"])
        if repo is None or not _secret_may_post_to(request, repo):
            raise NotFound("repository not found")
        tolerance = request.app[CONFIG]["chat"]["webhook_tolerance_seconds"]
        digest = hashlib.sha256(signature.encode()).digest()
        # Kept twice the tolerance: a timestamp up to that far ahead is still accepted.
        if not await request.app[STORE].outbox.first_sighting(digest, now, now - 2 * tolerance):
            raise Conflict("this signed request was already accepted (a replay)")
    else:
        repo = await load_repo(request, "write", owner=ref["owner"], name=ref["name"])
    event = await publish(
        request, repo, data["type"], data["data"], actor=current_user(request), inbound=True
    )
    return json_response({"accepted": True, "id": event.id}, status=202)


async def _send_test(request: web.Request) -> web.Response:
    require_admin(request)
    sender = request.app[WEBHOOK]
    if not sender.enabled:
        raise Unavailable("no chat webhook is configured")
    body = json.dumps(ping_message(request.app[CONFIG].base_url)).encode()
    status, error, _ = await sender.post(body, {"X-Hubsvc-Event": "ping"})
    ok = status is not None and 200 <= status < 300
    return json_response(
        {"success": ok, "status": status, "error": None if ok else (error or f"HTTP {status}")}
    )


@routes.get("/api/webhooks/chat/test")
@doc(
    "Send a real test message to the chat webhook (administrators)",
    responses={200: WebhookTestSchema},
    errors=(403, 503),
    tag="webhooks",
)
@requires("admin")
async def webhook_test(request: web.Request) -> web.Response:
    return await _send_test(request)


@routes.get("/api/chat/link/test")
@doc(
    "Send a real test message to the chat webhook (administrators; the chat bot's check)",
    responses={200: WebhookTestSchema},
    errors=(403, 503),
    tag="chat",
)
@requires("admin")
async def chat_link_test(request: web.Request) -> web.Response:
    return await _send_test(request)


def _delivery(row: dict) -> dict:
    return {
        "id": str(row["id"]),
        "guid": row["guid"],
        "eventId": row["event_id"],
        "eventType": row["event_type"],
        "status": row["status"],
        "attempts": row["attempts"],
        "lastStatus": row["last_status"],
        "lastError": row["last_error"],
        "nextAttemptAt": iso(row["next_attempt_at"]) if row["status"] == "pending" else None,
        "createdAt": row["created_at"],
        "deliveredAt": row["delivered_at"],
        "redeliveryOf": str(row["redelivery_of"]) if row["redelivery_of"] else None,
        "payload": json.loads(row["payload"]),
        "attemptList": [
            {
                "at": a["at"],
                "statusCode": a["status_code"],
                "error": a["error"],
                "durationMs": a["duration_ms"],
            }
            for a in row.get("attempt_list", [])
        ],
    }


@routes.get("/api/webhooks/chat/deliveries")
@doc(
    "Recent chat webhook deliveries with their attempts (administrators)",
    query=PageQuerySchema,
    responses={200: DeliveryListSchema},
    errors=(403,),
    tag="webhooks",
)
@requires("admin")
async def deliveries(request: web.Request) -> web.Response:
    require_admin(request)
    page = read_query(request, shared(PageQuerySchema))
    rows, more = await request.app[STORE].outbox.recent(page["limit"], page["offset"])
    return json_response({"deliveries": [_delivery(r) for r in rows], "hasMore": more})


@routes.post("/api/webhooks/chat/deliveries/{id}/redeliver")
@doc(
    "Queue a delivery's body again as a new delivery (administrators)",
    responses={202: DeliveryEnvelopeSchema},
    errors=(403, 404, 503),
    tag="webhooks",
)
@requires("admin")
async def redeliver(request: web.Request) -> web.Response:
    require_admin(request)
    raw = request.match_info["id"]
    original = (
        await request.app[STORE].outbox.get(int(raw)) if raw.isdigit() and len(raw) < 19 else None
    )
    if original is None:
        raise NotFound("delivery not found")
    sender = request.app[WEBHOOK]
    if not sender.enabled:
        raise Unavailable("no chat webhook is configured")
    row = await request.app[STORE].outbox.enqueue(
        event_id=original["event_id"],
        event_type=original["event_type"],
        repo_id=original["repo_id"],
        payload=original["payload"],
        redelivery_of=original["id"],
    )
    sender.wake()
    return json_response({"delivery": _delivery(row)}, status=202)


@routes.get("/api/admin/deliveries")
@doc(
    "Outgoing e-mail deliveries, newest first, with failures (administrators)",
    query=PageQuerySchema,
    responses={200: MailDeliveryListSchema},
    errors=(401, 403),
    tag="webhooks",
    description=(
        "E-mail (the chat link verification) is queued and tried at once, then retried "
        "after 2, 4, 8… s (webhooks.retry_seconds, up to webhooks.max_retry_seconds) until "
        "mail.max_attempts; an SMTP 5xx answer is final. Each row shows its status, "
        "attempts and last error; the message itself is never shown. Repository hooks' "
        "deliveries are under /api/repositories/:owner/:name/hooks/:id/deliveries."
    ),
)
@requires("admin")
async def mail_deliveries(request: web.Request) -> web.Response:
    require_admin(request)
    page = read_query(request, shared(PageQuerySchema))
    rows, more = await request.app[STORE].mail.recent(page["limit"], page["offset"])
    return json_response(
        {
            "deliveries": [
                {
                    "id": str(r["id"]),
                    "kind": "mail",
                    "to": r["recipient"],
                    "subject": r["subject"],
                    "status": r["status"],
                    "attempts": r["attempts"],
                    "error": r["last_error"],
                    "nextAttemptAt": iso(r["next_attempt_at"])
                    if r["status"] == "pending"
                    else None,
                    "createdAt": r["created_at"],
                    "deliveredAt": r["delivered_at"],
                }
                for r in rows
            ],
            "hasMore": more,
        }
    )
