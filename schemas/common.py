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


class PageQuerySchema(Base):
    limit = fields.Integer(load_default=30, validate=validate.Range(1, 100))
    offset = fields.Integer(load_default=0, validate=validate.Range(min=0))


class RepoRefSchema(Base):
    owner = fields.String(required=True)
    name = fields.String(required=True)
