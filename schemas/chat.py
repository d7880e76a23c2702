"""Chat account linking: generate, verify, unlink, status and the link page."""

from __future__ import annotations

from marshmallow import fields, validate

from .common import Base, Bool, Email, Nested, Str, UserSummarySchema

# Printable text only: a chat id is shown in e-mails and on the link page. "(?!\n)": in
# Python "$" also matches before a final newline.
CHAT_ID = [validate.Length(1, 64), validate.Regexp(r"^[^\x00-\x1f\x7f]*(?!\n)$",
                                                   error="must not contain control characters")]


class GenerateSchema(Base):
    chatId = Str(required=True, validate=CHAT_ID,
                 metadata={"description": "the chat platform's user id"})
    serviceEmail = Email(validate=validate.Length(max=254), metadata={
        "description": "e-mail a verification link to the account with this address "
                       "(the answer is the same whether or not one exists)"})


class GenerateResultSchema(Base):
    success = Bool(required=True)
    token = Str(required=True, metadata={"description": "64 lowercase hex characters, "
                                         "single use"})
    expiresAt = Str(metadata={"description": "when the token stops working"})
    url = Str(metadata={"format": "uri",
                        "description": "the verification page for this token"})


class VerifySchema(Base):
    token = Str(required=True, validate=validate.Length(1, 128))
    serviceUserId = Str(required=True, validate=validate.Length(1, 32), metadata={
        "description": "id of the signed-in user, who is linked"})


class VerifyResultSchema(Base):
    success = Bool(required=True)
    linked = Bool(required=True)
    chatId = Str()
    user = Nested(UserSummarySchema, required=True)


class UnlinkSchema(Base):
    chatId = Str(required=True, validate=CHAT_ID)


class UnlinkResultSchema(Base):
    success = Bool(required=True)
    unlinked = Bool(required=True,
                    metadata={"description": "whether a link was removed"})


class StatusSchema(Base):
    linked = Bool(required=True)
    verified = Bool(required=True)
    user = Nested(UserSummarySchema, required=True, allow_none=True)


class LinkPageQuerySchema(Base):
    token = fields.String(load_default="", metadata={"description": "the link token"})
