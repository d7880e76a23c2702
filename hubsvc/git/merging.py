"""Merging without a work tree: pull refs, merge-tree, commit-tree, ref updates."""

from __future__ import annotations

from pathlib import Path

from ..errors import BadRequest
from .base import RepoBase
from .objects import _HEADS, _TAGS, ZERO_OID, _ref_name, check_oid
from .process import GitError, _git_status, _run_git


class MergeMixin(RepoBase):
    """What merging a pull request needs, done in the bare repository."""

    # -- merging, without a work tree ---------------------------------------------

    def branch_oid(self, branch: str) -> str | None:
        """The commit a branch points at (branches only, no tags or oids)."""
        ref = _ref_name(_HEADS, branch)
        if ref is None:
            return None
        with self._lock:
            try:
                return self._repo.refs[ref].decode("ascii")
            except KeyError:
                return None

    def fetch_commit(self, source_path: str | Path, oid: str, ref: str) -> None:
        """Copy a commit and its history from another repository under ref (for forks)."""
        check_oid(oid)
        if not ref.startswith("refs/pull/"):
            raise ValueError("fetch_commit only writes refs/pull/*")
        _run_git(
            str(self.path),
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--end-of-options",
            str(source_path),
            f"+{oid}:{ref}",
        )

    def pull_ref(self, number: int) -> str | None:
        """Where refs/pull/<number>/head points, if it exists."""
        with self._lock:
            try:
                return self._repo.refs[f"refs/pull/{int(number)}/head".encode()].decode("ascii")
            except KeyError:
                return None

    def set_pull_ref(self, number: int, oid: str) -> None:
        """Point refs/pull/<number>/head at a commit of this repository."""
        code, _, err = _git_status(
            str(self.path),
            "update-ref",
            "-m",
            "hubsvc pull request",
            f"refs/pull/{int(number)}/head",
            check_oid(oid),
        )
        if code != 0:
            raise GitError("git update-ref failed: " + err.decode("utf-8", "replace").strip())

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        """Whether ancestor is reachable from descendant."""
        code, _, _ = _git_status(
            str(self.path),
            "merge-base",
            "--is-ancestor",
            "--end-of-options",
            check_oid(ancestor),
            check_oid(descendant),
        )
        return code == 0

    def merge_tree(self, base: str, head: str) -> str | None:
        """A real three-way merge of two commits: the merged tree's oid, or None on conflict."""
        code, out, err = _git_status(
            str(self.path),
            "merge-tree",
            "--write-tree",
            "--no-messages",
            "--end-of-options",
            check_oid(base),
            check_oid(head),
        )
        if code == 0:
            return out.split()[0].decode("ascii")
        if code == 1:
            return None
        raise GitError("git merge-tree failed: " + err.decode("utf-8", "replace").strip())

    def commit_tree(
        self, tree: str, parents: list[str], message: str, name: str, email: str
    ) -> str:
        """Write a commit object (no ref moves) and return its oid."""
        args = ["commit-tree", check_oid(tree)]
        for parent in parents:
            args += ["-p", check_oid(parent)]
        ident = {
            "GIT_AUTHOR_NAME": name,
            "GIT_AUTHOR_EMAIL": email,
            "GIT_COMMITTER_NAME": name,
            "GIT_COMMITTER_EMAIL": email,
        }
        code, out, err = _git_status(str(self.path), *args, stdin=message.encode(), env=ident)
        if code != 0:
            raise GitError("git commit-tree failed: " + err.decode("utf-8", "replace").strip())
        return out.strip().decode("ascii")

    def update_branch(self, branch: str, new: str, old: str) -> bool:
        """Move a branch from old to new atomically; False when it no longer points at old."""
        ref = _ref_name(_HEADS, branch)
        if ref is None:
            raise BadRequest("invalid branch name")
        code, _, _ = _git_status(
            str(self.path),
            "update-ref",
            "-m",
            "hubsvc merge",
            "--end-of-options",
            ref.decode(),
            check_oid(new),
            check_oid(old),
        )
        return code == 0

    def create_tag(self, tag: str, oid: str) -> bool:
        """A lightweight tag at a commit, only if no such tag exists; False when one does."""
        ref = _ref_name(_TAGS, tag)
        if ref is None:
            raise BadRequest("tagName: not a valid tag name")
        code, _, _ = _git_status(
            str(self.path),
            "update-ref",
            "-m",
            "hubsvc release",
            "--end-of-options",
            ref.decode(),
            check_oid(oid),
            ZERO_OID,
        )
        return code == 0
