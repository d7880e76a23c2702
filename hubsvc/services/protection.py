"""Protected branches at work: what they refuse of a push, and what a merge still needs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from ..git.files import REPO_FILES
from ..keys import STORE
from ..store.protection import matches
from ..web.permissions import allows
from .codeowners import owner_problems


def exempt(rule: dict[str, Any], role: str | None) -> bool:
    """Whether the repository's admins pass this rule's pull request, review and status parts."""
    return not rule["enforce_admins"] and allows(role, "admin")


ZERO = "0" * 40


async def ref_problems(
    rules: list[dict[str, Any]],
    role: str | None,
    updates: list[tuple[str, str, str]],
    is_ancestor: Callable[[str, str], Awaitable[bool]],
) -> list[str]:
    """What the rules refuse of a push's ref updates (old, new, ref): one line each."""
    problems = []
    for old, new, ref in updates:
        if not ref.startswith("refs/heads/"):
            continue
        branch = ref.removeprefix("refs/heads/")
        for rule in rules:
            if not matches(rule["pattern"], branch):
                continue
            where = f"{branch} is protected"
            named = f"(rule {rule['pattern']})"
            if new == ZERO:
                if not rule["allow_deletions"]:
                    problems.append(f"{where}: it cannot be deleted {named}")
            elif rule["require_pr"] and not exempt(rule, role):
                problems.append(f"{where}: changes must go through a pull request {named}")
            elif old != ZERO and not rule["allow_force_pushes"] and not await is_ancestor(old, new):
                problems.append(f"{where}: force-pushes are not allowed {named}")
    return problems


async def merge_problems(
    app: web.Application, repo: dict[str, Any], pull: dict[str, Any], base_oid: str, head_oid: str
) -> list[str]:
    """What the base branch's rules still need before this pull request may merge."""
    problems: list[str] = []
    latest: dict[str, str] | None = None
    approvals: int | None = None
    owners_checked = False
    for rule in await app[STORE].protection.for_branch(repo["id"], pull["base"]):
        if exempt(rule, repo.get("role")):
            continue
        where = f"{pull['base']} is protected (rule {rule['pattern']})"
        if rule["require_pr"] and rule["approvals"]:
            if approvals is None:
                approvals = len(
                    await app[STORE].reviews.approvers(pull["id"], repo["id"], head_oid)
                )
            if approvals < rule["approvals"]:
                problems.append(
                    f"{where}: approvals {approvals} of {rule['approvals']} "
                    "(from people with write access, on the current head)"
                )
        if rule["require_pr"] and rule["code_owner_reviews"] and not owners_checked:
            # One look for all rules: the owners' approvals do not depend on the rule.
            owners_checked = True
            problems += await owner_problems(app, repo, pull, base_oid, head_oid, where)
        if rule["contexts"]:
            if latest is None:
                rows = await app[STORE].statuses.latest(repo["id"], head_oid)
                latest = {r["context"]: r["state"] for r in rows}
            for context in rule["contexts"]:
                state = latest.get(context, "expected")
                if state != "success":
                    problems.append(f"{where}: required status {context} is {state}")
        if rule["strict"] and not await app[REPO_FILES].run(
            repo["id"], lambda g: g.is_ancestor(base_oid, head_oid)
        ):
            problems.append(f"{where}: the head is not up to date with {pull['base']}")
    return problems


async def required_approvals(
    app: web.Application, repo: dict[str, Any], bases: set[str]
) -> dict[str, int]:
    """Approvals the protection rules of each base branch require (0: none)."""
    rules = await app[STORE].protection.rules(repo["id"]) if bases else []
    return {
        base: max(
            [r["approvals"] for r in rules if r["require_pr"] and matches(r["pattern"], base)],
            default=0,
        )
        for base in bases
    }


def review_decision(row: dict[str, Any], required: int) -> str | None:
    """GitHub's reviewDecision: writers' latest verdicts against what protection requires."""
    if row["changes_requested"]:
        return "CHANGES_REQUESTED"
    if row["approvals"] and row["approvals"] >= required:
        return "APPROVED"
    return "REVIEW_REQUIRED" if required else None
