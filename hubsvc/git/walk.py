"""The order `git log <commit>` lists history in, walked in-process or read from git, and kept.

git's default walk (no --topo-order, no path, no exclusion) keeps one queue sorted by
committer date, newest first, ties in the order they were queued: it pops the newest
commit, shows it, and queues each parent it has not seen yet, first parent first
(revision.c: get_revision_1, process_parents, commit_list_insert_by_date). A heap on
(-date, queue order) pops in that same order.

The order from a commit never changes: its history is content-addressed. So the oids of
a walk are kept per (repository, start commit) in one process-wide cache with a byte
budget; a push moves a branch to a new start and old walks age out unused.
"""

from __future__ import annotations

import heapq
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from dulwich.errors import ObjectFormatException
from dulwich.objects import Commit

# git keeps dates in the commit-graph in 34 bits; past that (or before 1970) git's order
# could differ from the object's date, and git answers such walks itself.
_DATE_RANGE = range(1, 1 << 34)
# Commits walked through dulwich (~20 µs each); deeper walks are git rev-list's (a
# process, 1.5 ms and up, but git reads dates and parents from the commit-graph).
IN_PROCESS = 100
CACHE_BYTES = 16 << 20  # walks kept, as hex oids (40 bytes a commit): 400,000 commits
LONGEST = 200_000  # commits in one kept walk; deeper pages are git log's alone


class WalkCache:
    """Walks by (repository, start oid): their hex oids run together, and whether history ends there."""

    def __init__(self, budget: int = CACHE_BYTES) -> None:
        self.budget = budget
        self._walks: OrderedDict[tuple[str, bytes], tuple[bytes, bool]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()  # git threads of every repository share it

    def get(self, repo: str, start: bytes) -> tuple[bytes, bool] | None:
        """The walk kept for start, or None."""
        with self._lock:
            walk = self._walks.get((repo, start))
            if walk is not None:
                self._walks.move_to_end((repo, start))
            return walk

    def put(self, repo: str, start: bytes, oids: bytes, complete: bool) -> None:
        """Keep a walk (a longer one replaces a shorter), dropping the least recently used."""
        with self._lock:
            old = self._walks.pop((repo, start), None)
            if old is not None:
                self._size -= len(old[0])
                if len(old[0]) > len(oids):
                    oids, complete = old
            self._walks[(repo, start)] = (oids, complete)
            self._size += len(oids)
            while self._size > self.budget and self._walks:
                self._size -= len(self._walks.popitem(last=False)[1][0])

    def forget(self, repo: str) -> None:
        """Drop every walk of a repository (after its objects were pruned)."""
        with self._lock:
            for key in [key for key in self._walks if key[0] == repo]:
                self._size -= len(self._walks.pop(key)[0])


WALKS = WalkCache()


def walk_commits(
    read: Callable[[Any], object], start: Commit, count: int
) -> tuple[list[Commit], bool] | None:
    """The first count commits of git log's order from start, and whether history ends there.

    read(oid) returns the object or raises KeyError. None when git must answer instead: a
    missing parent, a commit dulwich cannot parse, a date git would not keep as it is.
    """
    if start.commit_time not in _DATE_RANGE:
        return None
    queue: list[tuple[int, int, Commit]] = [(-start.commit_time, 0, start)]
    seen = {start.id}
    out: list[Commit] = []
    queued = 1
    while queue and len(out) < count:
        commit = heapq.heappop(queue)[2]
        out.append(commit)
        for oid in commit.parents:
            if oid in seen:
                continue
            seen.add(oid)
            try:
                parent = read(oid)
                if not isinstance(parent, Commit) or parent.commit_time not in _DATE_RANGE:
                    return None
            except (KeyError, ObjectFormatException):
                return None
            heapq.heappush(queue, (-parent.commit_time, queued, parent))
            queued += 1
    return out, not queue
