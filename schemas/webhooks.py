"""The inbound chat webhook and the outbox deliveries."""

from __future__ import annotations

from marshmallow import INCLUDE, Schema, ValidationError, fields, post_load, validate

from hubsvc.events.shape import EVENT_TYPES

from .common import Base, Bool, Dict, Int, List, Nested, RepoRefSchema, Str

# The data of an inbound event is checked, per type, for every field the chat message
# and the WebSocket clients read, before the 202: a missing issue number or a string
# where an object belongs used to be accepted and then fail in the background ("#None").
# Fields beyond these pass through unchanged, as the service's own events carry more.


class _Open(Schema):
    class Meta:
        unknown = INCLUDE


class _Person(_Open):
    username = fields.String(required=True, validate=validate.Length(min=1, max=100))


class _Comment(_Open):
    body = fields.String(required=True, validate=validate.Length(max=65536))


class _Issue(_Open):
    number = fields.Integer(required=True, strict=True, validate=validate.Range(min=1))
    title = fields.String(required=True, validate=validate.Length(min=1, max=1024))
    state = fields.String(required=True, validate=validate.OneOf(["open", "closed"]))
    body = fields.String(allow_none=True)
    url = fields.String(allow_none=True)
    author = fields.Nested(_Person, allow_none=True)
    labels = fields.List(fields.String())
    assignees = fields.List(fields.Nested(_Person))


class _Pull(_Issue):
    state = fields.String(required=True, validate=validate.OneOf(["open", "closed", "merged"]))
    merged = fields.Boolean()
    head = fields.String()
    base = fields.String()
    headRepository = fields.Nested(RepoRefSchema, allow_none=True)


class IssueDataSchema(_Open):
    action = fields.String(
        required=True,
        validate=validate.OneOf(
            [
                "opened",
                "closed",
                "reopened",
                "edited",
                "commented",
                "comment_edited",
                "comment_deleted",
            ]
        ),
    )
    issue = fields.Nested(_Issue, required=True)
    comment = fields.Nested(_Comment)


class PullDataSchema(_Open):
    action = fields.String(
        required=True,
        validate=validate.OneOf(
            [
                "opened",
                "closed",
                "reopened",
                "edited",
                "merged",
                "commented",
                "comment_edited",
                "comment_deleted",
            ]
        ),
    )
    pullRequest = fields.Nested(_Pull, required=True)
    comment = fields.Nested(_Comment)


class _CommitAuthor(_Open):
    name = fields.String(allow_none=True)


class _Commit(_Open):
    oid = fields.String(required=True, validate=validate.Regexp(r"^[0-9a-f]{4,64}$"))
    message = fields.String(allow_none=True)
    author = fields.Nested(_CommitAuthor, allow_none=True)


class PushDataSchema(_Open):
    ref = fields.String(required=True, validate=validate.Length(min=1, max=1024))
    before = fields.String(allow_none=True)
    after = fields.String(allow_none=True)
    commits = fields.List(fields.Nested(_Commit), required=True)
    totalCommits = fields.Integer(strict=True, validate=validate.Range(min=0))


class StarDataSchema(_Open):
    action = fields.String(required=True, validate=validate.OneOf(["added", "removed"]))
    starCount = fields.Integer(strict=True, validate=validate.Range(min=0))


class _Forkee(_Open):
    fullName = fields.String(required=True, validate=validate.Length(min=1, max=200))
    url = fields.String(allow_none=True)


class ForkDataSchema(_Open):
    forkee = fields.Nested(_Forkee, required=True)
    forker = fields.Nested(_Person, allow_none=True)


INBOUND_DATA = {
    "issue": IssueDataSchema,
    "pull_request": PullDataSchema,
    "push": PushDataSchema,
    "star": StarDataSchema,
    "fork": ForkDataSchema,
}


class InboundEventSchema(Base):
    # What CI reports goes through POST …/statuses/:sha, not through this door.
    type = Str(
        required=True, validate=validate.OneOf([t for t in EVENT_TYPES if t in INBOUND_DATA])
    )
    repository = Nested(RepoRefSchema, required=True)
    data = Dict(
        required=True,
        metadata={
            "description": "the event's data, checked by type before the 202: issue {action, "
            "issue {number, title, state, …}}; pull_request {action, pullRequest {number, title, "
            "state, …}}; push {ref, commits [{oid, message, author {name}}], totalCommits}; "
            "star {action added|removed}; fork {forkee {fullName, url}, forker}. Other fields "
            "pass through."
        },
    )

    @post_load
    def _typed(self, item: dict, **_: object) -> dict:
        try:
            item["data"] = INBOUND_DATA[item["type"]]().load(item["data"])
        except ValidationError as exc:
            raise ValidationError({"data": exc.messages}) from None
        return item


class AcceptedSchema(Base):
    accepted = Bool(required=True)
    id = Str(required=True, metadata={"description": "the event id"})


class AttemptSchema(Base):
    at = Str(required=True)
    statusCode = Int(allow_none=True, required=True)
    error = Str(allow_none=True, required=True)
    durationMs = Int(required=True)


class DeliverySchema(Base):
    id = Str(required=True)
    guid = Str(required=True, metadata={"description": "sent as X-Hubsvc-Delivery"})
    eventId = Str(required=True)
    eventType = Str(required=True)
    status = Str(required=True, validate=validate.OneOf(["pending", "delivered", "failed"]))
    attempts = Int(required=True)
    lastStatus = Int(allow_none=True, required=True)
    lastError = Str(allow_none=True, required=True)
    nextAttemptAt = Str(allow_none=True, required=True)
    createdAt = Str(required=True)
    deliveredAt = Str(allow_none=True, required=True)
    redeliveryOf = Str(allow_none=True, required=True)
    payload = Dict(required=True)
    attemptList = List(Nested(AttemptSchema), required=True)


class DeliveryListSchema(Base):
    deliveries = List(Nested(DeliverySchema), required=True)
    hasMore = Bool(required=True)


class DeliveryEnvelopeSchema(Base):
    delivery = Nested(DeliverySchema, required=True)


class WebhookTestSchema(Base):
    success = Bool(required=True)
    status = Int(
        allow_none=True,
        required=True,
        metadata={"description": "the receiver's HTTP status, null when it could not be reached"},
    )
    error = Str(allow_none=True)
