"""Request parsing and JSON answers shared by every handler."""

from __future__ import annotations

import functools
import json
from typing import Any, TypeVar

import orjson
from aiohttp import web
from marshmallow import Schema, ValidationError

from ..errors import ApiError, BadRequest, validation_message
from ..keys import CONFIG

# A body nested deeper than this is refused before anything walks it: json's decoder
# recurses once per level, and 100,000 '[' exhausted the stack (500, closed sockets).
DEFAULT_JSON_DEPTH = 64
SchemaT = TypeVar("SchemaT", bound=Schema)


def json_response(
    data: Any, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    """A JSON answer."""
    return web.Response(
        body=orjson.dumps(data), status=status, content_type="application/json", headers=headers
    )


def is_json_type(media_type: str) -> bool:
    """application/json or application/<anything>+json (parameters such as charset aside)."""
    media_type = media_type.split(";", 1)[0].strip().lower()
    return media_type == "application/json" or (
        media_type.startswith("application/") and media_type.endswith("+json")
    )


def check_json_type(request: web.Request, raw: bytes) -> None:
    """415 unless a body comes as JSON.

    A page of another site can post text/plain, form types or no type at all without a
    CORS preflight; application/json cannot be sent cross-site without one.
    """
    if raw.strip() and not is_json_type(request.headers.get("Content-Type", "")):
        raise ApiError("Content-Type must be application/json", 415)


def too_deep(data: Any, limit: int) -> bool:
    """Whether arrays and objects nest more than limit levels (the top one is level 1)."""
    stack = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        children = (
            node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        )
        if children and depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def parse_json(raw: bytes | str, max_depth: int = DEFAULT_JSON_DEPTH) -> Any:
    """JSON text as data; malformed, or nested deeper than max_depth → 400."""
    # Fewer brackets than the limit cannot nest past it: most bodies skip the walk.
    if isinstance(raw, bytes):
        deep_possible = raw.count(b"[") + raw.count(b"{") > max_depth
    else:
        deep_possible = raw.count("[") + raw.count("{") > max_depth
    try:
        data = json.loads(raw)
    except RecursionError:
        raise BadRequest(f"JSON nested deeper than {max_depth} levels") from None
    except (ValueError, UnicodeDecodeError):
        raise BadRequest("malformed JSON body") from None
    if deep_possible and too_deep(data, max_depth):
        raise BadRequest(f"JSON nested deeper than {max_depth} levels")
    return data


def json_depth(request: web.Request) -> int:
    """The configured limits.json_depth."""
    return request.app[CONFIG]["limits"]["json_depth"]


async def read_json(request: web.Request, schema: Schema | None = None) -> dict[str, Any]:
    """The JSON object body, loaded through schema; malformed or wrong types → 400, not JSON → 415."""
    raw = await request.read()  # bounded by client_max_size: larger bodies are 413
    check_json_type(request, raw)
    data = parse_json(raw, json_depth(request)) if raw.strip() else {}
    if not isinstance(data, dict):
        raise BadRequest("the body must be a JSON object")
    return load(schema, data) if schema is not None else data


def load(schema: Schema, data: Any, *, partial: bool = False) -> dict[str, Any]:
    """Load data through schema, turning errors into one 400 naming the field."""
    try:
        return schema.load(data, partial=partial)
    except ValidationError as exc:
        raise BadRequest(validation_message(exc.messages)) from None


@functools.cache
def shared(schema: type[SchemaT], only: tuple[str, ...] | None = None) -> SchemaT:
    """One instance of a schema class for every request: building one deep-copies each of
    its fields, which cost a list request more than its query (py-spy). A schema keeps
    no state between loads."""
    made = schema(only=only) if only is not None else schema()
    _SHARED_IDS.add(id(made))
    return made


_SHARED_IDS: set[int] = set()


# A loaded query is a function of the schema and the query string (the query schemas'
# hooks parse and normalise, nothing else), and marshmallow's load was a tenth of a file
# read's time on the event loop (py-spy). Answers of plain values only are kept, each
# handed out as a fresh dict; a failed load is never kept.
_QUERIES: dict[tuple[int, str], dict[str, Any]] = {}
_QUERIES_MOST = 4096
_QUERY_LONGEST = 512  # characters: 4,096 kept queries of the server's 64 KiB line would be 256 MiB
_PLAIN = (str, int, float, bool, type(None))


def read_query(request: web.Request, schema: Schema) -> dict[str, Any]:
    """The query string loaded through schema (last value wins for repeated keys)."""
    # The raw string: the decoded one reads `%252B` and `%2B` alike, and the first asker's
    # answer would be kept for the other.
    raw = request.rel_url.raw_query_string
    key = (id(schema), raw)
    kept = _QUERIES.get(key)
    if kept is not None:
        return dict(kept)
    data = load(schema, {name: request.query.getone(name) for name in request.query})
    # Only the shared() instances live as long as the process, so only their ids are
    # sure to name one schema for good.
    if (
        len(raw) <= _QUERY_LONGEST
        and shared_instance(schema)
        and all(type(v) in _PLAIN for v in data.values())
    ):
        if len(_QUERIES) >= _QUERIES_MOST:
            del _QUERIES[next(iter(_QUERIES))]  # the oldest: insertion order
        _QUERIES[key] = dict(data)
    return data


def shared_instance(schema: Schema) -> bool:
    """Whether schema is one of shared()'s instances (kept for the process's life)."""
    return id(schema) in _SHARED_IDS
