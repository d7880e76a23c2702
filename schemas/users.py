"""Accounts, profiles, settings and preferences."""

from __future__ import annotations

import re
from datetime import UTC

from marshmallow import ValidationError, fields, validate, validates

from hubsvc.policy import SCOPES
from hubsvc.web.auth import password_problem

from .common import Base, Bool, Email, Int, List, Nested, PageQuerySchema, Str, UserSummarySchema

RESERVED_USERNAMES = frozenset(
    {
        "me",
        "api",
        "auth",
        "ws",
        "health",
        "admin",
        "settings",
        "login",
        "logout",
        "new",
        "explore",
        "static",
        "ghost",
    }
)
USERNAME_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,37}[A-Za-z0-9])?$")


def _password(value: str) -> None:
    problem = password_problem(value)
    if problem:
        raise ValidationError(problem)


def _username(value: str) -> None:
    if not USERNAME_RE.fullmatch(value):
        raise ValidationError(
            "must be 1-39 letters, digits or '-', not starting or ending with '-'"
        )
    if value.lower() in RESERVED_USERNAMES:
        raise ValidationError("is reserved")


class UserSchema(UserSummarySchema):
    email = Email(metadata={"description": "only shown to the user themself"})
    isAdmin = Bool()
    createdAt = Str()


class SignUpSchema(Base):
    email = Email(required=True, validate=validate.Length(max=254))
    username = Str(required=True, validate=_username, metadata={"pattern": USERNAME_RE.pattern})
    password = Str(required=True, validate=_password, load_only=True)
    name = Str(required=True, validate=validate.Length(max=100))


class SignInSchema(Base):
    email = Str(validate=validate.Length(max=254))
    username = Str(validate=validate.Length(max=39))
    password = Str(required=True, validate=validate.Length(max=1024), load_only=True)

    @validates("email")
    def _email(self, value: str, **_: object) -> None:
        if "@" not in value:
            raise ValidationError("must be an e-mail address")


class AuthResultSchema(Base):
    user = Nested(UserSchema, required=True)
    token = Str(
        required=True, metadata={"description": "bearer token; also set in the session cookie"}
    )
    expiresAt = Str()


class UserEnvelopeSchema(Base):
    user = Nested(UserSchema, required=True)


class ProfileSchema(UserSchema):
    bio = Str()
    location = Str()
    website = Str()
    repositoryCount = Int()
    starCount = Int(metadata={"description": "repositories this user starred"})


class ProfileEnvelopeSchema(Base):
    profile = Nested(ProfileSchema, required=True)


class SummarySchema(Base):
    username = Str(required=True)
    name = Str(required=True)
    avatarUrl = Str(required=True)


class NotificationPrefsSchema(Base):
    web = Bool()
    chat = Bool()
    email = Bool()


class PreferencesSchema(Base):
    theme = Str(validate=validate.OneOf(["light", "dark", "system"]))
    notifications = Nested(NotificationPrefsSchema)


class PreferencesEnvelopeSchema(Base):
    preferences = Nested(PreferencesSchema, required=True)


def _website(value: str) -> None:
    if value and not re.fullmatch(r"^https?://[^\s/$.?#][^\s]*$", value, re.I):
        raise ValidationError("must be an http or https URL")


class SettingsSchema(Base):
    name = Str(validate=validate.Length(max=100))
    email = Email(validate=validate.Length(max=254))
    bio = Str(validate=validate.Length(max=1000))
    location = Str(validate=validate.Length(max=100))
    website = Str(validate=[validate.Length(max=500), _website])
    preferences = Nested(PreferencesSchema)
    currentPassword = Str(
        validate=validate.Length(max=1024),
        load_only=True,
        metadata={"description": "the account's password: required when email changes"},
    )


class SettingsEnvelopeSchema(Base):
    settings = Nested(SettingsSchema, required=True)


class PasswordChangeSchema(Base):
    currentPassword = Str(required=True, validate=validate.Length(max=1024), load_only=True)
    newPassword = Str(
        required=True, validate=_password, load_only=True, metadata={"description": "8 to 72 bytes"}
    )


_SCOPES_DOC = (
    "repo, issues, notifications, statuses, org, user as :read or :write, and admin; null: every scope "
    "the owner has (tokens made before scopes existed too)"
)
_REPO_NAME = validate.Regexp(
    r"^[A-Za-z0-9-]{1,39}/[A-Za-z0-9._-]{1,100}$", error="must be owner/name"
)


class TokenSchema(Base):
    id = Str(required=True)
    name = Str(required=True)
    createdAt = Str(required=True)
    expiresAt = Str(required=True, allow_none=True, metadata={"description": "null: never expires"})
    lastUsedAt = Str(
        required=True, allow_none=True, metadata={"description": "updated at most once a minute"}
    )
    scopes = List(Str(), required=True, allow_none=True, metadata={"description": _SCOPES_DOC})
    repositories = List(
        Str(),
        required=True,
        allow_none=True,
        metadata={
            "description": "owner/name (current names) of the repositories it is limited to; "
            "null: every one"
        },
    )


def _token_name(value: str) -> None:
    if not value.strip() or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ValidationError("must be 1-100 characters, not blank, no control characters")


class TokenCreateSchema(Base):
    name = Str(required=True, validate=[validate.Length(min=1, max=100), _token_name])
    expiresAt = fields.AwareDateTime(
        load_default=None,
        allow_none=True,
        default_timezone=UTC,
        metadata={"description": "ISO 8601 time in the future; null or absent: never"},
    )
    scopes = List(
        Str(validate=validate.OneOf(SCOPES)),
        load_default=None,
        allow_none=True,
        validate=validate.Length(min=1, max=len(SCOPES)),
        metadata={"description": _SCOPES_DOC},
    )
    repositories = List(
        Str(validate=_REPO_NAME),
        load_default=None,
        allow_none=True,
        validate=validate.Length(min=1, max=100),
        metadata={
            "description": "owner/name the token is limited to (at most 100), each a repository "
            "the caller may read; kept by repository, so a rename does not change it"
        },
    )


class TokenCreatedSchema(Base):
    token = Nested(TokenSchema, required=True)
    secret = Str(
        required=True,
        metadata={
            "description": "hubsvc_pat_…: shown only in this answer; use it as a bearer token or "
            "as git's password"
        },
    )


class TokenListSchema(Base):
    tokens = List(Nested(TokenSchema), required=True)


class AdminUserSchema(UserSchema):
    disabled = Bool(required=True)


class AdminUserEnvelopeSchema(Base):
    user = Nested(AdminUserSchema, required=True)


class AdminUserListSchema(Base):
    users = List(Nested(AdminUserSchema), required=True)
    hasMore = Bool(required=True)


class AdminUserCreateSchema(SignUpSchema):
    isAdmin = Bool(load_default=False)


class AdminUserPatchSchema(Base):
    disabled = Bool()
    isAdmin = Bool()


AdminUserQuerySchema = PageQuerySchema
