"""Comparing two commits: ahead/behind, the commits and the files between them."""

from __future__ import annotations

from aiohttp import web

from schemas.issues import CompareSchema

from ..errors import BadRequest, NotFound
from ..git.files import REPO_FILES
from ..git.repo import GitRepo
from ..keys import CONFIG
from ..policy import requires
from ..web.openapi import doc
from ..web.permissions import load_repo
from ..web.rest import json_response

routes = web.RouteTableDef()
COMPARE_COMMITS = 250  # as GitHub's compare
COMPARE_FILES = 300


def _compare(g: GitRepo, base_rev: str, head_rev: str, max_bytes: int) -> dict:
    """The comparison, in one thread hop."""
    base, head = g.resolve(base_rev), g.resolve(head_rev)
    if base is None:
        raise NotFound(f"base not found: {base_rev}")
    if head is None:
        raise NotFound(f"head not found: {head_rev}")
    merge_base = g.merge_base(base, head)
    if merge_base is None:
        raise NotFound("no common ancestor between base and head")
    ahead, behind = g.ahead_behind(base, head)
    commits, total_commits = g.range_commits(base, head, COMPARE_COMMITS, 0, COMPARE_COMMITS)
    files, total_files = g.range_files(base, head, COMPARE_FILES, 0, COMPARE_FILES, max_bytes)
    status = (
        "identical"
        if not ahead and not behind
        else "ahead"
        if not behind
        else "behind"
        if not ahead
        else "diverged"
    )
    return {
        "status": status,
        "aheadBy": ahead,
        "behindBy": behind,
        "baseCommit": base,
        "headCommit": head,
        "mergeBaseCommit": merge_base,
        "totalCommits": total_commits,
        "commits": commits,
        "totalFiles": total_files,
        "files": files,
    }


@routes.get("/api/repositories/{owner}/{name}/compare/{spec:.+}")
@doc(
    "Compare two branches, tags or commits: GET …/compare/{base}...{head}",
    responses={200: CompareSchema},
    errors=(400, 404),
    public=True,
    tag="git",
    description="As GitHub's compare: aheadBy/behindBy count the commits each side has that "
    "the other lacks; commits are those of head missing from base, oldest first "
    f"(at most {COMPARE_COMMITS}); files are the three-dot diff from the merge "
    f"base to head (at most {COMPARE_FILES}, with patches cut as those of a pull "
    "request's files). base and head are "
    "branch or tag names or commit ids (7+ hex characters). Unrelated histories "
    "are 404.",
)
@requires("repo.read")
async def compare(request: web.Request) -> web.Response:
    repo = await load_repo(request)
    base, sep, head = request.match_info["spec"].partition("...")
    if not sep or not base or not head:
        raise BadRequest("compare: expected {base}...{head}")
    budget = request.app[CONFIG]["git"]["max_diff_bytes"]
    data = await request.app[REPO_FILES].run(repo["id"], lambda g: _compare(g, base, head, budget))
    return json_response(data)
