"""Full-text search over repositories, issues, pull requests and users.

The words are parsed here; each engine's `sql` renders them for its own index (FTS5,
or tsvector with GIN) and says how a hit is matched and ranked.
"""

from __future__ import annotations

import functools
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from .access import VISIBLE, Readable, narrowed
from .base import Table, reads
from .engines import AnyDatabase
from .issue_rows import issue_rows, issue_select
from .repos import REPO_SELECT, _page, _repo

MAX_TERMS = 10
CACHE_SIZE = 512


# A "quoted phrase" (its closing quote present) or a run of non-space characters.
_GROUP = re.compile(r'"([^"]*)"|"?([^\s"]+)')
# Runs of letters and digits, the tokens FTS5's unicode61 tokenizer makes: `-`, `_`, `.`
# and every other punctuation separate words on both the index and the query side.
_WORD = re.compile(r"[^\W_]+")


Groups = list[tuple[list[str], bool]]


def query_groups(text: str) -> Groups:
    """User text as groups of words, each group required as a phrase: (words, last is a prefix).

    `my-cool-tool` is the phrase my cool tool* (its words in that order, the last one a
    prefix), so it finds the name it spells; `my cool tool` finds it too (each word on
    its own); `"my cool tool"` in quotes is an exact phrase. Empty when there are no words.
    """
    groups: Groups = []
    budget = MAX_TERMS
    for match in _GROUP.finditer(text):
        quoted, group = match.group(1), match.group(2)
        words = [w[:64] for w in _WORD.findall(group if quoted is None else quoted)][:budget]
        if not words:
            continue
        budget -= len(words)
        groups.append((words, quoted is None))
        if not budget:
            break
    return groups


# `owner/name`, the full name a repository is shown and cloned by.
_FULL_NAME = re.compile(r"\s*([A-Za-z0-9-]{1,39})/([^\s/\"]+)\s*")


def full_name_groups(text: str) -> tuple[str, Groups, Groups] | None:
    """For text that is one `owner/name`: the owner's key, the name's groups, the whole text's."""
    match = _FULL_NAME.fullmatch(text)
    name = query_groups(match.group(2)) if match else []
    if not name or match is None:
        return None
    return match.group(1).lower(), name, query_groups(text)


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
    """Names and titles ranked first; private repositories' hits only for those who may read them."""

    def __init__(self, db: AnyDatabase) -> None:
        super().__init__(db)
        self._cache: OrderedDict[tuple, Any] = OrderedDict()
        self._generation = -1

    @cached
    @reads
    def repositories(
        self,
        conn,
        text: str,
        viewer: int,
        limit: int,
        offset: int,
        within: Readable | None = None,
    ) -> tuple[list[dict[str, Any]], bool]:
        """Repositories by name (weighted) and description; `owner/name` by full name too."""
        sql = self.db.sql
        groups, where, params = query_groups(text), "", {}
        full = full_name_groups(text)
        if full is not None:
            # The owner is not in the index: either the name's words in a repository of
            # that owner, or the whole text as words anywhere (a description's `a/b`).
            owner, name, plain = full
            query = sql.fts_either(sql.fts_query(name, names_only=True), sql.fts_query(plain))
            where = (
                " AND (r.owner_id IN (SELECT id FROM users WHERE username_key = :owner)"
                f" OR {sql.repository_matches('plain')})"
            )
            params = {"owner": owner, "plain": sql.fts_query(plain)}
        elif groups:
            query = sql.fts_query(groups)
        else:
            return [], False
        # Rank and page the hits first: REPO_SELECT's per-row counts are then computed
        # for the page only, not for every match before the sort.
        rows = conn.execute(
            f"WITH page AS MATERIALIZED ({sql.repository_hits(VISIBLE + narrowed(within) + where)})"
            + REPO_SELECT
            + " JOIN page h ON h.hit = r.id ORDER BY h.score, r.id DESC",
            {"q": query, "viewer": viewer, "limit": limit + 1, "offset": offset, **params},
        ).fetchall()
        return _page([_repo(r) for r in rows], limit)

    @cached
    @reads
    def issues(
        self,
        conn,
        text: str,
        viewer: int,
        is_pull: bool,
        limit: int,
        offset: int,
        within: Readable | None = None,
    ) -> tuple[list[dict[str, Any]], bool]:
        """Issues or pull requests by title (weighted) and body."""
        groups = query_groups(text)
        if not groups:
            return [], False
        sql = self.db.sql
        rows = conn.execute(
            sql.issue_hits(VISIBLE + narrowed(within), is_pull)
            + issue_select(sql, is_pull, "ru.username AS repo_owner, r.name AS repo_name, ")
            + " JOIN repositories r ON r.id = i.repo_id JOIN users ru ON ru.id = r.owner_id"
            " ORDER BY h.score, i.id DESC",
            {
                "q": sql.fts_query(groups),
                "viewer": viewer,
                "limit": limit + 1,
                "offset": offset,
            },
        ).fetchall()
        return issue_rows(conn, rows[:limit]), len(rows) > limit

    @cached
    @reads
    def users(self, conn, text: str, limit: int, offset: int) -> tuple[list[dict[str, Any]], bool]:
        """Users by username (weighted) and name."""
        groups = query_groups(text)
        if not groups:
            return [], False
        rows = conn.execute(
            self.db.sql.user_hits(),
            {"q": self.db.sql.fts_query(groups), "limit": limit + 1, "offset": offset},
        ).fetchall()
        return _page([dict(r) for r in rows], limit)
