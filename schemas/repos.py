"""Repositories, collaborators, forks and stars."""

from __future__ import annotations

import re

from marshmallow import ValidationError, fields, validate

from .common import Base, PageQuerySchema, RepoRefSchema, UserSummarySchema

NAME_RE = re.compile(r"^[A-Za-z0-9._-]{1,100}$")
BRANCH_RE = re.compile(r"^(?!/)(?!.*//)(?!.*\.\.)(?!.*@\{)(?!-)[^\x00-\x20~^:?*\[\\\x7f]{1,200}(?<![/.])(?<!\.lock)$")


def repo_name(value: str) -> None:
    """Names: 1-100 of A-Za-z0-9._-, not . or .., not ending in .git."""
    if not NAME_RE.fullmatch(value) or value in (".", "..") or value.lower().endswith(".git"):
        raise ValidationError("must be 1-100 of A-Z a-z 0-9 . _ -, not '.', '..' or ending in .git")


def branch_name(value: str) -> None:
    """A name git accepts for a branch."""
    if not BRANCH_RE.fullmatch(value):
        raise ValidationError("is not a valid branch name")


VISIBILITY = validate.OneOf(["public", "private"])
# The validators above as documented patterns (fullmatch: "$" alone would allow a final "\n").
REPO_NAME_DOC = {"pattern": r"^(?!\.\.?$)(?!.*\.[Gg][Ii][Tt]$)[A-Za-z0-9._-]{1,100}$"}
BRANCH_DOC = {"pattern": BRANCH_RE.pattern}


class RepoSchema(Base):
    id = fields.String(required=True)
    name = fields.String(required=True)
    fullName = fields.String()
    description = fields.String(required=True)
    visibility = fields.String(required=True, validate=VISIBILITY)
    private = fields.Boolean()
    defaultBranch = fields.String(required=True)
    createdAt = fields.String(required=True)
    updatedAt = fields.String(required=True)
    owner = fields.Nested(UserSummarySchema, required=True)
    starCount = fields.Integer(required=True)
    starred = fields.Boolean(required=True)
    forkCount = fields.Integer(required=True)
    isOwner = fields.Boolean(required=True)
    fork = fields.Boolean()
    parent = fields.Nested(RepoRefSchema, allow_none=True)
    url = fields.String()
    cloneUrl = fields.String(metadata={"description": "smart-HTTP clone URL for git"})
    permission = fields.String(metadata={"description": "the caller's role: owner, admin, write, read"})


class RepoEnvelopeSchema(Base):
    repo = fields.Nested(RepoSchema, required=True)
    isOwner = fields.Boolean(metadata={"description": "also inside repo; here for the chat bot"})


class RepoListSchema(Base):
    repositories = fields.List(fields.Nested(RepoSchema), required=True)
    hasMore = fields.Boolean(required=True)


class ForkListSchema(Base):
    forks = fields.List(fields.Nested(RepoSchema), required=True)
    hasMore = fields.Boolean(required=True)


class RepoCreateSchema(Base):
    name = fields.String(required=True, validate=repo_name, metadata=REPO_NAME_DOC)
    description = fields.String(load_default="", validate=validate.Length(max=2000))
    visibility = fields.String(load_default="public", validate=VISIBILITY)
    defaultBranch = fields.String(load_default="main", validate=branch_name, metadata=BRANCH_DOC)
    autoInit = fields.Boolean(load_default=False)


class RepoUpdateSchema(Base):
    name = fields.String(validate=repo_name, metadata=REPO_NAME_DOC)
    description = fields.String(validate=validate.Length(max=2000))
    visibility = fields.String(validate=VISIBILITY)
    defaultBranch = fields.String(validate=branch_name, metadata=BRANCH_DOC)


class ForkSchema(Base):
    name = fields.String(validate=repo_name, metadata=REPO_NAME_DOC)
    description = fields.String(validate=validate.Length(max=2000))


class StarResultSchema(Base):
    starred = fields.Boolean(required=True)
    starCount = fields.Integer(required=True)


class MemberSchema(UserSummarySchema):
    permission = fields.String()


class UserListSchema(Base):
    users = fields.List(fields.Nested(MemberSchema), required=True)
    hasMore = fields.Boolean(required=True)


class CollaboratorSchema(Base):
    permission = fields.String(load_default="write", validate=validate.OneOf(["read", "write", "admin"]))


class CollaboratorEnvelopeSchema(Base):
    user = fields.Nested(MemberSchema, required=True)


__all__ = ["PageQuerySchema"]
