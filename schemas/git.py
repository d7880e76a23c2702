"""Git browsing: branches, commits, diffs, trees and files."""

from __future__ import annotations

from marshmallow import fields, validate

from .common import Base, Bool, Int, List, Nested, Offset, Str


class PersonSchema(Base):
    name = Str(required=True)
    email = Str(required=True)
    date = Str(required=True)


class VerificationSchema(Base):
    verified = Bool(required=True)
    reason = Str(
        required=True,
        validate=validate.OneOf(["valid", "unsigned", "unknown_key", "bad_email", "invalid"]),
        metadata={
            "description": "GitHub's reasons: valid (an SSH signature by a key on the account "
            "whose e-mail is the committer's), unsigned, unknown_key (no account holds the "
            "key, or not an SSH signature), bad_email (the committer e-mail is not the key "
            "owner's), invalid (malformed, or it does not match the commit)"
        },
    )
    signer = Str(
        required=True, allow_none=True, metadata={"description": "the username, when verified"}
    )


class CommitSchema(Base):
    oid = Str(required=True)
    message = Str(required=True)
    author = Nested(PersonSchema, required=True)
    committer = Nested(PersonSchema, required=True)
    parents = List(Str(), required=True)
    timestamp = Int(required=True, metadata={"description": "author time, epoch ms"})
    verification = Nested(
        VerificationSchema,
        metadata={"description": "in the commit list and a commit's diff: its signature's check"},
    )


class CommitListSchema(Base):
    commits = List(Nested(CommitSchema), required=True)
    hasMore = Bool(required=True)


class BranchCommitSchema(Base):
    oid = Str(required=True)
    message = Str(required=True)
    date = Str(required=True)


class BranchSchema(Base):
    name = Str(required=True)
    commit = Nested(BranchCommitSchema, required=True)
    isDefault = Bool(required=True)


class BranchListSchema(Base):
    branches = List(Nested(BranchSchema), required=True)
    hasMore = Bool(required=True)


class DiffFileSchema(Base):
    path = Str(required=True)
    oldPath = Str(allow_none=True, required=True)
    status = Str(
        required=True, validate=validate.OneOf(["added", "modified", "deleted", "renamed"])
    )
    additions = Int(required=True)
    deletions = Int(required=True)
    binary = Bool(required=True)
    patch = Str(required=True)
    truncated = Bool(
        metadata={
            "description": "present and true when the patch was cut or "
            "left out (a side over 4 MiB, or the diff's "
            "max_diff_bytes spent); additions and deletions "
            "still count every line when the file was read"
        }
    )


class DiffStatsSchema(Base):
    additions = Int(required=True)
    deletions = Int(required=True)
    filesChanged = Int(required=True)


class DiffSchema(Base):
    commit = Nested(CommitSchema, required=True)
    files = List(Nested(DiffFileSchema), required=True)
    stats = Nested(DiffStatsSchema, required=True)
    truncated = Bool(
        required=True,
        metadata={
            "description": "true when files were left out (past max_diff_files; filesChanged "
            "still counts them, additions and deletions count the listed files) "
            "or any listed file's patch was cut"
        },
    )


class TreeEntrySchema(Base):
    name = Str(required=True)
    path = Str(required=True)
    type = Str(required=True, validate=validate.OneOf(["file", "dir", "symlink", "submodule"]))
    size = Int(allow_none=True, required=True)
    oid = Str(required=True)
    mode = Str(required=True)


class TreeSchema(Base):
    files = List(Nested(TreeEntrySchema), required=True)
    isEmpty = Bool(required=True)
    hasMore = Bool(
        metadata={
            "description": "more entries follow this page (absent for an "
            "empty repository, whose answer the contract fixes)"
        }
    )


class FileSchema(Base):
    path = Str(required=True)
    name = Str(required=True)
    size = Int(required=True)
    oid = Str(required=True)
    isBinary = Bool(required=True)
    encoding = Str(required=True, validate=validate.OneOf(["utf-8", "base64"]))
    content = Str(required=True, metadata={"description": "empty when truncated"})
    truncated = Bool(
        metadata={
            "description": "present and true when the file is larger than "
            "the server's max_blob_bytes: content is empty "
            "(size, isBinary and encoding still hold); "
            "return=1 streams the whole file"
        }
    )


class FileEnvelopeSchema(Base):
    file = Nested(FileSchema, required=True)


_BRANCH = fields.String(
    metadata={
        "description": "branch, tag or full commit oid; default: the repository's default branch"
    },
    validate=validate.Length(min=1, max=255),
)


class CommitsQuerySchema(Base):
    branch = _BRANCH
    limit = fields.Integer(load_default=30, validate=validate.Range(1, 100))
    skip = Offset()


class TreeQuerySchema(Base):
    branch = _BRANCH
    path = fields.String(load_default="", validate=validate.Length(max=4096))
    limit = fields.Integer(
        validate=validate.Range(min=1),
        metadata={
            "description": "entries per page; default and most: the server's max_tree_entries "
            "(1000 unless configured)"
        },
    )
    offset = Offset()


class FileQuerySchema(Base):
    branch = _BRANCH
    path = fields.String(required=True, validate=validate.Length(min=1, max=4096))
    # `return` is a Python keyword, hence data_key.
    raw = fields.Integer(
        data_key="return",
        load_default=0,
        validate=validate.OneOf([0, 1]),
        metadata={"description": "1: the raw bytes instead of JSON"},
    )


class InfoRefsQuerySchema(Base):
    service = fields.String(
        required=True, validate=validate.OneOf(["git-upload-pack", "git-receive-pack"])
    )


class ReadmeQuerySchema(Base):
    branch = _BRANCH


class ReadmeSchema(Base):
    path = Str(required=True, metadata={"description": "the README's path in the tree"})
    html = Str(
        required=True,
        metadata={
            "description": "the README's Markdown as sanitized HTML (no script, style, SVG, "
            "event attributes or links other than http, https and mailto)"
        },
    )
