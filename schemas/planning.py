"""Milestones, labels and reactions."""

from __future__ import annotations

from marshmallow import fields, validate

from .common import Base, Bool, Int, List, Nested, PageQuerySchema, Str, UserSummarySchema
from .issues import LabelSchema, _since

STATE = validate.OneOf(["open", "closed"])
TITLE = validate.Length(min=1, max=256)
DESCRIPTION = validate.Length(max=10000)
COLOR = validate.Regexp(r"^[0-9a-fA-F]{6}$", error="must be 6 hex digits, without #")
# Commas split the list filter's labels; the rest as GitHub allows.
LABEL_NAME = validate.Regexp(r"^[^,\x00-\x1f]{1,50}$", error="must be 1-50 characters, no comma")
REACTIONS = ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes")


class DueOn(Str):
    """An ISO 8601 time or null, stored as UTC with a Z."""

    def _deserialize(self, value, attr, data, **kwargs) -> str:
        return _since(super()._deserialize(value, attr, data, **kwargs))


class MilestoneSchema(Base):
    id = Str(required=True)
    number = Int(required=True)
    title = Str(required=True)
    description = Str(required=True)
    state = Str(required=True, validate=STATE)
    dueOn = Str(allow_none=True, required=True)
    openIssues = Int(required=True, metadata={"description": "open issues and pull requests"})
    closedIssues = Int(required=True)
    creator = Nested(UserSummarySchema, allow_none=True, required=True)
    createdAt = Str(required=True)
    updatedAt = Str(required=True)
    closedAt = Str(allow_none=True, required=True)
    url = Str(required=True)


class MilestoneEnvelopeSchema(Base):
    milestone = Nested(MilestoneSchema, required=True)


class MilestoneListSchema(Base):
    milestones = List(Nested(MilestoneSchema), required=True)
    hasMore = Bool(required=True)


class MilestoneCreateSchema(Base):
    title = Str(required=True, validate=TITLE)
    description = Str(load_default="", validate=DESCRIPTION)
    dueOn = DueOn(load_default=None, allow_none=True, metadata={"description": "ISO 8601"})
    state = Str(load_default="open", validate=STATE)


class MilestoneUpdateSchema(Base):
    title = Str(validate=TITLE)
    description = Str(validate=DESCRIPTION)
    dueOn = DueOn(allow_none=True, metadata={"description": "ISO 8601; null: none"})
    state = Str(validate=STATE)


class MilestoneListQuerySchema(PageQuerySchema):
    state = fields.String(load_default="open", validate=validate.OneOf(["open", "closed", "all"]))
    sort = fields.String(load_default="due_on", validate=validate.OneOf(["due_on", "number"]))
    direction = fields.String(load_default="asc", validate=validate.OneOf(["asc", "desc"]))


class LabelEnvelopeSchema(Base):
    label = Nested(LabelSchema, required=True)


class LabelListSchema(Base):
    labels = List(Nested(LabelSchema), required=True)
    hasMore = Bool(required=True)


class LabelCreateSchema(Base):
    name = Str(required=True, validate=LABEL_NAME)
    color = Str(load_default="ededed", validate=COLOR)
    description = Str(load_default="", validate=validate.Length(max=100))


class LabelUpdateSchema(Base):
    name = Str(validate=LABEL_NAME)
    color = Str(validate=COLOR)
    description = Str(validate=validate.Length(max=100))


class ReactionSchema(Base):
    id = Str(required=True)
    content = Str(required=True, validate=validate.OneOf(REACTIONS))
    user = Nested(UserSummarySchema, required=True)
    createdAt = Str(required=True)


class ReactionEnvelopeSchema(Base):
    reaction = Nested(ReactionSchema, required=True)


class ReactionListSchema(Base):
    reactions = List(Nested(ReactionSchema), required=True)
    hasMore = Bool(required=True)


class ReactionCreateSchema(Base):
    content = Str(required=True, validate=validate.OneOf(REACTIONS))


class ReactionListQuerySchema(PageQuerySchema):
    content = fields.String(validate=validate.OneOf(REACTIONS))
