"""SSH public keys: an account's keys and repositories' deploy keys."""

from __future__ import annotations

from marshmallow import ValidationError, validate

from hubsvc.sshkeys import MAX_LINE

from .common import Base, Bool, List, Nested, Str

_KEY_DOC = (
    "an OpenSSH public key line (`ssh-ed25519 AAAA… comment`, the .pub file): Ed25519, "
    "ECDSA (nistp256/384/521) or RSA of at least 2048 bits"
)


def _title(value: str) -> None:
    # A title goes into the owner's e-mail and lists: one line, no control characters.
    if any(ord(c) < 32 or ord(c) == 127 for c in value) or not value.strip():
        raise ValidationError("must be one line of printable text")


class KeySchema(Base):
    id = Str(required=True)
    title = Str(required=True)
    key = Str(required=True, metadata={"description": "`kind base64`, without the comment"})
    fingerprint = Str(required=True, metadata={"description": "`SHA256:…`, as ssh-keygen -l"})
    createdAt = Str(required=True)
    lastUsedAt = Str(
        required=True,
        allow_none=True,
        metadata={"description": "its last SSH sign-in, moved at most once a minute"},
    )


class DeployKeySchema(KeySchema):
    readOnly = Bool(required=True, metadata={"description": "true: it clones, never pushes"})


class KeyCreateSchema(Base):
    title = Str(
        load_default=None,
        validate=[validate.Length(min=1, max=100), _title],
        metadata={"description": "absent: the key's comment, or its kind"},
    )
    key = Str(
        required=True,
        validate=validate.Length(min=1, max=MAX_LINE),
        metadata={"description": _KEY_DOC},
    )


class DeployKeyCreateSchema(KeyCreateSchema):
    readOnly = Bool(load_default=True, metadata={"description": "default true, as on GitHub"})


class KeyEnvelopeSchema(Base):
    key = Nested(KeySchema, required=True)


class KeyListSchema(Base):
    keys = List(Nested(KeySchema), required=True)


class DeployKeyEnvelopeSchema(Base):
    key = Nested(DeployKeySchema, required=True)


class DeployKeyListSchema(Base):
    keys = List(Nested(DeployKeySchema), required=True)


class PublicKeySchema(Base):
    id = Str(required=True)
    key = Str(required=True)


class PublicKeyListSchema(Base):
    keys = List(Nested(PublicKeySchema), required=True)
