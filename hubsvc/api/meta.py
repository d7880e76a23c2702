"""Health and the OpenAPI document."""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from typing import Any

import orjson
from aiohttp import web
from marshmallow import fields

from schemas.common import Base

from .. import __version__
from ..keys import CLUSTER, CONFIG, STATE, STORE
from ..policy import requires
from ..web.errors import fault_counts
from ..web.openapi import build_spec, doc
from ..web.rest import json_response

log = logging.getLogger("hubsvc.health")
routes = web.RouteTableDef()


class DiskSchema(Base):
    freeBytes = fields.Integer(required=True)
    totalBytes = fields.Integer(required=True)
    minFreeBytes = fields.Integer(
        required=True, metadata={"description": "server.min_free_mb in bytes"}
    )
    low = fields.Boolean(required=True, metadata={"description": "freeBytes < minFreeBytes"})


class FaultsSchema(Base):
    diskFull = fields.Integer(required=True, metadata={"description": "507 answers since start"})
    databaseBusy = fields.Integer(
        required=True, metadata={"description": "503 'the database is busy' answers since start"}
    )
    clientClosed = fields.Integer(
        required=True,
        metadata={"description": "requests whose client hung up mid-way (logged as 499)"},
    )


class HealthSchema(Base):
    status = fields.String(required=True, metadata={"enum": ["ok", "degraded", "unavailable"]})
    version = fields.String(required=True)
    database = fields.String(
        required=True, metadata={"enum": ["ok", "busy", "full", "error", "unavailable"]}
    )
    redis = fields.String(
        metadata={
            "enum": ["ok", "unavailable"],
            "description": "the link to Redis; only with [redis] url",
        }
    )
    disk = fields.Nested(DiskSchema, required=True)
    faults = fields.Nested(FaultsSchema, required=True)
    warnings = fields.List(fields.String(), required=True)


DISK_SECONDS = 1.0  # free space read at most this often: a poller hammering /health
# must not cost a thread hop per request


async def _disk_usage(app: web.Application) -> Any:
    """shutil.disk_usage of the data folder, read off the loop and kept for DISK_SECONDS."""
    cached = app[STATE].get("disk_usage")
    now = time.monotonic()
    if cached is None or now - cached[1] >= DISK_SECONDS:
        cached = (await asyncio.to_thread(shutil.disk_usage, app[CONFIG].data_dir), now)
        app[STATE]["disk_usage"] = cached
    return cached[0]


@routes.get("/health")
@doc(
    "Liveness, and whether a write can succeed",
    public=True,
    tag="health",
    responses={200: HealthSchema, 503: HealthSchema},
    description="`database` comes from a one-row write probe (at most every 5 s) and the "
    "last write's outcome: `ok`, `busy` (a write waited database.write_timeout_ms "
    "for the lock and gave up), `full` (the disk is full), `error`, or "
    "`unavailable` (shutting down, or the database does not answer). Anything "
    "but `ok` answers 503 with `status` `degraded` (`unavailable` while "
    "shutting down). `redis` (with [redis] url) is `unavailable` while Redis does not "
    "answer: `status` is `degraded` but the answer stays 200, since the process still "
    "serves (limits per process, events from the log's head every 5 s). "
    "`disk` is the free space under the data folder; below "
    "server.min_free_mb it is `low` and a warning, still 200 while writes work. "
    "`faults` counts the 507 and busy-503 answers and the clients that hung up.",
)
@requires("public")
async def health(request: web.Request) -> web.Response:
    app = request.app
    state = app[STATE]
    db = app[STORE].db
    if state.get("shutting_down") or not await db.ping():
        database = "unavailable"
    else:
        database = await db.write_state()
    usage = await _disk_usage(app)
    cluster = app.get(CLUSTER)
    counts = fault_counts(app)
    # Everything the answer says, read afresh each time; the body is built again only
    # when one of them changed (a monitor polling thousands of times a second mostly
    # asks the same). Redis away is never kept: its warning counts the seconds.
    said = (
        database,
        usage,
        None if cluster is None else cluster.up,
        counts["full"],
        counts["busy"],
        counts["disconnect"],
    )
    kept = state.get("health_answer")
    if kept is None or kept[0] != said or not (cluster is None or cluster.up):
        kept = (said, *_health_body(app, database, usage, cluster, counts))
        state["health_answer"] = kept
    # Redis away alone is 200: every process says so at once, and a load balancer that
    # took them all out of service would turn a degraded service into none.
    return web.Response(body=kept[1], status=kept[2], content_type="application/json")


def _health_body(
    app: web.Application, database: str, usage: Any, cluster: Any, counts: Any
) -> tuple[bytes, int]:
    """/health's JSON body and status; logs when the disk goes low or comes back."""
    state = app[STATE]
    min_free = app[CONFIG]["server"]["min_free_mb"] << 20
    low = usage.free < min_free
    warnings = []
    if low:
        warnings.append(
            f"free space under the data folder is {usage.free >> 20} MB, below "
            f"server.min_free_mb ({min_free >> 20} MB)"
        )
    if low != state.get("disk_low", False):
        state["disk_low"] = low
        if low:
            log.warning("disk low: %s", warnings[0])
        else:
            log.info("disk space under the data folder is back above server.min_free_mb")
    redis_up = cluster is None or cluster.up
    if not redis_up:
        warnings.append(
            f"Redis has not answered for {time.time() - (cluster.down_since or time.time()):.0f} s: "
            "rate limits are per process, events from other processes arrive within 5 s, "
            "and messages to them are queued"
        )
    status = (
        ("ok" if redis_up else "degraded")
        if database == "ok"
        else ("unavailable" if database == "unavailable" else "degraded")
    )
    body = {
        "status": status,
        "version": __version__,
        "database": database,
        "disk": {
            "freeBytes": usage.free,
            "totalBytes": usage.total,
            "minFreeBytes": min_free,
            "low": low,
        },
        **({} if cluster is None else {"redis": "ok" if redis_up else "unavailable"}),
        "faults": {
            "diskFull": counts["full"],
            "databaseBusy": counts["busy"],
            "clientClosed": counts["disconnect"],
        },
        "warnings": warnings,
    }
    return orjson.dumps(body), 200 if database == "ok" else 503


class HostKeysSchema(Base):
    SHA256_ED25519 = fields.String(metadata={"description": "base64, as ssh-keygen -l prints"})
    SHA256_RSA = fields.String(metadata={"description": "base64, as ssh-keygen -l prints"})


class MetaSchema(Base):
    sshHostKeyFingerprints = fields.Nested(
        HostKeysSchema,
        required=True,
        metadata={"description": "the SSH server's host keys (empty with [ssh] port 0)"},
    )
    openSignUp = fields.Boolean(
        required=True,
        metadata={"description": "whether POST /auth/sign-up is open ([auth] open_signup)"},
    )


@routes.get("/api/meta")
@doc(
    "What a client checks before trusting this server (GitHub's /meta)",
    public=True,
    tag="meta",
    responses={200: MetaSchema},
    description="`sshHostKeyFingerprints`: the SHA256 fingerprints of the SSH host keys, "
    "to compare with what ssh prints on the first connection (`ssh-keygen -lf`); "
    "`openSignUp`: whether anyone may make an account (the dashboard shows its form).",
)
@requires("public")
async def meta(request: web.Request) -> web.Response:
    fingerprints = request.app[STATE].get("ssh_fingerprints", {})
    return json_response(
        {
            "sshHostKeyFingerprints": fingerprints,
            "openSignUp": bool(request.app[CONFIG]["auth"]["open_signup"]),
        }
    )


@routes.get("/api/openapi.json")
@doc(
    "This OpenAPI document",
    public=True,
    tag="meta",
    responses={
        200: {
            "description": "OpenAPI 3 document",
            "content": {"application/json": {"schema": {"type": "object"}}},
        }
    },
)
@requires("public")
async def openapi(request: web.Request) -> web.Response:
    state = request.app[STATE]
    if "openapi" not in state:
        state["openapi"] = build_spec(request.app)
    return json_response(state["openapi"])
