"""Search queries and results."""

from __future__ import annotations

from marshmallow import fields, validate

from .common import Base, Bool, List, Nested, Offset, Str


class SearchQuerySchema(Base):
    q = fields.String(required=True, validate=validate.Length(min=1, max=256))
    type = fields.String(
        load_default="repositories",
        validate=validate.OneOf(["repositories", "issues", "pulls", "users"]),
    )
    limit = fields.Integer(load_default=20, validate=validate.Range(1, 100))
    offset = Offset()


class SearchResultSchema(Base):
    type = Str(required=True, metadata={"enum": ["repository", "issue", "pull_request", "user"]})
    id = Str(required=True)
    title = Str(required=True)
    description = Str(required=True)
    url = Str(
        required=True,
        metadata={
            "description": "a link that opens: the page under [server] web_url when set "
            "(GitHub-shaped: {web_url}/owner/name, …/issues/3, …/pulls/3, {web_url}/username), "
            "else the API resource ({base_url}/api/repositories/owner/name, …/issues/3, "
            "…/pulls/3, {base_url}/api/users/username)"
        },
    )
    createdAt = Str(required=True)

    class Meta:
        # Each result also carries the fields of its kind (repo, issue, pull, user).
        unknown = "include"


class SearchResultsSchema(Base):
    results = List(Nested(SearchResultSchema), required=True)
    hasMore = Bool(required=True)
    query = Str(required=True)
