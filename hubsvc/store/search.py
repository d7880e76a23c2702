"""Full-text search over repositories, issues, pull requests and users (SQLite FTS5)."""

from __future__ import annotations

import functools
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from .access import VISIBLE
from .base import Table, reads
from .engines.sqlite import Database
from .issues import ISSUE_SELECT, _with_assignees
from .repos import REPO_SELECT, _page, _repo

MAX_TERMS = 10
CACHE_SIZE = 512


# A "quoted phrase" (its closing quote present) or a run of non-space characters.
_GROUP = re.compile(r'"([^"]*)"|"?([^\s"]+)')
# Runs of letters and digits, the tokens FTS5's unicode61 tokenizer makes: `-`, `_`, `.`
# and every other punctuation separate words on both the index and the query side.
_WORD = re.compile(r"[^\W_]+")


def match_query(text: str) -> str | None:
    """User text as an FTS5 query: every space-separated group required, as a phrase.

    `my-cool-tool` is the phrase my cool tool* (its words in that order, the last one a
    prefix), so it finds the name it spells; `my cool tool` finds it too (each word on
    its own); `"my cool tool"` in quotes is an exact phrase. None when there are no words.
    """
    phrases, budget = [], MAX_TERMS
    for match in _GROUP.finditer(text):
        quoted, group = match.group(1), match.group(2)
        words = [w[:64] for w in _WORD.findall(group if quoted is None else quoted)][:budget]
        if not words:
            continue
        budget -= len(words)
        # Only letters and digits go inside the quotes, so FTS5 syntax in the input
        # (quotes, *, ^, :, parentheses, NEAR, AND, OR) is never anything but text.
        phrases.append('"' + " ".join(words) + '"' + ("" if quoted is not None else "*"))
        if not budget:
            break
    return " ".join(phrases) or None


# `owner/name`, the full name a repository is shown and cloned by.
_FULL_NAME = re.compile(r"\s*([A-Za-z0-9-]{1,39})/([^\s/\"]+)\s*")


def full_name_query(text: str) -> tuple[str, str, str] | None:
    """For text that is one `owner/name`: the owner's key, a name-only query, the plain one."""
    match = _FULL_NAME.fullmatch(text)
    name = match and match_query(match.group(2))
    if not name or match is None:
        return None
    return match.group(1).lower(), "name : " + name, match_query(text) or ""


def cached(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """Serve repeated searches from memory until the next write to the database.

    Ranking costs about a millisecond per thousand matches, so a common word is
    expensive; any write bumps the database generation and so empties the cache.
    """

    @functools.wraps(method)
    async def wrapper(self: SearchStore, *args: Any) -> Any:
        key = (method.__name__, *args)
        generation = self.db.generation
        if generation != self._generation:
            self._cache.clear()
            self._generation = generation
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        result = await method(self, *args)
        if self.db.generation == generation:  # nothing was written meanwhile
            self._cache[key] = result
            while len(self._cache) > CACHE_SIZE:
                self._cache.popitem(last=False)
        return result

    return wrapper


class SearchStore(Table):
    """Ranked by bm25; private repositories' hits only for those who may read them."""

    def __init__(self, db: Database) -> None:
        super().__init__(db)
        self._cache: OrderedDict[tuple, Any] = OrderedDict()
        self._generation = -1

    @cached
    @reads
    def repositories(
        self, conn, text: str, viewer: int, limit: int, offset: int
    ) -> tuple[list[dict[str, Any]], bool]:
        """Repositories by name (weighted) and description; `owner/name` by full name too."""
        query, where, params = match_query(text), "", {}
        full = full_name_query(text)
        if full is not None:
            # The owner is not in the index: either the name's words in a repository of
            # that owner, or the whole text as words anywhere (a description's `a/b`).
            owner, name, plain = full
            query = f"({name}) OR ({plain})"
            where = (
                " AND (r.owner_id IN (SELECT id FROM users WHERE username_key = :owner)"
                " OR r.id IN (SELECT rowid FROM repositories_fts WHERE repositories_fts"
                " MATCH :plain))"
            )
            params = {"owner": owner, "plain": plain}
        if query is None:
            return [], False
        # Rank and page the hits first: REPO_SELECT's per-row counts are then computed
        # for the page only, not for every match before the sort.
        rows = conn.execute(
            "WITH page AS MATERIALIZED ("
            "  SELECT r.id AS hit, bm25(repositories_fts, 10.0, 1.0) AS score"
            "    FROM repositories_fts f JOIN repositories r ON r.id = f.rowid"
            f"  WHERE repositories_fts MATCH :q AND {VISIBLE}{where}"
            "   ORDER BY score, r.id DESC LIMIT :limit OFFSET :offset)"
            + REPO_SELECT
            + " JOIN page h ON h.hit = r.id ORDER BY h.score, r.id DESC",
            {"q": query, "viewer": viewer, "limit": limit + 1, "offset": offset, **params},
        ).fetchall()
        return _page([_repo(r) for r in rows], limit)

    @cached
    @reads
    def issues(
        self, conn, text: str, viewer: int, is_pull: bool, limit: int, offset: int
    ) -> tuple[list[dict[str, Any]], bool]:
        """Issues or pull requests by title (weighted) and body."""
        query = match_query(text)
        if query is None:
            return [], False
        # The FTS hits come first, as their own materialized step, and each is then checked
        # (kind, readable repository) by primary key: the planner may never walk every
        # issue to find the few that match. Only the page's rows are joined in full.
        rows = conn.execute(
            "WITH hits AS MATERIALIZED ("
            "  SELECT rowid AS hit, bm25(issues_fts, 5.0, 1.0) AS score FROM issues_fts"
            "   WHERE issues_fts MATCH :q),"
            " page AS MATERIALIZED ("
            "  SELECT h.hit, h.score FROM hits h"
            "    JOIN issues k INDEXED BY issues_kind ON k.id = h.hit"
            "    JOIN repositories r ON r.id = k.repo_id"
            f"  WHERE k.is_pull = :pull AND {VISIBLE}"
            "   ORDER BY h.score, h.hit DESC LIMIT :limit OFFSET :offset)"
            + ISSUE_SELECT.replace(
                "SELECT i.id,", "SELECT ru.username AS repo_owner, r.name AS repo_name, i.id,", 1
            )
            + " JOIN page h ON h.hit = i.id"
            " JOIN repositories r ON r.id = i.repo_id JOIN users ru ON ru.id = r.owner_id"
            " ORDER BY h.score, i.id DESC",
            {
                "q": query,
                "viewer": viewer,
                "pull": int(is_pull),
                "limit": limit + 1,
                "offset": offset,
            },
        ).fetchall()
        return _with_assignees(conn, rows[:limit]), len(rows) > limit

    @cached
    @reads
    def users(self, conn, text: str, limit: int, offset: int) -> tuple[list[dict[str, Any]], bool]:
        """Users by username (weighted) and name."""
        query = match_query(text)
        if query is None:
            return [], False
        rows = conn.execute(
            "SELECT u.id, u.username, u.name, u.avatar_hash, u.created_at FROM users_fts f"
            " JOIN users u ON u.id = f.rowid WHERE users_fts MATCH ?"
            " ORDER BY bm25(users_fts, 5.0, 1.0), u.id LIMIT ? OFFSET ?",
            (query, limit + 1, offset),
        ).fetchall()
        return _page([dict(r) for r in rows], limit)
