"""An issue or pull request as the API presents it, read in one statement on either engine.

The row carries what hangs on it (assignees, label objects, reaction counts, a pull
request's review requests) as JSON columns, so a page, a search page or one issue is one
statement: on PostgreSQL each extra statement was a round trip to another process and
~0.35 ms of CPU on the two (benchmarks/README.md, issue 34 item 3).
"""

from __future__ import annotations

import functools
import json
from operator import itemgetter
from typing import Any

from .access import LEVELS, grants, level
from .engines import Conn, Row
from .labels import label_objects
from .reactions import ON_ITEM
from .reviews import writers_verdict
from .statuses import COMBINED, LATEST

# The checks only a pull request can make true are skipped for an issue (no head
# repository, no head commit, no reviews: only a pull request is reviewed); the CASE
# gives the value they would have had. Each ran per row: ~0.3 ms of a 30-issue page's
# server CPU on PostgreSQL, for nothing.
ISSUE_SELECT = f"""
SELECT i.id, i.repo_id, i.number, i.is_pull, i.title, i.body, i.state, i.labels,
       i.comment_count, i.created_at, i.updated_at, i.closed_at, i.author_id, i.milestone_id,
       ms.number AS milestone_number, ms.title AS milestone_title,
       ms.state AS milestone_state, ms.due_on AS milestone_due_on,
       au.username AS author_username, au.name AS author_name, au.avatar_hash AS author_avatar_hash,
       p.head, p.base, p.head_repo_id, p.head_oid, p.base_oid, p.mergeable, p.merged,
       p.merged_at, p.merge_commit, p.merged_by,
       mu.username AS merger_username, mu.name AS merger_name, mu.avatar_hash AS merger_avatar_hash,
       hr.name AS head_repo_name, hu.username AS head_repo_owner,
       hr.visibility AS head_repo_visibility, br.visibility AS base_visibility,
       CASE WHEN hr.id IS NULL THEN 0
            WHEN {level("hr", "i.author_id")} >= {LEVELS["write"]} THEN 1 ELSE 0 END
         AS author_writes_head,
       CASE WHEN p.issue_id IS NULL THEN 0 ELSE
       (SELECT COUNT(*) FROM reviews v WHERE v.issue_id = i.id AND {writers_verdict("br")}
          AND v.state = 'CHANGES_REQUESTED') END AS changes_requested,
       CASE WHEN p.head_oid IS NULL THEN 0 ELSE
       (SELECT COUNT(*) FROM reviews v WHERE v.issue_id = i.id AND {writers_verdict("br")}
          AND v.state = 'APPROVED' AND v.commit_id = p.head_oid) END AS approvals,
       CASE WHEN p.head_oid IS NULL THEN NULL ELSE
       (SELECT {COMBINED} FROM commit_statuses s
         WHERE s.repo_id = i.repo_id AND s.sha = p.head_oid AND {LATEST}) END AS head_status
  FROM issues i
  JOIN repositories br ON br.id = i.repo_id
  LEFT JOIN users au ON au.id = i.author_id
  LEFT JOIN pulls p ON p.issue_id = i.id
  LEFT JOIN users mu ON mu.id = p.merged_by
  LEFT JOIN repositories hr ON hr.id = p.head_repo_id
  LEFT JOIN users hu ON hu.id = hr.owner_id
  LEFT JOIN milestones ms ON ms.id = i.milestone_id
"""

# ISSUE_SELECT for the rows of a `page` (WITH page AS (… hit …)), which comes first: past
# join_collapse_limit (8) PostgreSQL keeps the written join order, and with the page
# joined last it joined every issue of the repository before keeping the page's 30
# (EXPLAIN ANALYZE, 600 issues: execution 11.6 -> 4.3 ms on a loaded machine).
# Two of its checks are made otherwise (issue_select): the review counts come as items of
# `extras` (one access check for the page's reviews, where each count had its own per
# row), and on PostgreSQL whether the author writes to the head is a LATERAL join, whose
# result is memoized per (head repository, author): a page has a few authors, not 30.
_WRITES_HEAD = (
    f"CASE WHEN hr.id IS NULL THEN 0\n"
    f"            WHEN {level('hr', 'i.author_id')} >= {LEVELS['write']} THEN 1 ELSE 0 END"
)
_REVIEW_COUNTS_START = "       CASE WHEN p.issue_id IS NULL THEN 0 ELSE"
_REVIEW_COUNTS_END = "END AS approvals,"
ISSUE_SELECT_PAGED = ISSUE_SELECT.replace(
    "\n  FROM issues i\n", "\n  FROM page h JOIN issues i ON i.id = h.hit\n", 1
)
_start = ISSUE_SELECT_PAGED.index(_REVIEW_COUNTS_START)
_end = ISSUE_SELECT_PAGED.index(_REVIEW_COUNTS_END) + len(_REVIEW_COUNTS_END)
ISSUE_SELECT_PAGED = (
    ISSUE_SELECT_PAGED[:_start]
    + "       0 AS changes_requested, 0 AS approvals,"
    + ISSUE_SELECT_PAGED[_end:]
)
# The LATERAL form: the level is read from `aw`, joined last.
_WRITES_HEAD_LATERAL = (
    f"CASE WHEN hr.id IS NULL THEN 0 WHEN aw.lv >= {LEVELS['write']} THEN 1 ELSE 0 END"
)
_AUTHOR_LEVEL = (
    f"  LEFT JOIN LATERAL (SELECT MAX(g.level) AS lv FROM ({grants('hr', 'i.author_id')}) g)"
    " aw ON TRUE\n"
)


# ISSUE_SELECT_PAGED for rows known to be issues (a page or search of issues): what only
# a pull request has is written as the value it has for an issue, and its joins go. The
# CASE above skipped those subplans per row, but PostgreSQL still set up every one of
# them (~70 subplans and InitPlans, mostly the access checks) on each execution.
_PULL_COLUMNS = [
    "head",
    "base",
    "head_repo_id",
    "head_oid",
    "base_oid",
    "mergeable",
    "merged",
    "merged_at",
    "merge_commit",
    "merged_by",
    "merger_username",
    "merger_name",
    "merger_avatar_hash",
    "head_repo_name",
    "head_repo_owner",
    "head_repo_visibility",
]


def _issues_only(select: str) -> str:
    start = select.index("       p.head, p.base,")
    end = select.index("br.visibility AS base_visibility,")
    nulls = ", ".join(f"NULL AS {name}" for name in _PULL_COLUMNS)
    select = select[:start] + f"       {nulls},\n       " + select[end:]
    start = select.index("       CASE WHEN hr.id IS NULL THEN 0")
    end = select.index("END AS head_status") + len("END AS head_status")
    select = (
        select[:start] + "       0 AS author_writes_head, 0 AS changes_requested, 0 AS approvals,"
        " NULL AS head_status" + select[end:]
    )
    for join in (
        "  LEFT JOIN pulls p ON p.issue_id = i.id\n",
        "  LEFT JOIN users mu ON mu.id = p.merged_by\n",
        "  LEFT JOIN repositories hr ON hr.id = p.head_repo_id\n",
        "  LEFT JOIN users hu ON hu.id = hr.owner_id\n",
    ):
        assert join in select
        select = select.replace(join, "", 1)
    assert not any(alias in select for alias in (" p.", " mu.", " hr.", " hu.", "(p.", "(hr."))
    return select


ISSUE_ONLY_SELECT_PAGED = _issues_only(ISSUE_SELECT_PAGED)


# What hangs on a row, one JSON array per item, its first element the kind:
# ["a", position, id, username, name, avatar_hash]: an assignee;
# ["l", place, name carried, id, repo_id, name, name_key, color, description]: a label
# (the object's fields NULL when none matched the name);
# ["r", content, count]: reactions of a kind;
# ["q", created_at, username_key, id, username, name, avatar_hash]: a review request;
# ["t", name_key, id, name, org]: a team asked to review.
def _extras(sql: Any, pulls: bool | None) -> str:
    # Each part starts from the page (CROSS JOIN: SQLite keeps that order, so it looks
    # the page's ids up rather than walk a whole table in its index's order).
    parts = [
        f"SELECT a.issue_id AS hit, {sql.json_list('a', ['a.position', *_PERSON])} AS x"
        " FROM page h CROSS JOIN issue_assignees a JOIN users u ON u.id = a.user_id"
        " WHERE a.issue_id = h.hit",
        # Matched as label_objects does: the name lower-cased (issue_rows checks the key).
        "SELECT i.id, "
        + sql.json_list(
            "l",
            ["e.key", "e.value", "l.id", "l.repo_id", "l.name", "l.name_key", "l.color"]
            + ["l.description"],
        )
        + f" FROM page h CROSS JOIN issues i CROSS JOIN {sql.json_items('i.labels')}"
        " LEFT JOIN labels l ON l.repo_id = i.repo_id AND l.name_key = lower(e.value)"
        " WHERE i.id = h.hit",
        f"SELECT r.issue_id, {sql.json_list('r', ['r.content', 'COUNT(*)'])}"
        " FROM page h CROSS JOIN reactions r"
        f" WHERE r.issue_id = h.hit AND r.comment_id = {ON_ITEM} GROUP BY r.issue_id, r.content",
    ]
    if pulls is not False:
        parts += [
            "SELECT q.issue_id, "
            + sql.json_list("q", ["q.created_at", "u.username_key", *_PERSON])
            + " FROM page h CROSS JOIN review_requests q JOIN users u ON u.id = q.user_id"
            " WHERE q.issue_id = h.hit",
            "SELECT q.issue_id, "
            + sql.json_list("t", ["t.name_key", "t.id", "t.name", "o.username"])
            + " FROM page h CROSS JOIN team_review_requests q JOIN teams t ON t.id = q.team_id"
            " JOIN users o ON o.id = t.org_id WHERE q.issue_id = h.hit",
            # ["v", state, commit_id]: a writer's latest verdict that issue_rows counts.
            f"SELECT v.issue_id, {sql.json_list('v', ['v.state', 'v.commit_id'])}"
            " FROM page h CROSS JOIN reviews v JOIN issues vi ON vi.id = v.issue_id"
            " JOIN repositories br ON br.id = vi.repo_id WHERE v.issue_id = h.hit"
            f" AND v.state IN ('CHANGES_REQUESTED', 'APPROVED') AND {writers_verdict('br')}",
        ]
    return " UNION ALL ".join(parts)


_PERSON = ["u.id", "u.username", "u.name", "u.avatar_hash"]
# The sort keys of the items (after the kind): the order the separate queries had.
_FIRST, _FIRST_TWO = itemgetter(1), itemgetter(1, 2)


@functools.lru_cache(maxsize=64)
def issue_select(sql: Any, pulls: bool | None, first: str = "") -> str:
    """The rows of the ids in `page` (the caller's `WITH page AS MATERIALIZED (… hit …)`,
    which this text follows) in sql's dialect, with what hangs on them as one JSON column.

    pulls: True, the rows are pull requests (their review requests come along); False,
    issues (none); None, either. first: columns put before i.id.
    """
    # One CTE for all of it, aggregated once for the page's ids: on PostgreSQL a
    # correlated subquery per row and kind cost more server CPU than the statements it
    # saved (a page: 0.9 -> 1.5 ms), and so did a CTE per kind (each its own join).
    extras = (
        f", extras AS MATERIALIZED (SELECT y.hit, '[' || {sql.text_agg('y.x', ',')} || ']' AS j"
        f" FROM ({_extras(sql, pulls)}) y GROUP BY y.hit)"
    )
    select = (ISSUE_SELECT_PAGED if pulls is not False else ISSUE_ONLY_SELECT_PAGED).replace(
        "SELECT i.id,", f"SELECT {first}extras.j AS extras_json, i.id,", 1
    )
    if pulls is not False and sql.lateral_joins:
        assert _WRITES_HEAD in select
        select = select.replace(_WRITES_HEAD, _WRITES_HEAD_LATERAL, 1) + _AUTHOR_LEVEL
    return extras + select + "  LEFT JOIN extras ON extras.hit = i.id\n"


def issue_rows(conn: Conn, rows: list[Row]) -> list[dict[str, Any]]:
    """Rows read with issue_select() as dicts, as the API presents them."""
    issues = []
    unmatched = []
    names = rows[0].keys() if rows else []
    for row in rows:
        issue = dict(zip(names, row))  # three times faster than dict(row)
        labels = issue["labels"]
        issue["labels"] = [] if labels == "[]" else json.loads(labels)
        extras = issue.pop("extras_json")
        items = json.loads(extras) if extras else ()
        people: list[list[Any]] = []
        objects: list[list[Any]] = []
        counts: dict[str, int] = {}
        requests: list[list[Any]] = []
        teams: list[list[Any]] = []
        verdicts: list[list[Any]] = []
        for item in items:
            kind = item[0]
            if kind == "a":
                people.append(item)
            elif kind == "l":
                objects.append(item)
            elif kind == "r":
                counts[item[1]] = item[2]
            elif kind == "q":
                requests.append(item)
            elif kind == "t":
                teams.append(item)
            else:
                verdicts.append(item)
        people.sort(key=_FIRST)
        issue["assignees"] = [_person(item[2:]) for item in people]
        if verdicts and issue["head"] is not None:  # a pull request's (it has a head)
            _count_verdicts(issue, verdicts)
        if issue["is_pull"]:  # a pull request's (the keys in the order they always came)
            requests.sort(key=_FIRST_TWO)
            teams.sort(key=_FIRST)
            issue["requested_reviewers"] = [_person(item[3:]) for item in requests]
            issue["requested_teams"] = [
                {"id": item[2], "name": item[3], "org": item[4]} for item in teams
            ]
        objects.sort(key=_FIRST)
        issue["label_objects"] = [
            {
                "id": item[3],
                "repo_id": item[4],
                "name": item[5],
                "name_key": item[6],
                "color": item[7],
                "description": item[8],
            }
            for item in objects
        ]
        # SQL's lower() is ASCII only on SQLite (the locale's on PostgreSQL); the keys
        # are Python's: an issue with a name SQL did not match is looked up as before.
        if any(item[3] is None or item[6] != item[2].lower() for item in objects):
            unmatched.append(issue)
        issue["reaction_counts"] = dict(sorted(counts.items()))
        issues.append(issue)
    if unmatched:
        label_objects(conn, unmatched)
    return issues


def _person(item: list[Any]) -> dict[str, Any]:
    return {"id": item[0], "username": item[1], "name": item[2], "avatar_hash": item[3]}


def _count_verdicts(issue: dict[str, Any], verdicts: list[list[Any]]) -> None:
    """changes_requested and approvals (of the head commit) from the writers' verdicts."""
    head = issue["head_oid"]
    for _, state, commit_id in verdicts:
        if state == "CHANGES_REQUESTED":
            issue["changes_requested"] += 1
        elif head is not None and commit_id == head:
            issue["approvals"] += 1
