"""Git browsing: branches, commits, diffs, trees and files."""

from __future__ import annotations

from marshmallow import fields, validate

from .common import Base, Offset


class PersonSchema(Base):
    name = fields.String(required=True)
    email = fields.String(required=True)
    date = fields.String(required=True)


class CommitSchema(Base):
    oid = fields.String(required=True)
    message = fields.String(required=True)
    author = fields.Nested(PersonSchema, required=True)
    committer = fields.Nested(PersonSchema, required=True)
    parents = fields.List(fields.String(), required=True)
    timestamp = fields.Integer(required=True, metadata={"description": "author time, epoch ms"})


class CommitListSchema(Base):
    commits = fields.List(fields.Nested(CommitSchema), required=True)
    hasMore = fields.Boolean(required=True)


class BranchCommitSchema(Base):
    oid = fields.String(required=True)
    message = fields.String(required=True)
    date = fields.String(required=True)


class BranchSchema(Base):
    name = fields.String(required=True)
    commit = fields.Nested(BranchCommitSchema, required=True)
    isDefault = fields.Boolean(required=True)


class BranchListSchema(Base):
    branches = fields.List(fields.Nested(BranchSchema), required=True)
    hasMore = fields.Boolean(required=True)


class DiffFileSchema(Base):
    path = fields.String(required=True)
    oldPath = fields.String(allow_none=True, required=True)
    status = fields.String(required=True, validate=validate.OneOf(
        ["added", "modified", "deleted", "renamed"]))
    additions = fields.Integer(required=True)
    deletions = fields.Integer(required=True)
    binary = fields.Boolean(required=True)
    patch = fields.String(required=True)
    truncated = fields.Boolean()


class DiffStatsSchema(Base):
    additions = fields.Integer(required=True)
    deletions = fields.Integer(required=True)
    filesChanged = fields.Integer(required=True)


class DiffSchema(Base):
    commit = fields.Nested(CommitSchema, required=True)
    files = fields.List(fields.Nested(DiffFileSchema), required=True)
    stats = fields.Nested(DiffStatsSchema, required=True)


class TreeEntrySchema(Base):
    name = fields.String(required=True)
    path = fields.String(required=True)
    type = fields.String(required=True, validate=validate.OneOf(["file", "dir", "symlink", "submodule"]))
    size = fields.Integer(allow_none=True, required=True)
    oid = fields.String(required=True)
    mode = fields.String(required=True)


class TreeSchema(Base):
    files = fields.List(fields.Nested(TreeEntrySchema), required=True)
    isEmpty = fields.Boolean(required=True)


class FileSchema(Base):
    path = fields.String(required=True)
    name = fields.String(required=True)
    size = fields.Integer(required=True)
    oid = fields.String(required=True)
    isBinary = fields.Boolean(required=True)
    encoding = fields.String(required=True, validate=validate.OneOf(["utf-8", "base64"]))
    content = fields.String(required=True)


class FileEnvelopeSchema(Base):
    file = fields.Nested(FileSchema, required=True)


_BRANCH = fields.String(metadata={"description": "branch, tag or full commit oid; "
                                                 "default: the repository's default branch"},
                        validate=validate.Length(min=1, max=255))


class CommitsQuerySchema(Base):
    branch = _BRANCH
    limit = fields.Integer(load_default=30, validate=validate.Range(1, 100))
    skip = Offset()


class TreeQuerySchema(Base):
    branch = _BRANCH
    path = fields.String(load_default="", validate=validate.Length(max=4096))


class FileQuerySchema(Base):
    branch = _BRANCH
    path = fields.String(required=True, validate=validate.Length(min=1, max=4096))
    # `return` is a Python keyword, hence data_key.
    raw = fields.Integer(data_key="return", load_default=0, validate=validate.OneOf([0, 1]),
                         metadata={"description": "1: the raw bytes instead of JSON"})


class InfoRefsQuerySchema(Base):
    service = fields.String(required=True, validate=validate.OneOf(
        ["git-upload-pack", "git-receive-pack"]))
