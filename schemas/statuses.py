"""Commit statuses from CI, as GitHub's: a state per context on a commit."""

from __future__ import annotations

from marshmallow import ValidationError, post_load, validate, validates

from .common import Base, Bool, Int, List, Nested, Str, UserSummarySchema

STATES = ("pending", "success", "failure", "error")
URL_MAX = 2000


def _web_url(value: str | None) -> None:
    if value is not None and not value.startswith(("http://", "https://")):
        raise ValidationError("must be an http:// or https:// URL")


class CommitStatusCreateSchema(Base):
    state = Str(required=True, validate=validate.OneOf(STATES))
    context = Str(
        load_default="default",
        validate=validate.Length(min=1, max=255),
        metadata={"description": "what reports, e.g. ci/test; the latest per context counts"},
    )
    targetUrl = Str(
        load_default=None,
        allow_none=True,
        validate=[validate.Length(max=URL_MAX), _web_url],
        metadata={"description": "a link to the run; GitHub's target_url is accepted too"},
    )
    target_url = Str(
        load_default=None,
        allow_none=True,
        validate=[validate.Length(max=URL_MAX), _web_url],
        metadata={"description": "GitHub's name of targetUrl, for CI tools written for it"},
    )
    description = Str(load_default=None, allow_none=True, validate=validate.Length(max=140))

    @validates("context")
    def _context(self, value: str, **_: object) -> None:
        if not value.strip() or any(ord(c) < 32 for c in value):
            raise ValidationError("must not be blank or hold control characters")

    @post_load
    def _one_url(self, data: dict, **_: object) -> dict:
        data["targetUrl"] = data["targetUrl"] or data.pop("target_url")
        data.pop("target_url", None)
        return data


class CommitStatusSchema(Base):
    id = Str(required=True)
    state = Str(required=True, metadata={"enum": list(STATES)})
    context = Str(required=True)
    targetUrl = Str(required=True, allow_none=True)
    description = Str(required=True, allow_none=True)
    creator = Nested(UserSummarySchema, required=True, allow_none=True)
    createdAt = Str(required=True)
    updatedAt = Str(required=True)


class CommitStatusEnvelopeSchema(Base):
    status = Nested(CommitStatusSchema, required=True)


class CommitStatusListSchema(Base):
    statuses = List(Nested(CommitStatusSchema), required=True)
    hasMore = Bool(required=True)


class CombinedStatusSchema(Base):
    state = Str(
        required=True,
        metadata={
            "enum": ["pending", "success", "failure"],
            "description": "failure if a latest status is failure or error, pending if one "
            "is pending or there is none, else success (GitHub's rule)",
        },
    )
    sha = Str(required=True)
    totalCount = Int(required=True)
    statuses = List(Nested(CommitStatusSchema), required=True)


class CombinedStatusEnvelopeSchema(Base):
    status = Nested(CombinedStatusSchema, required=True)
