"""Accounts, profiles, settings and preferences."""

from __future__ import annotations

import re
from datetime import timezone

from marshmallow import ValidationError, fields, validate, validates

from .common import Base, PageQuerySchema, UserSummarySchema

RESERVED_USERNAMES = frozenset({
    "me", "api", "auth", "ws", "health", "admin", "settings", "login", "logout", "new",
    "explore", "static", "ghost",
})
USERNAME_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,37}[A-Za-z0-9])?$")


def _password(value: str) -> None:
    size = len(value.encode())
    if size < 8 or size > 72:
        raise ValidationError("must be 8 to 72 bytes")


def _username(value: str) -> None:
    if not USERNAME_RE.fullmatch(value):
        raise ValidationError(
            "must be 1-39 letters, digits or '-', not starting or ending with '-'")
    if value.lower() in RESERVED_USERNAMES:
        raise ValidationError("is reserved")


class UserSchema(UserSummarySchema):
    email = fields.Email(metadata={"description": "only shown to the user themself"})
    isAdmin = fields.Boolean()
    createdAt = fields.String()


class SignUpSchema(Base):
    email = fields.Email(required=True, validate=validate.Length(max=254))
    username = fields.String(required=True, validate=_username,
                             metadata={"pattern": USERNAME_RE.pattern})
    password = fields.String(required=True, validate=_password, load_only=True)
    name = fields.String(required=True, validate=validate.Length(max=100))


class SignInSchema(Base):
    email = fields.String(validate=validate.Length(max=254))
    username = fields.String(validate=validate.Length(max=39))
    password = fields.String(required=True, validate=validate.Length(max=1024), load_only=True)

    @validates("email")
    def _email(self, value: str, **_: object) -> None:
        if "@" not in value:
            raise ValidationError("must be an e-mail address")


class AuthResultSchema(Base):
    user = fields.Nested(UserSchema, required=True)
    token = fields.String(required=True, metadata={"description": "bearer token; also set in the session cookie"})
    expiresAt = fields.String()


class UserEnvelopeSchema(Base):
    user = fields.Nested(UserSchema, required=True)


class ProfileSchema(UserSchema):
    bio = fields.String()
    location = fields.String()
    website = fields.String()
    repositoryCount = fields.Integer()
    starCount = fields.Integer(metadata={"description": "repositories this user starred"})


class ProfileEnvelopeSchema(Base):
    profile = fields.Nested(ProfileSchema, required=True)


class SummarySchema(Base):
    username = fields.String(required=True)
    name = fields.String(required=True)
    avatarUrl = fields.String(required=True)


class NotificationPrefsSchema(Base):
    web = fields.Boolean()
    chat = fields.Boolean()
    email = fields.Boolean()


class PreferencesSchema(Base):
    theme = fields.String(validate=validate.OneOf(["light", "dark", "system"]))
    notifications = fields.Nested(NotificationPrefsSchema)


class PreferencesEnvelopeSchema(Base):
    preferences = fields.Nested(PreferencesSchema, required=True)


def _website(value: str) -> None:
    if value and not re.fullmatch(r"^https?://[^\s/$.?#][^\s]*$", value, re.I):
        raise ValidationError("must be an http or https URL")


class SettingsSchema(Base):
    name = fields.String(validate=validate.Length(max=100))
    email = fields.Email(validate=validate.Length(max=254))
    bio = fields.String(validate=validate.Length(max=1000))
    location = fields.String(validate=validate.Length(max=100))
    website = fields.String(validate=[validate.Length(max=500), _website])
    preferences = fields.Nested(PreferencesSchema)


class SettingsEnvelopeSchema(Base):
    settings = fields.Nested(SettingsSchema, required=True)


class PasswordChangeSchema(Base):
    currentPassword = fields.String(required=True, validate=validate.Length(max=1024),
                                    load_only=True)
    newPassword = fields.String(required=True, validate=_password, load_only=True,
                                metadata={"description": "8 to 72 bytes"})


class TokenSchema(Base):
    id = fields.String(required=True)
    name = fields.String(required=True)
    createdAt = fields.String(required=True)
    expiresAt = fields.String(required=True, allow_none=True,
                              metadata={"description": "null: never expires"})
    lastUsedAt = fields.String(required=True, allow_none=True,
                               metadata={"description": "updated at most once a minute"})


def _token_name(value: str) -> None:
    if not value.strip() or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ValidationError("must be 1-100 characters, not blank, no control characters")


class TokenCreateSchema(Base):
    name = fields.String(required=True, validate=[validate.Length(min=1, max=100), _token_name])
    expiresAt = fields.AwareDateTime(
        load_default=None, allow_none=True, default_timezone=timezone.utc,
        metadata={"description": "ISO 8601 time in the future; null or absent: never"})


class TokenCreatedSchema(Base):
    token = fields.Nested(TokenSchema, required=True)
    secret = fields.String(required=True, metadata={
        "description": "hubsvc_pat_…: shown only in this answer; use it as a bearer token or "
                       "as git's password"})


class TokenListSchema(Base):
    tokens = fields.List(fields.Nested(TokenSchema), required=True)


class AdminUserSchema(UserSchema):
    disabled = fields.Boolean(required=True)


class AdminUserEnvelopeSchema(Base):
    user = fields.Nested(AdminUserSchema, required=True)


class AdminUserListSchema(Base):
    users = fields.List(fields.Nested(AdminUserSchema), required=True)
    hasMore = fields.Boolean(required=True)


class AdminUserCreateSchema(SignUpSchema):
    isAdmin = fields.Boolean(load_default=False)


class AdminUserPatchSchema(Base):
    disabled = fields.Boolean()
    isAdmin = fields.Boolean()


AdminUserQuerySchema = PageQuerySchema
