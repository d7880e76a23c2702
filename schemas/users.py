"""Accounts, profiles, settings and preferences."""

from __future__ import annotations

import re

from marshmallow import ValidationError, validate, validates

from hubsvc.auth import password_problem

from .common import Base, Bool, Email, Int, Nested, Str, UserSummarySchema

RESERVED_USERNAMES = frozenset({
    "me", "api", "auth", "ws", "health", "admin", "settings", "login", "logout", "new",
    "explore", "static",
})
USERNAME_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,37}[A-Za-z0-9])?$")


def _password(value: str) -> None:
    problem = password_problem(value)
    if problem:
        raise ValidationError(problem)


def _username(value: str) -> None:
    if not USERNAME_RE.fullmatch(value):
        raise ValidationError(
            "must be 1-39 letters, digits or '-', not starting or ending with '-'")
    if value.lower() in RESERVED_USERNAMES:
        raise ValidationError("is reserved")


class UserSchema(UserSummarySchema):
    email = Email(metadata={"description": "only shown to the user themself"})
    isAdmin = Bool()
    createdAt = Str()


class SignUpSchema(Base):
    email = Email(required=True, validate=validate.Length(max=254))
    username = Str(required=True, validate=_username,
                   metadata={"pattern": USERNAME_RE.pattern})
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
    token = Str(required=True, metadata={"description": "bearer token; also set in the session cookie"})
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


class SettingsEnvelopeSchema(Base):
    settings = Nested(SettingsSchema, required=True)
