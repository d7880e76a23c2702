"""Search over repositories, issues, pull requests and users."""

from __future__ import annotations

from aiohttp import web

from schemas.search import SearchQuerySchema, SearchResultsSchema

from ..errors import BadRequest
from ..keys import CONFIG, STORE
from ..policy import requires
from ..web import present
from ..web.auth import current_user
from ..web.openapi import doc
from ..web.permissions import check_action, readable_by
from ..web.rest import json_response, read_query, shared

routes = web.RouteTableDef()
SNIPPET = 200


def _issue_result(base: str, row: dict, is_pull: bool) -> dict:
    repo = {"id": row["repo_id"], "owner_username": row["repo_owner"], "name": row["repo_name"]}
    data = present.pull(base, repo, row) if is_pull else present.issue(base, repo, row)
    data.update(type="pull_request" if is_pull else "issue", description=row["body"][:SNIPPET])
    return data


@routes.get("/api/search")
@doc(
    "Ranked full-text search; private hits only for those who may read them",
    query=SearchQuerySchema,
    responses={200: SearchResultsSchema},
    public=True,
    tag="search",
    description="Every result has type, id, title, description, url, createdAt, plus the "
    "fields of its kind; issues and pulls also carry repository {owner, name}. "
    "Names, usernames, titles and texts are split into words at every character "
    "that is not a letter or digit (`-`, `_`, `.`, spaces...), without regard to "
    "case or accents. Every space-separated part of q must match: a single word "
    "as a word prefix (`coo` and `be71b57345` find `my-cool-tool` and "
    "`vault-be71b57345`), a part with punctuation as its words in that order, "
    'the last one a prefix (`my-cool-tool`, `ada-love`); `"my cool tool"` in '
    "double quotes is an exact phrase. For repositories, a q that is one "
    "`owner/name` also finds the owner's repositories by the words of name. "
    "Other characters, AND, OR, NOT and NEAR are plain text; at most 10 words "
    "count. Name, username and title matches rank above description and body "
    "matches.",
)
@requires("repo.read")
async def search(request: web.Request) -> web.Response:
    query = read_query(request, shared(SearchQuerySchema))
    if not query["q"].strip():
        raise BadRequest("q: must not be empty")
    user = current_user(request)
    viewer = user["id"] if user else 0
    base = request.app[CONFIG].base_url
    store = request.app[STORE].search
    kind, text, limit, offset = query["type"], query["q"], query["limit"], query["offset"]
    if kind == "repositories":
        rows, more = await store.repositories(text, viewer, limit, offset, readable_by(request))
        results = []
        for row in rows:
            data = present.repo(base, row, user)
            data.update(type="repository", title=data["fullName"])
            results.append(data)
    elif kind in ("issues", "pulls"):
        check_action(request, "issues.read")
        rows, more = await store.issues(
            text, viewer, kind == "pulls", limit, offset, readable_by(request)
        )
        results = [_issue_result(base, row, kind == "pulls") for row in rows]
    else:
        rows, more = await store.users(text, limit, offset)
        results = [
            {
                **present.user_summary(base, row),
                "type": "user",
                "title": row["username"],
                "description": row["name"],
                "url": present.user_url(base, row["username"]),
                "createdAt": row["created_at"],
            }
            for row in rows
        ]
    return json_response({"results": results, "hasMore": more, "query": text})
