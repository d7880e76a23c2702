"""Search queries and results."""

from __future__ import annotations

from marshmallow import fields, validate

from .common import Base, Offset


class SearchQuerySchema(Base):
    q = fields.String(required=True, validate=validate.Length(min=1, max=256))
    type = fields.String(load_default="repositories",
                         validate=validate.OneOf(["repositories", "issues", "pulls", "users"]))
    limit = fields.Integer(load_default=20, validate=validate.Range(1, 100))
    offset = Offset()


class SearchResultSchema(Base):
    type = fields.String(required=True, metadata={
        "enum": ["repository", "issue", "pull_request", "user"]})
    id = fields.String(required=True)
    title = fields.String(required=True)
    description = fields.String(required=True)
    url = fields.String(required=True)
    createdAt = fields.String(required=True)

    class Meta:
        # Each result also carries the fields of its kind (repo, issue, pull, user).
        unknown = "include"


class SearchResultsSchema(Base):
    results = fields.List(fields.Nested(SearchResultSchema), required=True)
    hasMore = fields.Boolean(required=True)
    query = fields.String(required=True)
