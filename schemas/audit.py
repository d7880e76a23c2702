"""Sessions and the security log."""

from __future__ import annotations

from marshmallow import fields, validate

from .common import Base, Bool, List, Nested, Str


class SessionSchema(Base):
    id = Str(required=True)
    createdAt = Str(required=True)
    lastSeenAt = Str(
        required=True, allow_none=True, metadata={"description": "updated at most once a minute"}
    )
    ip = Str(required=True, allow_none=True, metadata={"description": "where it signed in from"})
    userAgent = Str(required=True, allow_none=True)
    current = Bool(required=True, metadata={"description": "the session of this request"})


class SessionListSchema(Base):
    sessions = List(Nested(SessionSchema), required=True)


class NamedSchema(Base):
    id = Str(required=True)
    name = Str(required=True)


class AuditEntrySchema(Base):
    id = Str(required=True)
    createdAt = Str(required=True)
    action = Str(required=True)
    actor = Nested(NamedSchema, required=True, allow_none=True)
    user = Nested(NamedSchema, required=True, allow_none=True)
    owner = Nested(NamedSchema, required=True, allow_none=True)
    repository = Nested(NamedSchema, required=True, allow_none=True)
    ip = Str(required=True, allow_none=True)
    userAgent = Str(required=True, allow_none=True)
    data = fields.Dict(required=True)


class AuditListSchema(Base):
    entries = List(Nested(AuditEntrySchema), required=True)
    hasMore = Bool(required=True)
    nextBefore = Str(
        required=True,
        allow_none=True,
        metadata={"description": "pass as before= for the next (older) page; null: none"},
    )


class AuditQuerySchema(Base):
    # A query string is text: marshmallow's own fields convert it.
    limit = fields.Integer(load_default=30, validate=validate.Range(1, 100))
    before = fields.Integer(
        load_default=None,
        validate=validate.Range(1, 2**62),
        metadata={"description": "only entries older than this id (the cursor)"},
    )
    action = fields.String(load_default=None, validate=validate.Length(1, 100))
    actor = fields.String(
        load_default=None, validate=validate.Length(1, 100), metadata={"description": "a username"}
    )
