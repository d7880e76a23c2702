"""Issues, pull requests and comments."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from marshmallow import ValidationError, fields, post_load, validate, validates_schema

from .common import Base, Bool, Int, List, Nested, Offset, RepoRefSchema, Str, UserSummarySchema
from .git import CommitSchema, DiffFileSchema
from .repos import BRANCH_DOC, branch_name

TITLE = validate.Length(min=1, max=256)
BODY = validate.Length(max=65536)
LABEL = Str(validate=validate.Length(min=1, max=50))
USERNAME = Str(validate=validate.Length(min=1, max=39))
MILESTONE = Int(
    allow_none=True,
    validate=validate.Range(1, 10**12 - 1),
    metadata={"description": "a milestone's number in this repository (null: none); triage"},
)


class ReactionsSummarySchema(Base):
    totalCount = Int(required=True)
    plus_one = Int(data_key="+1", required=True)
    minus_one = Int(data_key="-1", required=True)
    laugh = Int(required=True)
    confused = Int(required=True)
    heart = Int(required=True)
    hooray = Int(required=True)
    rocket = Int(required=True)
    eyes = Int(required=True)


class LabelSchema(Base):
    id = Str(allow_none=True, required=True)
    name = Str(required=True)
    color = Str(required=True, metadata={"description": "6 hex digits, no #"})
    description = Str(required=True)


class MilestoneBriefSchema(Base):
    id = Str(required=True)
    number = Int(required=True)
    title = Str(required=True)
    state = Str(required=True)
    dueOn = Str(allow_none=True, required=True)


BODY_HTML = {
    "description": "the body rendered as sanitized HTML, #N and @user linked: only when "
    "Accept names application/vnd.github.html+json or …full+json (body stays beside it)"
}


class IssueSchema(Base):
    id = Str(required=True)
    number = Int(required=True)
    title = Str(required=True)
    body = Str(required=True)
    bodyHtml = Str(metadata=BODY_HTML)
    state = Str(required=True)
    labels = List(Str(), required=True, metadata={"description": "label names"})
    labelObjects = List(
        Nested(LabelSchema),
        metadata={"description": "the labels' objects, in the order of labels"},
    )
    milestone = Nested(MilestoneBriefSchema, allow_none=True)
    reactions = Nested(ReactionsSummarySchema)
    assignees = List(Nested(UserSummarySchema), required=True)
    author = Nested(UserSummarySchema, allow_none=True, required=True)
    commentCount = Int(required=True)
    createdAt = Str(required=True)
    updatedAt = Str(required=True)
    closedAt = Str(allow_none=True, required=True)
    repository = Nested(RepoRefSchema)
    url = Str(
        metadata={
            "description": "a link that opens: the page under [server] web_url when set "
            "(GitHub-shaped: {web_url}/owner/name, …/issues/3, …/pulls/3, {web_url}/username), "
            "else the API resource ({base_url}/api/repositories/owner/name, …/issues/3, "
            "…/pulls/3, {base_url}/api/users/username)"
        }
    )


class CommentSchema(Base):
    id = Str(required=True)
    body = Str(required=True)
    bodyHtml = Str(metadata=BODY_HTML)
    author = Nested(UserSummarySchema, allow_none=True, required=True)
    reactions = Nested(ReactionsSummarySchema)
    createdAt = Str(required=True)
    updatedAt = Str(required=True)
    edited = Bool(metadata={"description": "true once the body was changed"})


class TeamSummarySchema(Base):
    id = Str(required=True)
    name = Str(required=True)
    organization = Str(required=True)


class PullSchema(IssueSchema):
    head = Str(required=True)
    base = Str(required=True)
    headRepository = Nested(RepoRefSchema, allow_none=True, required=True)
    headSha = Str(allow_none=True)
    baseSha = Str(allow_none=True)
    status = Str(
        allow_none=True,
        metadata={
            "description": "the head commit's combined status (pending, success, failure); null: none"
        },
    )
    reviewDecision = Str(
        allow_none=True,
        validate=validate.OneOf(["APPROVED", "CHANGES_REQUESTED", "REVIEW_REQUIRED"]),
        metadata={
            "description": "as GitHub's GraphQL: CHANGES_REQUESTED when a writer's latest "
            "verdict asks for changes; APPROVED when writers' approvals of the current head "
            "reach what the base branch's protection requires (at least one); "
            "REVIEW_REQUIRED when protection requires approvals not yet given; else null. "
            "Not in events (it depends on the rules when read)"
        },
    )
    merged = Bool(required=True)
    mergeable = Bool(
        allow_none=True,
        required=True,
        metadata={"description": "null while unknown or once merged"},
    )
    mergedAt = Str(allow_none=True, required=True)
    mergedBy = Nested(UserSummarySchema, allow_none=True, required=True)
    mergeCommit = Str(allow_none=True, required=True)
    mergeProblems = List(
        Str(),
        allow_none=True,
        metadata={
            "description": "what holds the merge now, for the caller, as the merge would "
            "answer it (a conflict, the base branch's protection: approvals, required "
            "statuses, the head behind the base); [] when it may merge; null when merged "
            "or closed. Only in GET of one pull request"
        },
    )
    requestedReviewers = List(
        Nested(UserSummarySchema),
        required=True,
        metadata={"description": "people asked to review who have not reviewed since"},
    )
    requestedTeams = List(
        Nested(TeamSummarySchema),
        required=True,
        metadata={"description": "teams asked to review, until one of their members reviews"},
    )


class IssueEnvelopeSchema(Base):
    issue = Nested(IssueSchema, required=True)


class IssueWithCommentsSchema(Base):
    issue = Nested(IssueSchema, required=True)
    comments = List(Nested(CommentSchema), required=True)
    hasMore = Bool(metadata={"description": "more comments than shown"})


class PullEnvelopeSchema(Base):
    pullRequest = Nested(PullSchema, required=True)


class PullWithCommentsSchema(Base):
    pullRequest = Nested(PullSchema, required=True)
    comments = List(Nested(CommentSchema), required=True)
    hasMore = Bool()


class IssueListSchema(Base):
    issues = List(Nested(IssueSchema), required=True)
    hasMore = Bool(required=True)


class PullListSchema(Base):
    pullRequests = List(Nested(PullSchema), required=True)
    hasMore = Bool(required=True)


class CommentEnvelopeSchema(Base):
    comment = Nested(CommentSchema, required=True)


class CommentListSchema(Base):
    comments = List(Nested(CommentSchema), required=True)
    hasMore = Bool(required=True)


class IssueCreateSchema(Base):
    title = Str(required=True, validate=TITLE)
    body = Str(load_default="", validate=BODY)
    labels = List(LABEL, load_default=list, validate=validate.Length(max=20))
    assignees = List(USERNAME, load_default=list, validate=validate.Length(max=10))
    milestone = MILESTONE


class IssueUpdateSchema(Base):
    title = Str(validate=TITLE)
    body = Str(validate=BODY)
    state = Str(validate=validate.OneOf(["open", "closed"]))
    labels = List(LABEL, validate=validate.Length(max=20))
    assignees = List(USERNAME, validate=validate.Length(max=10))
    milestone = MILESTONE


class CommentCreateSchema(Base):
    body = Str(required=True, validate=validate.Length(min=1, max=65536))


def _since(value: str) -> str:
    """An ISO 8601 time as the stored form (UTC, whole seconds, rounded up)."""
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise ValidationError("must be an ISO 8601 time such as 2024-05-01T12:00:00Z") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    moment = moment.astimezone(UTC)
    if moment.microsecond:  # stored times have whole seconds: 12:00:00.5 starts at 12:00:01
        moment = moment.replace(microsecond=0) + timedelta(seconds=1)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


class _ListQuerySchema(Base):
    """The filters the issue and pull request lists share, as GitHub names them."""

    limit = fields.Integer(load_default=30, validate=validate.Range(1, 100))
    offset = Offset()
    labels = fields.String(
        validate=validate.Length(max=1100),
        metadata={
            "description": "comma-separated label names; every one must be on the item "
            "(ignoring case)"
        },
    )
    assignee = fields.String(
        validate=validate.Length(min=1, max=39),
        metadata={
            "description": "a username (`me`: the caller), `none` for unassigned or `*` for "
            "assigned to anyone"
        },
    )
    author = fields.String(
        validate=validate.Length(min=1, max=39),
        metadata={"description": "the author's username (`me`: the caller)"},
    )
    creator = fields.String(
        validate=validate.Length(min=1, max=39),
        metadata={"description": "GitHub's name for author"},
    )
    milestone = fields.String(
        validate=validate.Regexp(r"^(none|\*|[1-9][0-9]{0,11})$"),
        metadata={"description": "a milestone's number, `none` for none or `*` for any"},
    )
    since = fields.String(
        metadata={"description": "ISO 8601 time: only items updated at or after it"}
    )
    sort = fields.String(
        load_default="created", validate=validate.OneOf(["created", "updated", "comments"])
    )
    direction = fields.String(load_default="desc", validate=validate.OneOf(["asc", "desc"]))
    ignoreUnknown = fields.Boolean(
        load_default=False,
        metadata={
            "description": "true: unknown query parameters and unknown state values are "
            "ignored instead of answering 400"
        },
    )

    @post_load
    def _parse(self, data, **_):
        if "labels" in data:
            labels = [label.strip() for label in data["labels"].split(",") if label.strip()]
            if len(labels) > 20 or any(len(label) > 50 for label in labels):
                raise ValidationError("at most 20 labels of at most 50 characters", "labels")
            data["labels"] = labels
        if "since" in data:
            try:
                data["since"] = _since(data["since"])
            except ValidationError as exc:
                raise ValidationError(exc.messages, "since") from None
        if "creator" in data:
            data.setdefault("author", data.pop("creator"))
        return data


class IssueListQuerySchema(_ListQuerySchema):
    state = fields.String(load_default="open", validate=validate.OneOf(["open", "closed", "all"]))


class PullListQuerySchema(_ListQuerySchema):
    state = fields.String(
        load_default="open", validate=validate.OneOf(["open", "closed", "merged", "all"])
    )


class PullFileListSchema(Base):
    files = List(Nested(DiffFileSchema), required=True)
    hasMore = Bool(required=True)
    totalFiles = Int(metadata={"description": "files changed (the list stops at 3000)"})


class PullCommitListSchema(Base):
    commits = List(Nested(CommitSchema), required=True)
    hasMore = Bool(required=True)
    totalCommits = Int(metadata={"description": "commits in the range (the list stops at 250)"})


class CompareSchema(Base):
    status = Str(
        required=True, validate=validate.OneOf(["identical", "ahead", "behind", "diverged"])
    )
    aheadBy = Int(required=True)
    behindBy = Int(required=True)
    baseCommit = Str(required=True)
    headCommit = Str(required=True)
    mergeBaseCommit = Str(allow_none=True, required=True)
    totalCommits = Int(required=True)
    commits = List(
        Nested(CommitSchema), required=True, metadata={"description": "oldest first, at most 250"}
    )
    totalFiles = Int(required=True)
    files = List(
        Nested(DiffFileSchema), required=True, metadata={"description": "at most 300, with patches"}
    )


class PullCreateSchema(Base):
    title = Str(required=True, validate=TITLE)
    body = Str(load_default="", validate=BODY)
    head = Str(required=True, validate=branch_name, metadata=BRANCH_DOC)
    base = Str(
        validate=branch_name, metadata={**BRANCH_DOC, "description": "default: the default branch"}
    )
    headRepository = Nested(
        RepoRefSchema,
        metadata={"description": "the fork the head branch lives in; default: this repository"},
    )
    assignees = List(USERNAME, load_default=list, validate=validate.Length(max=10))
    milestone = MILESTONE


class PullUpdateSchema(Base):
    title = Str(validate=TITLE)
    body = Str(validate=BODY)
    state = Str(validate=validate.OneOf(["open", "closed"]))
    base = Str(validate=branch_name, metadata=BRANCH_DOC)
    assignees = List(USERNAME, validate=validate.Length(max=10))
    milestone = MILESTONE


class MergeSchema(Base):
    method = Str(load_default="merge", validate=validate.OneOf(["merge", "squash", "fast-forward"]))
    message = Str(validate=validate.Length(min=1, max=65536))
    sha = Str(
        # Length too: Regexp's match lets "$" pass a trailing newline.
        validate=[
            validate.Length(equal=40),
            validate.Regexp(r"^[0-9a-fA-F]{40}$", error="must be a full 40-hex commit id"),
        ],
        metadata={
            "description": "the head commit the merge was reviewed at, as on GitHub: "
            "409 if the head is another commit now"
        },
    )

    @post_load
    def _lower_sha(self, data, **_):
        if "sha" in data:
            data["sha"] = data["sha"].lower()
        return data

    @validates_schema
    def _no_message_for_ff(self, data, **_):
        if data.get("method") == "fast-forward" and data.get("message"):
            raise ValidationError(
                "a fast-forward writes no commit, so it takes no message", "message"
            )
