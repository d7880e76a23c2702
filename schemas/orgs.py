"""Organizations, their members and teams."""

from __future__ import annotations

import re

from marshmallow import ValidationError, fields, validate

from .common import Base, Bool, Int, List, Nested, PageQuerySchema, Str, UserSummarySchema
from .users import USERNAME_RE, _username

PERMISSIONS = ["read", "triage", "write", "maintain", "admin"]
PERMISSION = validate.OneOf(PERMISSIONS)
ROLE = validate.OneOf(["member", "owner"])
TEAM_RE = re.compile(r"^[A-Za-z0-9._-]{1,100}$")
_PERMISSION_DOC = {
    "description": "as GitHub's: read; triage (read, and manage issues and pull requests: "
    "edit, close, label, assign); write (push, merge); maintain (write, and the "
    "repository's description and default branch); admin (maintain, and webhooks, "
    "branch protection, others' comments)"
}


def team_name(value: str) -> None:
    """1-100 of A-Za-z0-9._-."""
    if not TEAM_RE.fullmatch(value) or value in (".", ".."):
        raise ValidationError("must be 1-100 of A-Z a-z 0-9 . _ -, not '.' or '..'")


class OrgCreateSchema(Base):
    name = Str(
        required=True,
        validate=_username,
        metadata={"pattern": USERNAME_RE.pattern, "description": "in the users' namespace"},
    )
    description = Str(load_default="", validate=validate.Length(max=2000))


class OrgUpdateSchema(Base):
    description = Str(validate=validate.Length(max=2000))
    displayName = Str(validate=validate.Length(max=100))
    requireTwoFactor = Bool(
        metadata={"description": "members and collaborators without a second factor are shut out"}
    )


class OrgSchema(Base):
    id = Str(required=True)
    name = Str(required=True, metadata={"description": "the organization's handle"})
    displayName = Str(required=True)
    description = Str(required=True)
    avatarUrl = Str(required=True, metadata={"format": "uri"})
    createdAt = Str(required=True)
    memberCount = Int(required=True)
    teamCount = Int(required=True)
    role = Str(
        required=True,
        allow_none=True,
        metadata={"description": "the caller's role: owner, member, or null (not a member)"},
    )
    requireTwoFactor = Bool(
        required=True,
        metadata={"description": "whether members need a second factor to use its repositories"},
    )
    url = Str(required=True)


class OrgEnvelopeSchema(Base):
    organization = Nested(OrgSchema, required=True)


class OrgListSchema(Base):
    organizations = List(Nested(OrgSchema), required=True)
    hasMore = Bool(required=True)


class MembershipSchema(Base):
    role = Str(load_default="member", validate=ROLE)


class OrgMemberSchema(UserSummarySchema):
    role = Str(required=True)


class OrgMemberEnvelopeSchema(Base):
    member = Nested(OrgMemberSchema, required=True)


class OrgMemberListSchema(Base):
    members = List(Nested(OrgMemberSchema), required=True)
    hasMore = Bool(required=True)


class MemberQuerySchema(PageQuerySchema):
    role = fields.String(validate=ROLE)


class TeamCreateSchema(Base):
    name = Str(required=True, validate=team_name, metadata={"pattern": TEAM_RE.pattern})
    description = Str(load_default="", validate=validate.Length(max=2000))
    permission = Str(load_default="read", validate=PERMISSION, metadata=_PERMISSION_DOC)


class TeamUpdateSchema(Base):
    name = Str(validate=team_name, metadata={"pattern": TEAM_RE.pattern})
    description = Str(validate=validate.Length(max=2000))
    permission = Str(validate=PERMISSION, metadata=_PERMISSION_DOC)


class TeamSchema(Base):
    id = Str(required=True)
    name = Str(required=True)
    description = Str(required=True)
    permission = Str(required=True, metadata=_PERMISSION_DOC)
    organization = Str(required=True)
    memberCount = Int(required=True)
    repositoryCount = Int(required=True)
    createdAt = Str(required=True)


class TeamEnvelopeSchema(Base):
    team = Nested(TeamSchema, required=True)


class TeamListSchema(Base):
    teams = List(Nested(TeamSchema), required=True)
    hasMore = Bool(required=True)


class TeamMemberListSchema(Base):
    users = List(Nested(UserSummarySchema), required=True)
    hasMore = Bool(required=True)


class TeamRepoSchema(Base):
    permission = Str(
        validate=PERMISSION,
        metadata={"description": "this repository's grant; absent: the team's permission"},
    )


class TeamRepoItemSchema(Base):
    name = Str(required=True)
    fullName = Str(required=True)
    visibility = Str(required=True)
    permission = Str(required=True)


class TeamRepoEnvelopeSchema(Base):
    repository = Nested(TeamRepoItemSchema, required=True)


class TeamRepoListSchema(Base):
    repositories = List(Nested(TeamRepoItemSchema), required=True)
    hasMore = Bool(required=True)
