"""Repositories, collaborators, forks and stars."""

from __future__ import annotations

import re

from marshmallow import ValidationError, validate

from .common import (
    Base,
    Bool,
    Int,
    List,
    Nested,
    PageQuerySchema,
    RepoRefSchema,
    Str,
    UserSummarySchema,
)

NAME_RE = re.compile(r"^[A-Za-z0-9._-]{1,100}$")
BRANCH_RE = re.compile(
    r"^(?!/)(?!.*//)(?!.*\.\.)(?!.*@\{)(?!-)[^\x00-\x20~^:?*\[\\\x7f]{1,200}(?<![/.])(?<!\.lock)$"
)


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
    id = Str(required=True)
    name = Str(required=True)
    fullName = Str()
    description = Str(required=True)
    visibility = Str(required=True, validate=VISIBILITY)
    private = Bool()
    defaultBranch = Str(required=True)
    createdAt = Str(required=True)
    updatedAt = Str(required=True)
    owner = Nested(UserSummarySchema, required=True)
    starCount = Int(required=True)
    starred = Bool(required=True)
    forkCount = Int(required=True)
    isOwner = Bool(required=True)
    fork = Bool()
    parent = Nested(RepoRefSchema, allow_none=True)
    url = Str(
        metadata={
            "description": "a link that opens: the page under [server] web_url when set "
            "(GitHub-shaped: {web_url}/owner/name, …/issues/3, …/pulls/3, {web_url}/username), "
            "else the API resource ({base_url}/api/repositories/owner/name, …/issues/3, "
            "…/pulls/3, {base_url}/api/users/username)"
        }
    )
    cloneUrl = Str(metadata={"description": "smart-HTTP clone URL for git"})
    sshUrl = Str(
        allow_none=True,
        metadata={
            "description": "clone URL over SSH (ssh://git@host:port/owner/name.git, or "
            "git@host:owner/name.git on port 22); null when the SSH port is off"
        },
    )
    permission = Str(
        metadata={
            "description": "the caller's permission, the highest of their grants: owner "
            "(the owner, or an owner of the owning organization), admin, maintain, write, "
            "triage, read"
        }
    )


class RepoEnvelopeSchema(Base):
    repo = Nested(RepoSchema, required=True)
    isOwner = Bool(metadata={"description": "also inside repo; here for the chat bot"})


class RepoListSchema(Base):
    repositories = List(Nested(RepoSchema), required=True)
    hasMore = Bool(required=True)


class ForkListSchema(Base):
    forks = List(Nested(RepoSchema), required=True)
    hasMore = Bool(required=True)


OWNER_DOC = {"description": "an organization the caller belongs to (default: the caller)"}


class RepoCreateSchema(Base):
    name = Str(required=True, validate=repo_name, metadata=REPO_NAME_DOC)
    owner = Str(validate=validate.Length(min=1, max=39), metadata=OWNER_DOC)
    description = Str(load_default="", validate=validate.Length(max=2000))
    visibility = Str(load_default="public", validate=VISIBILITY)
    defaultBranch = Str(load_default="main", validate=branch_name, metadata=BRANCH_DOC)
    autoInit = Bool(load_default=False)


class RepoUpdateSchema(Base):
    name = Str(validate=repo_name, metadata=REPO_NAME_DOC)
    description = Str(validate=validate.Length(max=2000))
    visibility = Str(validate=VISIBILITY)
    defaultBranch = Str(validate=branch_name, metadata=BRANCH_DOC)


class ForkSchema(Base):
    name = Str(validate=repo_name, metadata=REPO_NAME_DOC)
    owner = Str(validate=validate.Length(min=1, max=39), metadata=OWNER_DOC)
    description = Str(validate=validate.Length(max=2000))


class StarResultSchema(Base):
    starred = Bool(required=True)
    starCount = Int(required=True)


class MemberSchema(UserSummarySchema):
    permission = Str()


class UserListSchema(Base):
    users = List(Nested(MemberSchema), required=True)
    hasMore = Bool(required=True)


class CollaboratorSchema(Base):
    permission = Str(load_default="write", validate=validate.OneOf(["read", "write", "admin"]))


class CollaboratorEnvelopeSchema(Base):
    user = Nested(MemberSchema, required=True)


__all__ = ["PageQuerySchema"]
