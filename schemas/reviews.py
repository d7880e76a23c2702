"""Pull request reviews, as GitHub's: a verdict, a body and comments on lines of the diff."""

from __future__ import annotations

from marshmallow import validate

from .common import Base, Bool, Int, List, Nested, Str, UserSummarySchema
from .issues import BODY_HTML

BODY_MAX = 65536
COMMENTS_MAX = 100


class ReviewCommentInSchema(Base):
    path = Str(required=True, validate=validate.Length(min=1, max=4096))
    line = Int(required=True, validate=validate.Range(min=1))
    side = Str(
        load_default="RIGHT",
        validate=validate.OneOf(["LEFT", "RIGHT"]),
        metadata={"description": "RIGHT: a line of the head (added or kept); LEFT: of the base"},
    )
    body = Str(required=True, validate=validate.Length(min=1, max=BODY_MAX))


class ReviewCreateSchema(Base):
    event = Str(required=True, validate=validate.OneOf(["APPROVE", "REQUEST_CHANGES", "COMMENT"]))
    body = Str(load_default="", validate=validate.Length(max=BODY_MAX))
    comments = List(
        Nested(ReviewCommentInSchema),
        load_default=list,
        validate=validate.Length(max=COMMENTS_MAX),
    )


class ReviewCommentSchema(Base):
    id = Str(required=True)
    path = Str(required=True)
    line = Int(required=True)
    side = Str(required=True)
    body = Str(required=True)
    bodyHtml = Str(metadata=BODY_HTML)


class ReviewSchema(Base):
    id = Str(required=True)
    user = Nested(UserSummarySchema, required=True, allow_none=True)
    state = Str(required=True, metadata={"enum": ["APPROVED", "CHANGES_REQUESTED", "COMMENTED"]})
    body = Str(required=True)
    bodyHtml = Str(metadata=BODY_HTML)
    commitId = Str(required=True, metadata={"description": "the head the review was given on"})
    stale = Bool(
        required=True, metadata={"description": "the head has moved since: it no longer counts"}
    )
    comments = List(Nested(ReviewCommentSchema), required=True)
    submittedAt = Str(required=True)


class ReviewEnvelopeSchema(Base):
    review = Nested(ReviewSchema, required=True)


class ReviewListSchema(Base):
    reviews = List(Nested(ReviewSchema), required=True)
    hasMore = Bool(required=True)


_NAMES = validate.Length(max=15)


class ReviewRequestSchema(Base):
    reviewers = List(
        Str(validate=validate.Length(min=1, max=39)),
        load_default=list,
        validate=_NAMES,
        metadata={"description": "usernames (at most 15)"},
    )
    teamReviewers = List(
        Str(validate=validate.Length(min=1, max=100)),
        load_default=list,
        validate=_NAMES,
        metadata={"description": "team names of the organization that owns the repository"},
    )
