"""Shapes shared by every resource: strict JSON fields, errors, user summaries, pages."""

from __future__ import annotations

from typing import Any

from marshmallow import EXCLUDE, Schema, ValidationError, fields, validate


class Base(Schema):
    """Unknown body fields are ignored, as the contract says."""

    # Said of a nested object given as something else ("notifications: must be an object").
    error_messages = {"type": "must be an object"}

    class Meta:
        unknown = EXCLUDE


# The field set of JSON bodies (and of the shapes they share with answers). marshmallow
# coerces on load: Boolean takes "yes", "on", "1" and 1, Integer takes "5". A JSON body
# already says its types, so each field takes only its own JSON type; anything else is
# 400 naming the field. Query strings are text: their schemas keep marshmallow's fields.


# marshmallow's own type of error message tables.
_Messages = dict[str, str | list[Any] | dict[Any, Any]]


class _Typed:
    default_error_messages: _Messages = {"null": "must not be null"}


class Str(_Typed, fields.String):
    """A JSON string only."""

    default_error_messages: _Messages = {"invalid": "must be a string"}

    def _deserialize(self, value: Any, attr, data, **kwargs) -> str:
        if not isinstance(value, str):  # fields.String also takes bytes
            raise self.make_error("invalid")
        return value


class Email(_Typed, fields.Email):
    """A JSON string that is an e-mail address."""

    default_error_messages: _Messages = {"invalid": "must be an e-mail address"}

    def _deserialize(self, value: Any, attr, data, **kwargs) -> str:
        if not isinstance(value, str):
            raise ValidationError("must be a string")
        return super()._deserialize(value, attr, data, **kwargs)


class Bool(_Typed, fields.Boolean):
    """true or false only: not "yes", "true", 1 or 0."""

    default_error_messages: _Messages = {"invalid": "must be true or false"}

    def _deserialize(self, value: Any, attr, data, **kwargs) -> bool:
        if not isinstance(value, bool):
            raise self.make_error("invalid")
        return value


class Int(_Typed, fields.Integer):
    """A JSON integer only: not "5", 5.0 or true."""

    default_error_messages: _Messages = {"invalid": "must be an integer"}

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(strict=True, **kwargs)

    def _deserialize(self, value: Any, attr, data, **kwargs) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.make_error("invalid")
        return super()._deserialize(value, attr, data, **kwargs)


class List(_Typed, fields.List):
    """A JSON array whose items are typed by the inner field."""

    default_error_messages: _Messages = {"invalid": "must be an array"}

    def _deserialize(self, value: Any, attr, data, **kwargs) -> list:
        if not isinstance(value, list):  # fields.List also takes tuples and sets
            raise self.make_error("invalid")
        return super()._deserialize(value, attr, data, **kwargs)


class Dict(_Typed, fields.Dict):
    """A JSON object."""

    default_error_messages: _Messages = {"invalid": "must be an object"}


class Nested(_Typed, fields.Nested):
    """A JSON object loaded through a schema (Base says "must be an object")."""


class ErrorSchema(Base):
    error = Str(required=True, metadata={"description": "a message a person understands"})
    retryAfter = Int(metadata={"description": "seconds to wait (429 only)"})


class UserSummarySchema(Base):
    id = Str(required=True)
    username = Str(required=True)
    name = Str(required=True)
    avatarUrl = Str(required=True, metadata={"format": "uri"})


class Offset(fields.Integer):
    """offset/skip: any integer >= 0; larger than any list, it is clamped to 2**31-1."""

    # No list is that long, and past it SQLite (64-bit) overflows and git (32-bit) wraps.
    LARGEST = 2**31 - 1

    def __init__(self, **kwargs) -> None:
        super().__init__(load_default=0, validate=validate.Range(min=0), **kwargs)

    def _deserialize(self, value, attr, data, **kwargs) -> int:
        return min(super()._deserialize(value, attr, data, **kwargs), self.LARGEST)


class PageQuerySchema(Base):
    limit = fields.Integer(load_default=30, validate=validate.Range(1, 100))
    offset = Offset()


class RepoRefSchema(Base):
    owner = Str(required=True)
    name = Str(required=True)
