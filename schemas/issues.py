"""Issues, pull requests and comments."""

from __future__ import annotations

from marshmallow import ValidationError, fields, validate, validates_schema

from .common import Base, Offset, RepoRefSchema, UserSummarySchema
from .repos import BRANCH_DOC, branch_name

TITLE = validate.Length(min=1, max=256)
BODY = validate.Length(max=65536)
LABEL = fields.String(validate=validate.Length(min=1, max=50))
USERNAME = fields.String(validate=validate.Length(min=1, max=39))


class IssueSchema(Base):
    id = fields.String(required=True)
    number = fields.Integer(required=True)
    title = fields.String(required=True)
    body = fields.String(required=True)
    state = fields.String(required=True)
    labels = fields.List(fields.String(), required=True)
    assignees = fields.List(fields.Nested(UserSummarySchema), required=True)
    author = fields.Nested(UserSummarySchema, allow_none=True, required=True)
    commentCount = fields.Integer(required=True)
    createdAt = fields.String(required=True)
    updatedAt = fields.String(required=True)
    closedAt = fields.String(allow_none=True, required=True)
    repository = fields.Nested(RepoRefSchema)
    url = fields.String()


class CommentSchema(Base):
    id = fields.String(required=True)
    body = fields.String(required=True)
    author = fields.Nested(UserSummarySchema, allow_none=True, required=True)
    createdAt = fields.String(required=True)
    updatedAt = fields.String(required=True)


class PullSchema(IssueSchema):
    head = fields.String(required=True)
    base = fields.String(required=True)
    headRepository = fields.Nested(RepoRefSchema, allow_none=True, required=True)
    headSha = fields.String(allow_none=True)
    baseSha = fields.String(allow_none=True)
    merged = fields.Boolean(required=True)
    mergeable = fields.Boolean(allow_none=True, required=True,
                               metadata={"description": "null while unknown or once merged"})
    mergedAt = fields.String(allow_none=True, required=True)
    mergedBy = fields.Nested(UserSummarySchema, allow_none=True, required=True)
    mergeCommit = fields.String(allow_none=True, required=True)


class IssueEnvelopeSchema(Base):
    issue = fields.Nested(IssueSchema, required=True)


class IssueWithCommentsSchema(Base):
    issue = fields.Nested(IssueSchema, required=True)
    comments = fields.List(fields.Nested(CommentSchema), required=True)
    hasMore = fields.Boolean(metadata={"description": "more comments than shown"})


class PullEnvelopeSchema(Base):
    pullRequest = fields.Nested(PullSchema, required=True)


class PullWithCommentsSchema(Base):
    pullRequest = fields.Nested(PullSchema, required=True)
    comments = fields.List(fields.Nested(CommentSchema), required=True)
    hasMore = fields.Boolean()


class IssueListSchema(Base):
    issues = fields.List(fields.Nested(IssueSchema), required=True)
    hasMore = fields.Boolean(required=True)


class PullListSchema(Base):
    pullRequests = fields.List(fields.Nested(PullSchema), required=True)
    hasMore = fields.Boolean(required=True)


class CommentEnvelopeSchema(Base):
    comment = fields.Nested(CommentSchema, required=True)


class CommentListSchema(Base):
    comments = fields.List(fields.Nested(CommentSchema), required=True)
    hasMore = fields.Boolean(required=True)


class IssueCreateSchema(Base):
    title = fields.String(required=True, validate=TITLE)
    body = fields.String(load_default="", validate=BODY)
    labels = fields.List(LABEL, load_default=list, validate=validate.Length(max=20))
    assignees = fields.List(USERNAME, load_default=list, validate=validate.Length(max=10))


class IssueUpdateSchema(Base):
    title = fields.String(validate=TITLE)
    body = fields.String(validate=BODY)
    state = fields.String(validate=validate.OneOf(["open", "closed"]))
    labels = fields.List(LABEL, validate=validate.Length(max=20))
    assignees = fields.List(USERNAME, validate=validate.Length(max=10))


class CommentCreateSchema(Base):
    body = fields.String(required=True, validate=validate.Length(min=1, max=65536))


class IssueListQuerySchema(Base):
    state = fields.String(load_default="open", validate=validate.OneOf(["open", "closed", "all"]))
    limit = fields.Integer(load_default=30, validate=validate.Range(1, 100))
    offset = Offset()


class PullListQuerySchema(Base):
    state = fields.String(load_default="open",
                          validate=validate.OneOf(["open", "closed", "merged", "all"]))
    limit = fields.Integer(load_default=30, validate=validate.Range(1, 100))
    offset = Offset()
    ignoreUnknown = fields.Boolean(load_default=False, metadata={
        "description": "true: unknown query parameters and unknown state values are "
                       "ignored instead of answering 400"})


class PullCreateSchema(Base):
    title = fields.String(required=True, validate=TITLE)
    body = fields.String(load_default="", validate=BODY)
    head = fields.String(required=True, validate=branch_name, metadata=BRANCH_DOC)
    base = fields.String(validate=branch_name, metadata={
        **BRANCH_DOC, "description": "default: the default branch"})
    headRepository = fields.Nested(RepoRefSchema, metadata={
        "description": "the fork the head branch lives in; default: this repository"})


class PullUpdateSchema(Base):
    title = fields.String(validate=TITLE)
    body = fields.String(validate=BODY)
    state = fields.String(validate=validate.OneOf(["open", "closed"]))
    base = fields.String(validate=branch_name, metadata=BRANCH_DOC)


class MergeSchema(Base):
    method = fields.String(load_default="merge",
                           validate=validate.OneOf(["merge", "squash", "fast-forward"]))
    message = fields.String(validate=validate.Length(min=1, max=65536))

    @validates_schema
    def _no_message_for_ff(self, data, **_):
        if data.get("method") == "fast-forward" and data.get("message"):
            raise ValidationError("a fast-forward writes no commit, so it takes no message",
                                  "message")
