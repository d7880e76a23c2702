"""The notifications inbox: threads, their subscriptions, and the list's filters."""

from __future__ import annotations

from marshmallow import ValidationError, fields, post_load, validate

from .common import Base, Bool, Int, List, Nested, Offset, RepoRefSchema, Str
from .issues import _since

REASONS = [
    "assign",
    "author",
    "comment",
    "mention",
    "review_requested",
    "state_change",
    "team_mention",
    "subscribed",
]
_TIME = "ISO 8601 time, e.g. 2024-05-01T12:00:00Z"


class _Times(Base):
    @post_load
    def _times(self, data, **_):
        for key in ("since", "before", "lastReadAt"):
            if data.get(key) is not None:
                try:
                    data[key] = _since(data[key])
                except ValidationError as exc:
                    raise ValidationError(exc.messages, key) from None
        return data


class RepoNotificationQuerySchema(_Times):
    all = fields.Boolean(
        load_default=False,
        metadata={"description": "true: read threads too (default: unread only)"},
    )
    participating = fields.Boolean(
        load_default=False,
        metadata={
            "description": "true: only threads the caller takes part in or is named in "
            "(every reason but `subscribed`)"
        },
    )
    since = fields.String(metadata={"description": _TIME + ": only threads updated at or after"})
    before = fields.String(metadata={"description": _TIME + ": only threads updated before"})
    limit = fields.Integer(load_default=30, validate=validate.Range(1, 100))
    offset = Offset()


class NotificationQuerySchema(RepoNotificationQuerySchema):
    repository = fields.String(
        validate=validate.Regexp(r"^[^/]{1,100}/[^/]{1,100}$", error="must be owner/name"),
        metadata={"description": "owner/name: only that repository's threads"},
    )


class SubjectSchema(Base):
    title = Str(required=True)
    type = Str(required=True, validate=validate.OneOf(["Issue", "PullRequest"]))
    number = Int(required=True)
    state = Str(required=True)
    url = Str(required=True, metadata={"format": "uri"})
    latestCommentUrl = Str(
        required=True,
        metadata={"format": "uri", "description": "the latest comment, or the item itself"},
    )


class NotificationSchema(Base):
    id = Str(required=True)
    unread = Bool(required=True)
    reason = Str(required=True, validate=validate.OneOf(REASONS))
    updatedAt = Str(required=True)
    lastReadAt = Str(required=True, allow_none=True)
    subject = Nested(SubjectSchema, required=True)
    repository = Nested(RepoRefSchema, required=True)
    url = Str(required=True, metadata={"format": "uri"})
    subscriptionUrl = Str(required=True, metadata={"format": "uri"})


class NotificationListSchema(Base):
    notifications = List(Nested(NotificationSchema), required=True)
    hasMore = Bool(required=True)
    unreadCount = Int(required=True, metadata={"description": "unread threads in all"})


class NotificationEnvelopeSchema(Base):
    notification = Nested(NotificationSchema, required=True)


class MarkReadSchema(_Times):
    lastReadAt = Str(
        metadata={"description": _TIME + ": threads updated up to it are read (default: now)"}
    )


class MarkedSchema(Base):
    marked = Int(required=True, metadata={"description": "threads marked read"})
    unreadCount = Int(required=True)


class SubscriptionUpdateSchema(Base):
    ignored = Bool(
        load_default=False,
        metadata={"description": "true: block every notification of the thread, mentions too"},
    )


class SubscriptionSchema(Base):
    subscribed = Bool(required=True)
    ignored = Bool(required=True)
    reason = Str(required=True, allow_none=True)
    createdAt = Str(required=True, allow_none=True)
    url = Str(required=True, metadata={"format": "uri"})
    threadUrl = Str(required=True, allow_none=True, metadata={"format": "uri"})


class SubscriptionEnvelopeSchema(Base):
    subscription = Nested(SubscriptionSchema, required=True)
