"""One commit's diff, read through dulwich with every blob bounded."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from dulwich.diff_tree import (
    CHANGE_ADD,
    CHANGE_DELETE,
    CHANGE_MODIFY,
    CHANGE_RENAME,
    RenameDetector,
    TreeChange,
    tree_changes,
)
from dulwich.objects import S_ISGITLINK
from dulwich.pack import Pack
from dulwich.patch import unified_diff

from ..errors import NotFound
from .base import _locked
from .objects import DIFF_MAX_BLOB, PATCH_LIMIT, _commit_item, _is_binary, check_oid
from .trees import TreeMixin


def _lines(data: bytes) -> list[bytes]:
    """Split on LF only, as git does (bytes.splitlines also splits on CR)."""
    lines = data.split(b"\n")
    tail = lines.pop()
    out = [line + b"\n" for line in lines]
    if tail:
        out.append(tail)
    return out


def _patch(old: bytes, new: bytes, limit: int = PATCH_LIMIT) -> tuple[str, int, int, bool]:
    """Unified diff hunks of two texts: (patch, additions, deletions, truncated)."""
    additions = deletions = size = 0
    kept: list[bytes] = []
    truncated = False
    # The first two lines are the ---/+++ file headers; the item has the paths.
    for line in itertools.islice(unified_diff(_lines(old), _lines(new)), 2, None):
        head = line[:1]
        if head == b"+":
            additions += 1
        elif head == b"-":
            deletions += 1
        if truncated or size + len(line) > limit:
            truncated = True
            continue
        kept.append(line)
        size += len(line)
    return b"".join(kept).decode("utf-8", "replace"), additions, deletions, truncated


def _exact_renames(changes: list[TreeChange]) -> list[TreeChange]:
    """Pair deletes with adds of the same blob as renames (git's exact rename pass)."""
    adds: dict[bytes, list[TreeChange]] = {}
    for change in changes:
        if change.type == CHANGE_ADD and change.new is not None:
            adds.setdefault(change.new.sha, []).append(change)
    paired, out = set(), []
    for change in changes:
        if change.type == CHANGE_DELETE and change.old is not None and adds.get(change.old.sha):
            add = adds[change.old.sha].pop(0)
            paired.add(id(add))
            out.append(TreeChange(CHANGE_RENAME, change.old, add.new))
        elif id(change) not in paired:
            out.append(change)
    return [c for c in out if id(c) not in paired]


class DiffMixin(TreeMixin):
    """A commit against its first parent, file by file, with sizes checked first."""

    # -- one commit's diff ------------------------------------------------------

    @_locked
    def diff(self, oid: str, max_bytes: int | None = None, max_files: int | None = None) -> dict:
        """A commit with its per-file changes against its first parent.

        At most max_files files are listed and max_bytes of patch text kept in all;
        past either the answer says `truncated`. Sides over DIFF_MAX_BLOB are never read.
        """
        commit = self._commit_or_none(check_oid(oid).encode("ascii"))
        if commit is None:
            raise NotFound("commit not found")
        base = self._commit_or_none(commit.parents[0]) if commit.parents else None
        old_tree = base.tree if base else None
        packs = self._packs_once()
        # Content rename detection reads every deleted and modified blob whole: only
        # when none is large; else renames are found by oid alone, which reads nothing.
        changes = list(tree_changes(self._store, old_tree, commit.tree))
        if any(self._too_large(entry, packs) for c in changes for entry in (c.old, c.new)):
            changes = _exact_renames(changes)
        else:
            changes = list(
                tree_changes(
                    self._store, old_tree, commit.tree, rename_detector=RenameDetector(self._store)
                )
            )
        changes.sort(key=lambda c: (c.new or c.old).path)  # type: ignore[union-attr]  # one side is there
        budget = max_bytes if max_bytes is not None else len(changes) * PATCH_LIMIT
        files = []
        for change in changes[:max_files]:
            item = self._file_change(change, packs, max(0, min(PATCH_LIMIT, budget)))
            budget -= len(item["patch"].encode("utf-8"))
            files.append(item)
        answer = {
            "commit": _commit_item(commit),
            "files": files,
            "stats": {
                "additions": sum(f["additions"] for f in files),
                "deletions": sum(f["deletions"] for f in files),
                "filesChanged": len(changes),
            },
            "truncated": len(files) < len(changes) or any(f.get("truncated") for f in files),
        }
        return answer

    def _too_large(self, entry: Any, packs: Callable[[], list[Pack]]) -> bool:
        if entry is None or entry.sha is None or S_ISGITLINK(entry.mode):
            return False
        return (self._object_size(entry.sha, packs) or 0) > DIFF_MAX_BLOB

    def _file_change(
        self, change: TreeChange, packs: Callable[[], list[Pack]], patch_limit: int
    ) -> dict:
        kind = change.type
        old = change.old if kind in (CHANGE_DELETE, CHANGE_MODIFY, CHANGE_RENAME) else None
        new = change.new if kind != CHANGE_DELETE else None
        # A copy has no API status of its own; it reads as an added file.
        status = {
            CHANGE_DELETE: "deleted",
            CHANGE_MODIFY: "modified",
            CHANGE_RENAME: "renamed",
        }.get(kind, "added")
        entry = new or old
        assert entry is not None  # a change has one side at least
        if self._too_large(old, packs) or self._too_large(new, packs):
            # Never loaded: the first bytes are enough to tell binary from text.
            binary = any(_is_binary(self._entry_head(e)) for e in (old, new))
            patch, additions, deletions, truncated = "", 0, 0, not binary
        else:
            old_bytes, new_bytes = self._entry_bytes(old), self._entry_bytes(new)
            binary = _is_binary(old_bytes) or _is_binary(new_bytes)
            if binary:
                patch, additions, deletions, truncated = "", 0, 0, False
            else:
                patch, additions, deletions, truncated = _patch(old_bytes, new_bytes, patch_limit)
        item = {
            "path": entry.path.decode("utf-8", "replace"),
            "oldPath": old.path.decode("utf-8", "replace") if old else None,
            "status": status,
            "additions": additions,
            "deletions": deletions,
            "binary": binary,
            "patch": patch,
        }
        if truncated:
            item["truncated"] = True
        return item

    def _entry_bytes(self, entry: Any) -> bytes:
        if entry is None:
            return b""
        if S_ISGITLINK(entry.mode):
            # The commit lives in another repository; git shows this line instead.
            return b"Subproject commit " + entry.sha + b"\n"
        return self._store.get_raw(entry.sha)[1]

    def _entry_head(self, entry: Any) -> bytes:
        if entry is None or S_ISGITLINK(entry.mode):
            return b""
        return self.blob_head(entry.sha.decode("ascii"))
