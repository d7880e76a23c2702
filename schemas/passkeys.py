"""Passkeys and security keys (WebAuthn) as a second factor."""

from __future__ import annotations

from marshmallow import validate

from .common import Base, Dict, List, Nested, Str

_CREDENTIAL_DOC = (
    "what the browser's PublicKeyCredential.toJSON() gives (id, rawId, type, response "
    "with its base64url fields)"
)
OPTIONS_DOC = (
    "WebAuthn options as py_webauthn's options_to_json writes them: binary fields "
    "(challenge, user.id, credential ids) are base64url"
)


class PasskeySchema(Base):
    id = Str(required=True)
    name = Str(required=True)
    credentialId = Str(required=True, metadata={"description": "base64url"})
    transports = List(Str(), required=True)
    createdAt = Str(required=True)
    lastUsedAt = Str(required=True, allow_none=True)


class PasskeyListSchema(Base):
    webauthn = List(Nested(PasskeySchema), required=True)


class PasskeyEnvelopeSchema(Base):
    webauthn = Nested(PasskeySchema, required=True)


class PasskeyRegisterSchema(Base):
    credential = Dict(required=True, metadata={"description": _CREDENTIAL_DOC})
    name = Str(
        load_default="Passkey",
        validate=validate.Length(min=1, max=100),
        metadata={"description": "how the list shows it; default Passkey"},
    )


class PasskeyRemoveSchema(Base):
    currentPassword = Str(required=True, load_only=True)


class PasskeySignInSchema(Base):
    challenge = Str(
        required=True,
        validate=validate.Length(min=1, max=200),
        metadata={"description": "the challenge POST /auth/sign-in answered"},
    )


class PasskeySignInFinishSchema(PasskeySignInSchema):
    credential = Dict(required=True, metadata={"description": _CREDENTIAL_DOC})
