"""Protected branches: a rule per branch name pattern, as GitHub's branch protection."""

from __future__ import annotations

from marshmallow import validate

from .common import Base, Bool, Int, List, Nested, Str

CONTEXT_MAX = 255


class StatusChecksSchema(Base):
    strict = Bool(
        load_default=False,
        metadata={"description": "the head must contain the base's tip before merging"},
    )
    contexts = List(
        Str(validate=validate.Length(min=1, max=CONTEXT_MAX)),
        required=True,
        validate=validate.Length(max=50),
        metadata={"description": "status contexts that must be `success` on the head"},
    )


class ReviewRulesSchema(Base):
    requiredApprovingReviewCount = Int(
        load_default=1,
        validate=validate.Range(0, 6),
        metadata={"description": "approvals needed from people with write access (0-6)"},
    )
    requireCodeOwnerReviews = Bool(
        load_default=False,
        metadata={
            "description": "each changed path that CODEOWNERS (on the base branch) gives "
            "owners needs an approval of the current head from one of them"
        },
    )


class ProtectionUpdateSchema(Base):
    requiredStatusChecks = Nested(StatusChecksSchema, load_default=None, allow_none=True)
    requiredPullRequestReviews = Nested(
        ReviewRulesSchema,
        load_default=None,
        allow_none=True,
        metadata={"description": "set: changes reach the branch only through pull requests"},
    )
    enforceAdmins = Bool(
        load_default=False,
        metadata={
            "description": "false: the repository's admins may push and merge past "
            "the pull request, review and status rules"
        },
    )
    allowForcePushes = Bool(load_default=False)
    allowDeletions = Bool(load_default=False)


class ProtectionSchema(ProtectionUpdateSchema):
    pattern = Str(required=True, metadata={"description": "a branch name, or a glob (`*`, `?`)"})
    createdAt = Str(required=True)
    updatedAt = Str(required=True)


class ProtectionEnvelopeSchema(Base):
    protection = Nested(ProtectionSchema, required=True)
