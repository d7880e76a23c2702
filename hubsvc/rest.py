"""Request parsing and JSON answers shared by every handler."""

from __future__ import annotations

import json
from typing import Any

import orjson
from aiohttp import web
from marshmallow import Schema, ValidationError

from .errors import BadRequest, validation_message


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None
                  ) -> web.Response:
    """A JSON answer."""
    return web.Response(body=orjson.dumps(data), status=status,
                        content_type="application/json", headers=headers)


async def read_json(request: web.Request, schema: Schema | None = None) -> dict[str, Any]:
    """The JSON object body, loaded through schema; malformed or wrong types → 400."""
    raw = await request.read()  # bounded by client_max_size: larger bodies are 413
    if not raw.strip():
        data: Any = {}
    else:
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise BadRequest("malformed JSON body") from None
    if not isinstance(data, dict):
        raise BadRequest("the body must be a JSON object")
    return load(schema, data) if schema is not None else data


def load(schema: Schema, data: Any, *, partial: bool = False) -> dict[str, Any]:
    """Load data through schema, turning errors into one 400 naming the field."""
    try:
        return schema.load(data, partial=partial)
    except ValidationError as exc:
        raise BadRequest(validation_message(exc.messages)) from None


def read_query(request: web.Request, schema: Schema) -> dict[str, Any]:
    """The query string loaded through schema (last value wins for repeated keys)."""
    return load(schema, {key: request.query.getone(key) for key in request.query.keys()})
