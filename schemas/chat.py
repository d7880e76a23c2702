"""Chat account linking (generate, verify, unlink, status, the link page) and notices."""

from __future__ import annotations

from marshmallow import fields, validate

from .common import Base, Bool, Email, Int, List, Nested, RepoRefSchema, Str, UserSummarySchema

# Printable text only: a chat id is shown in e-mails and on the link page. "(?!\n)": in
# Python "$" also matches before a final newline.
CHAT_ID = [
    validate.Length(1, 64),
    validate.Regexp(r"^[^\x00-\x1f\x7f]*(?!\n)$", error="must not contain control characters"),
]


class GenerateSchema(Base):
    chatId = Str(
        required=True, validate=CHAT_ID, metadata={"description": "the chat platform's user id"}
    )
    serviceEmail = Email(
        validate=validate.Length(max=254),
        metadata={
            "description": "e-mail a verification link to the account with this address "
            "(the answer is the same whether or not one exists)"
        },
    )


class GenerateResultSchema(Base):
    success = Bool(required=True)
    token = Str(required=True, metadata={"description": "64 lowercase hex characters, single use"})
    expiresAt = Str(metadata={"description": "when the token stops working"})
    url = Str(metadata={"format": "uri", "description": "the verification page for this token"})


class VerifySchema(Base):
    token = Str(required=True, validate=validate.Length(1, 128))
    serviceUserId = Str(
        required=True,
        validate=validate.Length(1, 32),
        metadata={"description": "id of the signed-in user, who is linked"},
    )


class VerifyResultSchema(Base):
    success = Bool(required=True)
    linked = Bool(required=True)
    chatId = Str()
    user = Nested(UserSummarySchema, required=True)


class UnlinkSchema(Base):
    chatId = Str(required=True, validate=CHAT_ID)


class UnlinkResultSchema(Base):
    success = Bool(required=True)
    unlinked = Bool(required=True, metadata={"description": "whether a link was removed"})


class StatusSchema(Base):
    linked = Bool(required=True)
    verified = Bool(required=True)
    user = Nested(UserSummarySchema, required=True, allow_none=True)


class LinkPageQuerySchema(Base):
    token = fields.String(load_default="", metadata={"description": "the link token"})


MAX_WAIT = 30  # seconds a poll may wait: below the usual 60 s proxy read timeouts


class NoticeQuerySchema(Base):
    limit = fields.Integer(
        load_default=50,
        validate=validate.Range(1, 100),
        metadata={"description": "at most this many notices (1 to 100)"},
    )
    wait = fields.Integer(
        load_default=0,
        validate=validate.Range(0, MAX_WAIT),
        metadata={
            "description": f"with none queued, wait up to this many seconds (0 to {MAX_WAIT}) "
            "for one before answering"
        },
    )


class NoticeSchema(Base):
    id = Int(required=True, metadata={"description": "increasing; acknowledge through it"})
    chatId = Str(
        required=True,
        metadata={
            "description": "send it to this chat user: the account's most recently verified link"
        },
    )
    username = Str(required=True, metadata={"description": "the account it is for"})
    reason = Str(required=True, metadata={"description": 'e.g. "you were assigned issue #3"'})
    actor = Str(required=True, allow_none=True, metadata={"description": "who did it"})
    title = Str(required=True)
    number = Int(required=True)
    url = Str(required=True, metadata={"format": "uri"})
    repository = Nested(RepoRefSchema, required=True)
    type = Str(required=True, metadata={"enum": ["issue", "pull_request"]})
    createdAt = Str(required=True, metadata={"description": "when the event happened"})


class NoticeListSchema(Base):
    notifications = List(Nested(NoticeSchema), required=True)
    hasMore = Bool(required=True)


class AckSchema(Base):
    through = Int(
        required=True,
        validate=validate.Range(min=1),
        metadata={"description": "the id of the last notice handled: it and every older one go"},
    )


class AckResultSchema(Base):
    acknowledged = Int(required=True, metadata={"description": "how many notices went"})
