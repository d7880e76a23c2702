"""Commit history: pages of one branch (walk.py), ranges through the git CLI, and upkeep."""

from __future__ import annotations

from collections.abc import Iterable

from dulwich.errors import ObjectFormatException
from dulwich.objects import Commit

from ..errors import BadRequest, NotFound
from .answers import replace_prune_stamp
from .base import RepoBase, _locked
from .objects import (
    _LOG_FORMAT,
    ZERO_OID,
    Kept,
    _commit_item,
    _parse_log,
    _readable,
    check_oid,
)
from .process import GitError, _git_status, _run_git
from .signatures import note_signed
from .walk import HEX, IN_PROCESS, LONGEST, WALKS, Window, walk_commits

# Commit items by hex oid: a page read again, or a branch moved on by a push, reads
# only the commits it has not shown yet. 2,048 items of 2 KiB of text at most: under
# 8 MiB, about 3 MiB for common commits.
ITEMS: Kept[bytes, dict] = Kept(1 << 11)
KEEP_TIPS = 4  # new branch tips a push walks after its answer


class HistoryMixin(RepoBase):
    """Commits of a branch, between two commits, new in a push; the commit-graph."""

    # -- history (git CLI) ------------------------------------------------------

    def commits(self, rev: str, limit: int, skip: int) -> tuple[list[dict], bool]:
        """A page of history from rev, newest first, and whether more follows."""
        return self.commits_page(rev, limit, skip)[1:]

    def commits_page(self, rev: str, limit: int, skip: int) -> tuple[str | None, list[dict], bool]:
        """Like commits(), plus the oid rev resolved to (None for an empty repository)."""
        if limit < 0 or skip < 0:
            raise BadRequest("limit and skip must not be negative")
        oid = self.resolve(rev)
        if oid is None:
            if self.is_empty():
                return None, [], False
            raise NotFound("branch not found")
        items = self._page(oid.encode("ascii"), skip, limit + 1)
        return oid, items[:limit], len(items) > limit

    def _page(self, start: bytes, skip: int, count: int) -> list[dict]:
        """Items skip to skip + count of `git log start`, from the kept window where one serves.

        Pages within the first IN_PROCESS commits are walked through dulwich; a deeper page
        is git log's, and the window it starts grows by git rev-list as pages go on from
        it. Kept pages are read through dulwich; git log answers what dulwich declines.
        """
        end = skip + count
        key = str(self.path)
        kept = WALKS.get(key, start)
        if kept is None or not kept.covers(skip, end):
            if end <= IN_PROCESS:
                walked = self._walk_here(start, end)
                if walked is not None:
                    commits, complete = walked
                    WALKS.put(key, start, Window(0, b"".join(c.id for c in commits), complete))
                    if all(_readable(c) for c in commits[skip:end]):
                        for c in commits[skip:end]:
                            note_signed(c)  # parsed already: the commit list asks next
                        return [_commit_item(c) for c in commits[skip:end]]
            elif kept is not None and kept.first <= skip <= kept.end < kept.first + LONGEST:
                WALKS.put(key, start, self._grown(start, kept, end))
            else:
                # A page away from any kept window costs what it did: one git log, which
                # skips through the commit-graph. Its oids start a window.
                logged = self._log([start.decode("ascii")], skip=skip, max_count=count)
                oids = b"".join(item["oid"].encode("ascii") for item in logged)
                WALKS.put(key, start, Window(skip, oids, len(logged) < count))
                return logged
            kept = WALKS.get(key, start)
        if kept is not None and kept.covers(skip, end):
            items = self._items(kept.page(skip, end))
            if items is not None:
                return items
        return self._log([start.decode("ascii")], skip=skip, max_count=count)

    def _grown(self, start: bytes, kept: Window, end: int) -> Window:
        """The kept window grown to end at least (by its own length at least), by git rev-list."""
        # Doubling keeps the processes few while someone pages on through history.
        count = min(max(end - kept.end, kept.end - kept.first), LONGEST)
        listed = _run_git(
            str(self.path),
            "rev-list",
            f"--skip={kept.end}",
            f"--max-count={count}",
            "--end-of-options",
            start.decode("ascii"),
            "--",
        ).replace(b"\n", b"")
        return Window(kept.first, kept.oids + listed, len(listed) < count * HEX)

    @_locked
    def _walk_here(self, start: bytes, count: int) -> tuple[list[Commit], bool] | None:
        commit = self._commit_or_none(start)
        if commit is None:
            return None
        try:
            return walk_commits(self._store.__getitem__, commit, count)
        except ObjectFormatException:
            return None

    @_locked
    def _items(self, oids: bytes) -> list[dict] | None:
        """API items of commits given as hex oids run together; None if one cannot be read.

        Items are kept by oid (ITEMS), shared between answers: never change one.
        """
        items = []
        for at in range(0, len(oids), HEX):
            oid = oids[at : at + HEX]
            item = ITEMS.get(oid)
            if item is None:
                commit = self._commit_or_none(oid)
                if commit is None or not _readable(commit):
                    return None
                item = _commit_item(commit)
                note_signed(commit)
                text = len(commit.message or b"") + len(commit.author) + len(commit.committer)
                if text + 41 * len(commit.parents) <= 2048:
                    ITEMS.put(oid, item)  # a crafted huge commit is read each time, not kept
            items.append(item)
        return items

    def commits_between(self, old: str | None, new: str, max_count: int) -> tuple[list[dict], int]:
        """Commits in new but not old (newest first, capped) and their total."""
        revs = [check_oid(new)]
        if revs[0] == ZERO_OID:
            return [], 0
        if old and old != ZERO_OID:
            revs.append("^" + check_oid(old))
        count = _run_git(str(self.path), "rev-list", "--count", "--end-of-options", *revs, "--")
        items = self._log(revs, skip=0, max_count=max_count) if max_count > 0 else []
        return items, int(count)

    def commits_new(
        self, new: str, exclude: list[str], max_count: int, total: int | None = None
    ) -> tuple[list[dict], int]:
        """Commits reachable from new and from none of exclude (newest first, capped), and
        their total (counted unless given)."""
        # Given on standard input: a repository's refs can outgrow a command line.
        revs = "\n".join([check_oid(new)] + ["^" + check_oid(oid) for oid in exclude]) + "\n"
        if total is None:
            code, out, err = _git_status(
                str(self.path), "rev-list", "--count", "--stdin", stdin=revs.encode()
            )
            if code != 0:
                raise GitError("git rev-list failed: " + err.decode("utf-8", "replace").strip())
            total = int(out)
        items: list[dict] = []
        if max_count > 0:
            code, out_log, err = _git_status(
                str(self.path),
                "log",
                "-z",
                f"--format={_LOG_FORMAT}",
                f"--max-count={max_count}",
                "--stdin",
                stdin=revs.encode(),
            )
            if code != 0:
                raise GitError("git log failed: " + err.decode("utf-8", "replace").strip())
            items = _parse_log(out_log)
        return items, total

    def _log(self, revs: list[str], skip: int, max_count: int) -> list[dict]:
        # revs are oids we produced, and --end-of-options keeps them from being
        # read as options anyway.
        output = _run_git(
            str(self.path),
            "log",
            "-z",
            f"--format={_LOG_FORMAT}",
            f"--skip={skip}",
            f"--max-count={max_count}",
            "--end-of-options",
            *revs,
            "--",
        )
        return _parse_log(output)

    def keep_history(self, tips: Iterable[str]) -> None:
        """Walk each tip's history once (after a push), so even its deep pages spawn no git log."""
        # Distinct and few: a push of thousands of refs to one commit walks it once, and
        # past the first few branches a deep page waits for its first request as before.
        for tip in list(dict.fromkeys(tips))[:KEEP_TIPS]:
            if WALKS.get(str(self.path), tip.encode("ascii")) is not None:
                continue
            listed = _run_git(
                str(self.path),
                "rev-list",
                f"--max-count={LONGEST}",
                "--end-of-options",
                tip,
                "--",
            ).replace(b"\n", b"")
            complete = len(listed) < LONGEST * HEX
            WALKS.put(str(self.path), tip.encode("ascii"), Window(0, listed, complete))

    def write_commit_graph(self) -> None:
        """Write the commit-graph so later `git log --skip` walks stay fast."""
        _run_git(str(self.path), "commit-graph", "write", "--reachable")

    def prune_unreachable(self) -> None:
        """Delete every object no ref reaches (before a private repository goes public).

        A branch pushed and deleted while private leaves commits any reader could open
        by oid; once public, everyone could. Blocking; pushes must be held off meanwhile.
        """
        git_dir = str(self.path)
        _run_git(git_dir, "reflog", "expire", "--expire=now", "--expire-unreachable=now", "--all")
        # -a -d rewrites every pack with the reachable objects only; prune takes the
        # loose ones; the commit-graph is rewritten so it names no pruned commit.
        _run_git(git_dir, "repack", "-a", "-d", "-q")
        _run_git(git_dir, "prune", "--expire=now")
        # A new stamp: every process stops answering diffs it kept from before the prune.
        replace_prune_stamp(self.path)
        WALKS.forget(git_dir)
        self.write_commit_graph()
