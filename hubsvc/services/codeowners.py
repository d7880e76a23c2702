"""Review requests and CODEOWNERS: who is asked to review, and whose approval a merge needs.

CODEOWNERS is GitHub's: the first of `.github/CODEOWNERS`, `CODEOWNERS`,
`docs/CODEOWNERS` on the base branch; each line a gitignore-style pattern and its owners
(`@user`, `@org/team`; e-mail addresses are not resolved); the last matching line wins,
and a line with no owners leaves its paths unowned.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from aiohttp import web

from ..errors import NotFound
from ..git.files import REPO_FILES
from ..git.objects import RANGE_FILES
from ..keys import CONFIG, STORE
from ..web.present import pull as present_pull
from ..web.present import team_summary, user_summary
from .publish import make_event

Rule = tuple[re.Pattern[str], tuple[str, ...]]


def _regex(pattern: str) -> re.Pattern[str]:
    """A CODEOWNERS pattern as a regex over a repository path (gitignore's rules)."""
    body = pattern.strip("/")
    # A slash at the start or inside anchors at the root; else any directory level.
    anchored = pattern.startswith("/") or "/" in body
    out, i = "", 0
    while i < len(body):
        if body.startswith("**/", i):
            out, i = out + "(?:.*/)?", i + 3
        elif body.startswith("/**", i) and i + 3 == len(body):
            out, i = out + "/.*", i + 3
        elif body.startswith("**", i):
            out, i = out + ".*", i + 2
        elif body[i] == "*":
            out, i = out + "[^/]*", i + 1
        elif body[i] == "?":
            out, i = out + "[^/]", i + 1
        else:
            out, i = out + re.escape(body[i]), i + 1
    # A pattern naming a directory owns everything under it; `docs/*` only its files.
    tail = "" if pattern.endswith("/*") else "(?:/.*)?"
    if pattern.endswith("/") and not pattern.endswith("/*"):
        tail = "/.*"
    return re.compile(("^" if anchored else "^(?:.*/)?") + out + tail + "$")


@functools.lru_cache(maxsize=64)
def parse(text: str) -> tuple[Rule, ...]:
    """The rules of a CODEOWNERS file, in order."""
    rules = []
    for line in text.splitlines():
        words = line.split("#", 1)[0].split() if not line.lstrip().startswith("\\#") else []
        if not words:
            continue
        try:
            rules.append((_regex(words[0]), tuple(w for w in words[1:] if w.startswith("@"))))
        except re.error:
            continue  # a line GitHub would mark as an error owns nothing
    return tuple(rules)


def owners_of(rules: tuple[Rule, ...], path: str) -> tuple[str, ...]:
    """The owners of a path: the last matching rule's."""
    for regex, owners in reversed(rules):
        if regex.match(path):
            return owners
    return ()


async def path_owners(app: web.Application, repo_id: int, base: str, head: str) -> dict[str, tuple]:
    """{changed path: its owners} for a pull request's range, by the base's CODEOWNERS."""
    files = app[REPO_FILES]
    text = await files.run(repo_id, lambda g: g.codeowners(base))
    if not text:
        return {}
    rules = parse(text)
    try:
        changed, _ = await files.run(
            repo_id, lambda g: g.range_files(base, head, RANGE_FILES, 0, max_bytes=0)
        )
    except NotFound:  # no common ancestor: nothing GitHub would call changed paths
        return {}
    owned = {}
    for item in changed:
        for path in {item["path"], item.get("oldPath") or item["path"]}:
            owners = owners_of(rules, path)
            if owners:
                owned[path] = owners
    return owned


async def resolve(
    app: web.Application, repo: dict[str, Any], owners: set[str]
) -> tuple[dict[int, dict], dict[int, dict]]:
    """The people ({id: user}) and the owning organization's teams ({id: team}) named."""
    store = app[STORE]
    names = [o[1:] for o in owners if "/" not in o]
    people = await store.users.by_usernames(names)
    teams: dict[int, dict] = {}
    for owner in owners:
        org, _, name = owner[1:].partition("/")
        if name and repo.get("owner_is_org") and org.lower() == repo["owner_username"].lower():
            team = await store.orgs.team(repo["owner_id"], name)
            if team is not None:
                teams[team["id"]] = {**team, "org": repo["owner_username"]}
    return {u["id"]: u for u in people.values()}, teams


async def request_reviews(
    app: web.Application,
    repo: dict[str, Any],
    pull: dict[str, Any],
    actor: dict[str, Any] | None,
    people: dict[int, dict],
    teams: dict[int, dict],
) -> None:
    """Ask people and teams to review, one review_requested event each for the new ones."""
    base = app[STORE]

    def events(result: tuple[list[int], list[int]]) -> list:
        users, team_ids = result
        shown = present_pull(app_base(app), repo, pull)
        made = [
            make_event(
                app,
                repo,
                "pull_request",
                {
                    "action": "review_requested",
                    "pullRequest": shown,
                    "requestedReviewer": user_summary(app_base(app), people[u]),
                },
                actor,
            )
            for u in users
        ]
        made += [
            make_event(
                app,
                repo,
                "pull_request",
                {
                    "action": "review_requested",
                    "pullRequest": shown,
                    "requestedTeam": team_summary(teams[t]),
                },
                actor,
            )
            for t in team_ids
        ]
        return made

    await base.reviews.request(
        pull["id"],
        list(people),
        list(teams),
        actor["id"] if actor else None,
        emit=events,
    )


def app_base(app: web.Application) -> str:
    """The configured base URL (links in events)."""
    return app[CONFIG].base_url


async def request_owners(
    app: web.Application,
    repo: dict[str, Any],
    pull: dict[str, Any],
    actor: dict[str, Any] | None,
    base: str,
    head: str,
) -> None:
    """Ask the code owners of the changed paths who are not asked yet, have not reviewed,
    may read the repository and are not its author."""
    owned = await path_owners(app, repo["id"], base, head)
    if not owned:
        return
    people, teams = await resolve(app, repo, {o for owners in owned.values() for o in owners})
    store = app[STORE]
    audience = await store.repos.audience(repo["id"])
    done = await store.reviews.reviewed_by(pull["id"])
    people = {
        uid: u
        for uid, u in people.items()
        if uid != pull["author_id"]
        and uid not in done
        and audience is not None
        and (audience.readers is None or uid in audience.readers)
    }
    if people or teams:
        await request_reviews(app, repo, pull, actor, people, teams)


async def owner_problems(
    app: web.Application,
    repo: dict[str, Any],
    pull: dict[str, Any],
    base: str,
    head: str,
    where: str,
) -> list[str]:
    """What requireCodeOwnerReviews still needs: an owner's approval of each owned path."""
    owned = await path_owners(app, repo["id"], base, head)
    if not owned:
        return []
    store = app[STORE]
    approvers = set(await store.reviews.approvers(pull["id"], repo["id"], head))
    waiting: dict[tuple, list[str]] = {}
    members: dict[str, set[int]] = {}
    for path, owners in sorted(owned.items()):
        allowed: set[int] = set()
        for owner in owners:
            if owner not in members:
                org, _, name = owner[1:].partition("/")
                if name:
                    members[owner] = set(await store.notifications.team_member_ids(org, name))
                else:
                    found = await store.users.by_usernames([org])
                    members[owner] = {u["id"] for u in found.values()}
            allowed |= members[owner]
        if not allowed & approvers:
            waiting.setdefault(owners, []).append(path)
    return [
        f"{where}: changes to {', '.join(paths[:5])}{' and more' if len(paths) > 5 else ''} "
        f"need an approval from a code owner ({', '.join(owners)})"
        for owners, paths in waiting.items()
    ]
