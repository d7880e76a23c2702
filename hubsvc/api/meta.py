"""Health and the OpenAPI document."""

from __future__ import annotations

from aiohttp import web
from marshmallow import fields

from schemas.common import Base

from .. import __version__
from ..keys import STATE, STORE
from ..openapi import build_spec, doc
from ..rest import json_response

routes = web.RouteTableDef()


class HealthSchema(Base):
    status = fields.String(required=True, metadata={"enum": ["ok", "unavailable"]})
    version = fields.String(required=True)
    database = fields.String(required=True)


@routes.get("/health")
@doc("Liveness and database check; 503 while shutting down", public=True, tag="health",
     responses={200: HealthSchema, 503: HealthSchema})
async def health(request: web.Request) -> web.Response:
    state = request.app[STATE]
    database = "ok" if not state.get("shutting_down") and await request.app[STORE].db.ping() \
        else "unavailable"
    ok = database == "ok" and not state.get("shutting_down")
    body = {"status": "ok" if ok else "unavailable", "version": __version__, "database": database}
    return json_response(body, status=200 if ok else 503)


@routes.get("/api/openapi.json")
@doc("This OpenAPI document", public=True, tag="meta",
     responses={200: {"description": "OpenAPI 3 document",
                      "content": {"application/json": {"schema": {"type": "object"}}}}})
async def openapi(request: web.Request) -> web.Response:
    state = request.app[STATE]
    if "openapi" not in state:
        state["openapi"] = build_spec(request.app)
    return json_response(state["openapi"])
