"""The order `git log <commit>` lists history in, walked in-process or read from git, and kept.

git's default walk (no --topo-order, no path, no exclusion) keeps one queue sorted by
committer date, newest first, ties in the order they were queued: it pops the newest
commit, shows it, and queues each parent it has not seen yet, first parent first
(revision.c: get_revision_1, process_parents, commit_list_insert_by_date). A heap on
(-date, queue order) pops in that same order.

The order from a commit never changes: its history is content-addressed. So a window of
each walk's oids is kept per (repository, start commit) in one process-wide cache with a
byte budget; a push moves a branch to a new start and old walks age out unused. git
skips commits cheaply (dates and parents from the commit-graph) but pays ~2 µs for each
commit it lists, so a window starts at the page asked for and grows as pages follow it.
"""

from __future__ import annotations

import heapq
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, NamedTuple

from dulwich.errors import ObjectFormatException
from dulwich.objects import Commit

# git keeps dates in the commit-graph in 34 bits; past that (or before 1970) git's order
# could differ from the object's date, and git answers such walks itself.
LAST_DATE = 1 << 34  # the commit-graph keeps dates below this as they are


def _plain_date(seconds: object) -> bool:
    """Whether git keeps the date as it is (dulwich gives None for an unreadable one)."""
    # Not `in range(...)`: for anything but an int that walks the whole range.
    return type(seconds) is int and 0 < seconds < LAST_DATE


# Commits walked through dulwich (~20 µs each); deeper walks are git rev-list's (a
# process, 1.5 ms and up, but git reads dates and parents from the commit-graph).
IN_PROCESS = 100
# Parents of one commit the in-process walk takes (git's own octopus merges stay far
# below; thousands of crafted parents would cost a read each): more, and git answers.
MOST_PARENTS = 16
CACHE_BYTES = 16 << 20  # walks kept, as hex oids (40 bytes a commit): 400,000 commits
LONGEST = 100_000  # commits in one kept window
HEX = 40  # a commit's oid as kept
ENTRY_BYTES = 256  # a kept window's key, tuple and dict slot, beside its oids


class Window(NamedTuple):
    """A stretch of one walk: the oids from position `first` on, as hex run together."""

    first: int
    oids: bytes
    complete: bool  # history ends right after the last oid

    @property
    def end(self) -> int:
        """The position after the last oid."""
        return self.first + len(self.oids) // HEX

    def covers(self, skip: int, end: int) -> bool:
        """Whether positions skip to end are all here (or past the end of history)."""
        return self.first <= skip and (end <= self.end or self.complete)

    def page(self, skip: int, end: int) -> bytes:
        """The hex oids of positions skip to end."""
        return self.oids[(skip - self.first) * HEX : (end - self.first) * HEX]


def _cost(window: Window) -> int:
    """What a kept window costs: its oids, and the entry itself (even an empty one)."""
    return len(window.oids) + ENTRY_BYTES


class WalkCache:
    """One window of each walk, by (repository, start oid), least recently used dropped first."""

    def __init__(self, budget: int = CACHE_BYTES) -> None:
        self.budget = budget
        self._walks: OrderedDict[tuple[str, bytes], Window] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()  # git threads of every repository share it

    def get(self, repo: str, start: bytes) -> Window | None:
        """The window kept for start, or None."""
        with self._lock:
            window = self._walks.get((repo, start))
            if window is not None:
                self._walks.move_to_end((repo, start))
            return window

    def put(self, repo: str, start: bytes, window: Window) -> None:
        """Keep a window of the walk from start, in place of any other."""
        with self._lock:
            old = self._walks.pop((repo, start), None)
            if old is not None:
                self._size -= _cost(old)
            self._walks[(repo, start)] = window
            self._size += _cost(window)
            while self._size > self.budget and self._walks:
                self._size -= _cost(self._walks.popitem(last=False)[1])

    def forget(self, repo: str) -> None:
        """Drop every walk of a repository (after its objects were pruned)."""
        with self._lock:
            for key in [key for key in self._walks if key[0] == repo]:
                self._size -= _cost(self._walks.pop(key))


WALKS = WalkCache()


def walk_commits(
    read: Callable[[Any], object], start: Commit, count: int
) -> tuple[list[Commit], bool] | None:
    """The first count commits of git log's order from start, and whether history ends there.

    read(oid) returns the object or raises KeyError. None when git must answer instead: a
    missing parent, a commit dulwich cannot parse, a date git would not keep as it is.
    """
    if not _plain_date(start.commit_time):
        return None
    queue: list[tuple[int, int, Commit]] = [(-start.commit_time, 0, start)]
    read_budget = count * MOST_PARENTS  # a crafted octopus is git's to walk, not ours
    seen = {start.id}
    out: list[Commit] = []
    queued = 1
    while queue and len(out) < count:
        commit = heapq.heappop(queue)[2]
        out.append(commit)
        if len(commit.parents) > MOST_PARENTS:
            return None
        for oid in commit.parents:
            if oid in seen:
                continue
            seen.add(oid)
            read_budget -= 1
            if read_budget < 0:
                return None
            try:
                parent = read(oid)
                if not isinstance(parent, Commit) or not _plain_date(parent.commit_time):
                    return None
            except (KeyError, ObjectFormatException):
                return None
            heapq.heappush(queue, (-parent.commit_time, queued, parent))
            queued += 1
    return out, not queue
