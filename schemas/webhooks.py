"""The inbound chat webhook and the outbox deliveries."""

from __future__ import annotations

from marshmallow import fields, validate

from hubsvc.events import EVENT_TYPES

from .common import Base, RepoRefSchema



class InboundEventSchema(Base):
    type = fields.String(required=True, validate=validate.OneOf(EVENT_TYPES))
    repository = fields.Nested(RepoRefSchema, required=True)
    data = fields.Dict(required=True, metadata={
        "description": "the event's data; the action (opened, closed, …) is data.action"})


class AcceptedSchema(Base):
    accepted = fields.Boolean(required=True)
    id = fields.String(required=True, metadata={"description": "the event id"})


class AttemptSchema(Base):
    at = fields.String(required=True)
    statusCode = fields.Integer(allow_none=True, required=True)
    error = fields.String(allow_none=True, required=True)
    durationMs = fields.Integer(required=True)


class DeliverySchema(Base):
    id = fields.String(required=True)
    guid = fields.String(required=True, metadata={"description": "sent as X-Hubsvc-Delivery"})
    eventId = fields.String(required=True)
    eventType = fields.String(required=True)
    status = fields.String(required=True, validate=validate.OneOf(["pending", "delivered", "failed"]))
    attempts = fields.Integer(required=True)
    lastStatus = fields.Integer(allow_none=True, required=True)
    lastError = fields.String(allow_none=True, required=True)
    nextAttemptAt = fields.String(allow_none=True, required=True)
    createdAt = fields.String(required=True)
    deliveredAt = fields.String(allow_none=True, required=True)
    redeliveryOf = fields.String(allow_none=True, required=True)
    payload = fields.Dict(required=True)
    attemptList = fields.List(fields.Nested(AttemptSchema), required=True)


class DeliveryListSchema(Base):
    deliveries = fields.List(fields.Nested(DeliverySchema), required=True)
    hasMore = fields.Boolean(required=True)


class DeliveryEnvelopeSchema(Base):
    delivery = fields.Nested(DeliverySchema, required=True)


class WebhookTestSchema(Base):
    success = fields.Boolean(required=True)
    status = fields.Integer(allow_none=True, required=True, metadata={
        "description": "the receiver's HTTP status, null when it could not be reached"})
    error = fields.String(allow_none=True)
