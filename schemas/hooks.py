"""Per-repository webhooks, their deliveries, and the e-mail deliveries of the admin list."""

from __future__ import annotations

from marshmallow import ValidationError, validate, validates

from hubsvc.events.shape import EVENT_TYPES
from hubsvc.notify.netcheck import split_url
from hubsvc.notify.render import FORMATS

from .common import Base, Bool, Int, List, Nested, Str

URL_MAX = 2048


class _HookFields(Base):
    url = Str(
        validate=validate.Length(min=1, max=URL_MAX),
        metadata={
            "description": "http:// or https://; a host resolving to a loopback, private, "
            "link-local, multicast, unspecified, reserved or site-local address, or to an IPv6 "
            "address embedding such an IPv4 one (IPv4-mapped or -compatible, 6to4, Teredo, "
            "NAT64), is refused (400) unless webhooks.allowed_hosts lists it"
        },
    )
    format = Str(
        validate=validate.OneOf(FORMATS),
        metadata={
            "description": "discord (the default), slack, or json (the event as the API shows it)"
        },
    )
    events = List(
        Str(validate=validate.OneOf(EVENT_TYPES)),
        validate=validate.Length(min=1),
        metadata={"description": "event types to deliver (default: all)"},
    )
    branches = Str(
        allow_none=True,
        validate=validate.Length(max=255),
        metadata={
            "description": "a glob (fnmatch: *, ?, [..]) a push's branch must match, e.g. "
            '"main" or "release/*"; null or "": every branch'
        },
    )
    secret = Str(
        allow_none=True,
        validate=validate.Length(max=255),
        load_only=True,
        metadata={
            "description": "write-only: signs each body as X-Hub-Signature-256: sha256=<hex "
            'HMAC-SHA256 of the body>; null or "" removes it'
        },
    )
    active = Bool(metadata={"description": "false: nothing is delivered (default true)"})

    @validates("url")
    def _url(self, value: str, **_: object) -> None:
        try:
            split_url(value)
        except ValueError as exc:
            raise ValidationError(str(exc)) from None


class HookCreateSchema(_HookFields):
    url = Str(
        required=True,
        validate=validate.Length(min=1, max=URL_MAX),
        metadata=_HookFields._declared_fields["url"].metadata,
    )


class HookUpdateSchema(_HookFields):
    """Every field optional; active: true re-activates a hook the server disabled."""


class HookEventSchema(Base):
    id = Str(
        allow_none=True, required=True, metadata={"description": "the event id; null for a ping"}
    )
    type = Str(required=True, metadata={"description": "an event type, or ping"})
    action = Str(allow_none=True, required=True)


class HookDeliverySchema(Base):
    id = Str(required=True)
    guid = Str(
        required=True,
        metadata={
            "description": "sent as X-Hubsvc-Delivery; the "
            "same for every attempt and redelivery of the event"
        },
    )
    event = Nested(HookEventSchema, required=True)
    status = Str(required=True, validate=validate.OneOf(["pending", "delivered", "failed"]))
    attempts = Int(required=True)
    statusCode = Int(
        allow_none=True,
        required=True,
        metadata={"description": "the receiver's HTTP status at the last attempt; null if none"},
    )
    durationMs = Int(allow_none=True, required=True)
    error = Str(allow_none=True, required=True)
    responseExcerpt = Str(
        allow_none=True,
        required=True,
        metadata={"description": "the first 1,000 characters of the receiver's answer"},
    )
    nextAttemptAt = Str(allow_none=True, required=True)
    createdAt = Str(required=True)
    deliveredAt = Str(allow_none=True, required=True)


class HookSchema(Base):
    id = Str(required=True)
    url = Str(required=True)
    format = Str(required=True)
    events = List(Str(), required=True)
    branches = Str(allow_none=True, required=True)
    active = Bool(required=True)
    disabledReason = Str(
        allow_none=True,
        required=True,
        metadata={
            "description": "why the server set the hook inactive (failing for "
            "webhooks.disable_after_hours); PATCH active: true clears it"
        },
    )
    hasSecret = Bool(required=True)
    createdAt = Str(required=True)
    lastDelivery = Nested(HookDeliverySchema, allow_none=True, required=True)


class HookEnvelopeSchema(Base):
    hook = Nested(HookSchema, required=True)


class HookListSchema(Base):
    hooks = List(Nested(HookSchema), required=True)
    hasMore = Bool(required=True)


class HookDeliveryListSchema(Base):
    deliveries = List(Nested(HookDeliverySchema), required=True)
    hasMore = Bool(required=True)


class HookDeliveryEnvelopeSchema(Base):
    delivery = Nested(HookDeliverySchema, required=True)


class MailDeliverySchema(Base):
    id = Str(required=True)
    kind = Str(required=True, metadata={"description": "mail"})
    to = Str(required=True)
    subject = Str(required=True)
    status = Str(required=True, validate=validate.OneOf(["pending", "delivered", "failed"]))
    attempts = Int(required=True)
    error = Str(allow_none=True, required=True)
    nextAttemptAt = Str(allow_none=True, required=True)
    createdAt = Str(required=True)
    deliveredAt = Str(allow_none=True, required=True)


class MailDeliveryListSchema(Base):
    deliveries = List(Nested(MailDeliverySchema), required=True)
    hasMore = Bool(required=True)
