"""Second factors: TOTP enrolment, recovery codes, and the sign-in's second step."""

from __future__ import annotations

from marshmallow import validate

from .common import Base, Bool, Int, List, Nested, Str
from .passkeys import PasskeySchema
from .users import AuthResultSchema, UserSchema

CODE = validate.Length(min=1, max=64)


class TotpEnrolmentSchema(Base):
    secret = Str(required=True, metadata={"description": "base32; shown this once"})
    uri = Str(
        required=True,
        metadata={"description": "otpauth://totp/hubsvc:<user>?secret=…&issuer=hubsvc"},
    )
    qrSvg = Str(
        required=True,
        metadata={
            "description": "uri as a QR code: an SVG document (image/svg+xml), drawn by segno"
        },
    )


class CodeSchema(Base):
    code = Str(required=True, validate=CODE, load_only=True)


class RecoveryCodesSchema(Base):
    recoveryCodes = List(Str(), required=True, metadata={"description": "shown this once"})


class TotpRemovalSchema(Base):
    currentPassword = Str(required=True, validate=validate.Length(max=1024), load_only=True)
    code = Str(required=True, validate=CODE, load_only=True)


class TwoFactorStateSchema(Base):
    totp = Bool(required=True)
    webauthn = List(Nested(PasskeySchema), required=True)
    recoveryCodesLeft = Int(required=True)


class SignInResultSchema(AuthResultSchema):
    """A sign-in: the user and token, or (a second factor owed) the challenge."""

    user = Nested(UserSchema)
    token = Str(metadata={"description": "bearer token; also set in the session cookie"})
    twoFactorRequired = Bool()
    challenge = Str(metadata={"description": "for POST /auth/sign-in/2fa; five minutes, once"})
    methods = List(Str(), metadata={"description": "of totp, webauthn, recovery"})


class SecondFactorSchema(Base):
    challenge = Str(required=True, validate=validate.Length(min=1, max=200))
    code = Str(required=True, validate=CODE, load_only=True)
