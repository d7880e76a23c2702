"""The event feed and the WebSocket's query."""

from __future__ import annotations

from marshmallow import fields, validate

from hubsvc.events.shape import EVENT_TYPES

from .common import Base, Bool, Dict, List, Nested, RepoRefSchema, Str, UserSummarySchema

_CURSOR = fields.String(
    validate=validate.Regexp(r"^[0-9]{1,18}$", error="must be an event id"),
    metadata={"description": "an event id: only events after it"},
)


class FeedQuerySchema(Base):
    after = _CURSOR
    before = fields.String(
        validate=validate.Regexp(r"^[0-9]{1,18}$", error="must be an event id"),
        metadata={
            "description": "an event id: only events before it, newest first (paging back "
            "from the newest, as GitHub's feeds do); with after too, only those between"
        },
    )
    limit = fields.Integer(load_default=30, validate=validate.Range(1, 100))


class WsQuerySchema(Base):
    token = fields.String(
        validate=validate.Length(max=200), metadata={"description": "a token, if no cookie is sent"}
    )
    after = _CURSOR
    subscribe = fields.String(
        validate=validate.OneOf(["all"]),
        metadata={
            "description": "all: follow every repository the user may read, new ones too "
            "(as the message subscribe {all: true}, but before the ?after= replay)"
        },
    )


class EventSchema(Base):
    id = Str(required=True, metadata={"description": "the log id: increasing in commit order"})
    type = Str(
        required=True,
        metadata={"enum": list(EVENT_TYPES)},
    )
    repository = Nested(RepoRefSchema, required=True)
    actor = Nested(UserSummarySchema, required=True, allow_none=True)
    data = Dict(
        required=True,
        metadata={"description": "what happened; data.action names it (absent for push and fork)"},
    )
    createdAt = Str(required=True)
    public = Bool(
        required=True,
        metadata={
            "description": "whether the repository was public when it happened (GitHub's "
            "`public`): events of a private period are shown only to its owner "
            "and to collaborators granted before the event, even once it is public"
        },
    )
    inbound = Bool(
        required=True,
        metadata={
            "description": "posted to /api/webhooks/chat rather than made by the server: "
            "chat messages say so, and it never sends e-mail or chat notices"
        },
    )


class EventFeedSchema(Base):
    events = List(Nested(EventSchema), required=True)
    hasMore = Bool(required=True)
    lastEventId = Str(
        required=True,
        metadata={
            "description": "the cursor to pass as after= next time (the last event returned, or "
            "the cursor given when there was none)"
        },
    )
