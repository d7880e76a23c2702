"""Commit history through the git CLI (fast with the commit-graph), and upkeep."""

from __future__ import annotations

from ..errors import BadRequest, NotFound
from .base import RepoBase
from .objects import _LOG_FORMAT, ZERO_OID, _parse_log, check_oid
from .process import GitError, _git_status, _run_git


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
        items = self._log([oid], skip=skip, max_count=limit + 1)
        return oid, items[:limit], len(items) > limit

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
        self.write_commit_graph()
