"""The inbound chat webhook and the outbox deliveries."""

from __future__ import annotations

from marshmallow import validate

from hubsvc.events import EVENT_TYPES

from .common import Base, Bool, Dict, Int, List, Nested, RepoRefSchema, Str



class InboundEventSchema(Base):
    type = Str(required=True, validate=validate.OneOf(EVENT_TYPES))
    repository = Nested(RepoRefSchema, required=True)
    data = Dict(required=True, metadata={
        "description": "the event's data; the action (opened, closed, …) is data.action"})


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
    status = Int(allow_none=True, required=True, metadata={
        "description": "the receiver's HTTP status, null when it could not be reached"})
    error = Str(allow_none=True)
