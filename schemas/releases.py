"""Releases, their assets, and tags."""

from __future__ import annotations

from marshmallow import fields, validate

from .common import Base, Bool, Int, List, Nested, PageQuerySchema, Str, UserSummarySchema
from .repos import BRANCH_DOC

TAG_NAME = validate.Length(min=1, max=255)
NAME = validate.Length(max=256)
BODY = validate.Length(max=125000)  # GitHub's limit of a release body


class AssetSchema(Base):
    id = Str(required=True)
    name = Str(required=True)
    contentType = Str(required=True)
    size = Int(required=True)
    downloadCount = Int(required=True)
    uploader = Nested(UserSummarySchema, allow_none=True, required=True)
    createdAt = Str(required=True)
    browserDownloadUrl = Str(required=True)


class ReleaseSchema(Base):
    id = Str(required=True)
    tagName = Str(required=True)
    targetCommitish = Str(required=True)
    name = Str(required=True)
    body = Str(required=True)
    draft = Bool(required=True)
    prerelease = Bool(required=True)
    author = Nested(UserSummarySchema, allow_none=True, required=True)
    createdAt = Str(required=True)
    publishedAt = Str(allow_none=True, required=True)
    assets = List(Nested(AssetSchema), required=True)
    url = Str(required=True)


class ReleaseEnvelopeSchema(Base):
    release = Nested(ReleaseSchema, required=True)


class ReleaseListSchema(Base):
    releases = List(Nested(ReleaseSchema), required=True)
    hasMore = Bool(required=True)


class AssetEnvelopeSchema(Base):
    asset = Nested(AssetSchema, required=True)


class AssetListSchema(Base):
    assets = List(Nested(AssetSchema), required=True)
    hasMore = Bool(required=True)


class ReleaseCreateSchema(Base):
    tagName = Str(required=True, validate=TAG_NAME)
    targetCommitish = Str(
        validate=validate.Length(min=1, max=255),
        metadata={
            **BRANCH_DOC,
            "description": "a branch or commit the new tag points at (default: the default "
            "branch); unused when the tag exists",
        },
    )
    name = Str(load_default="", validate=NAME)
    body = Str(load_default="", validate=BODY)
    draft = Bool(load_default=False)
    prerelease = Bool(load_default=False)


class ReleaseUpdateSchema(Base):
    tagName = Str(validate=TAG_NAME)
    targetCommitish = Str(validate=validate.Length(min=1, max=255))
    name = Str(validate=NAME)
    body = Str(validate=BODY)
    draft = Bool()
    prerelease = Bool()


class AssetQuerySchema(Base):
    name = fields.String(
        required=True,
        validate=validate.Regexp(
            r"^(?!\.\.?$)[^/\\\x00-\x1f]{1,255}$",
            error="must be 1-255 characters, no slash, backslash or control character",
        ),
        metadata={"description": "the file name the asset is downloaded as"},
    )


class TagCommitSchema(Base):
    oid = Str(required=True)


class TagSchema(Base):
    name = Str(required=True)
    commit = Nested(TagCommitSchema, required=True)


class TagListSchema(Base):
    tags = List(Nested(TagSchema), required=True)
    hasMore = Bool(required=True)


ReleaseListQuerySchema = PageQuerySchema
