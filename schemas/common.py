"""Shapes shared by every resource: errors, user summaries, pages."""

from __future__ import annotations

from marshmallow import EXCLUDE, Schema, fields, validate


class Base(Schema):
    """Unknown body fields are ignored, as the contract says."""

    class Meta:
        unknown = EXCLUDE


class ErrorSchema(Base):
    error = fields.String(required=True, metadata={"description": "a message a person understands"})
    retryAfter = fields.Integer(metadata={"description": "seconds to wait (429 only)"})


class UserSummarySchema(Base):
    id = fields.String(required=True)
    username = fields.String(required=True)
    name = fields.String(required=True)
    avatarUrl = fields.String(required=True, metadata={"format": "uri"})


class Offset(fields.Integer):
    """offset/skip: any integer >= 0; larger than any list, it is clamped to 2**31-1."""

    # No list is that long, and past it SQLite (64-bit) overflows and git (32-bit) wraps.
    LARGEST = 2**31 - 1

    def __init__(self, **kwargs) -> None:
        super().__init__(load_default=0, validate=validate.Range(min=0), **kwargs)

    def _deserialize(self, value, attr, data, **kwargs) -> int:
        return min(super()._deserialize(value, attr, data, **kwargs), self.LARGEST)


class PageQuerySchema(Base):
    limit = fields.Integer(load_default=30, validate=validate.Range(1, 100))
    offset = Offset()


class RepoRefSchema(Base):
    owner = fields.String(required=True)
    name = fields.String(required=True)
