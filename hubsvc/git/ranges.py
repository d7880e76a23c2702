"""Comparing two commits (pull requests, compare): commits, files, .diff and .patch."""

from __future__ import annotations

from typing import IO

from ..errors import NotFound
from .base import RepoBase
from .objects import (
    _LOG_FORMAT,
    DIFF_MAX_BLOB,
    PATCH_LIMIT,
    RANGE_COMMITS,
    RANGE_FILES,
    RANGE_PATCH_LINES,
    ZERO_OID,
    _parse_log,
    check_oid,
)
from .process import GitError, _bounded_lines, _git_reader, _git_status, _run_git

# Renames found, and the text as git has it: no colour, no external diff or textconv
# driver a repository's attributes could name.
_DIFF_FLAGS = ("-M", "--no-color", "--no-ext-diff", "--no-textconv")
TEXT_CHUNK = 64 << 10  # bytes of .diff/.patch text copied at a time


class RangeMixin(RepoBase):
    """A range base...head, each answer bounded while git's output is read."""

    # -- abbreviated oids and comparing two commits (pull requests, compare) -----

    def merge_base(self, base: str, head: str) -> str | None:
        """The best common ancestor of two commits, None for unrelated histories."""
        code, out, err = _git_status(
            str(self.path), "merge-base", "--end-of-options", check_oid(base), check_oid(head)
        )
        if code == 1:
            return None
        if code != 0:
            raise GitError("git merge-base failed: " + err.decode("utf-8", "replace").strip())
        return out.strip().decode("ascii")

    def ahead_behind(self, base: str, head: str) -> tuple[int, int]:
        """(commits in head not in base, commits in base not in head)."""
        out = _run_git(
            str(self.path),
            "rev-list",
            "--left-right",
            "--count",
            "--end-of-options",
            f"{check_oid(base)}...{check_oid(head)}",
            "--",
        )
        behind, ahead = (int(n) for n in out.split())
        return ahead, behind

    def range_commits(
        self, base: str, head: str, limit: int, skip: int, cap: int = RANGE_COMMITS
    ) -> tuple[list[dict], int]:
        """Commits in head and not in base, oldest first (the first cap of them), and their total."""
        out = _run_git(
            str(self.path),
            "rev-list",
            "--reverse",
            "--end-of-options",
            check_oid(head),
            "^" + check_oid(base),
            "--",
        )
        oids = out.decode("ascii").split()
        page = oids[:cap][skip : skip + limit]
        if not page:
            return [], len(oids)
        code, log, err = _git_status(
            str(self.path),
            "log",
            "--no-walk=unsorted",
            "-z",
            f"--format={_LOG_FORMAT}",
            "--stdin",
            stdin="\n".join(page).encode() + b"\n",
        )
        if code != 0:
            raise GitError("git log failed: " + err.decode("utf-8", "replace").strip())
        return _parse_log(log), len(oids)

    def range_files(
        self,
        base: str,
        head: str,
        limit: int,
        offset: int,
        cap: int = RANGE_FILES,
        max_bytes: int | None = None,
    ) -> tuple[list[dict], int]:
        """Files changed from base's merge base with head to head (a page, with patches), and how many.

        The merge base makes this GitHub's three-dot diff: what head adds, whatever base
        did since. Patches are cut at PATCH_LIMIT bytes and max_bytes in all, and skipped
        past RANGE_PATCH_LINES changed lines or for a side over DIFF_MAX_BLOB, all marked
        truncated; only the first cap files are listed. git's output is read as it comes
        and never held past those limits.
        """
        start = self.merge_base(base, head)
        if start is None:
            raise NotFound("no common ancestor between base and head")
        out = _run_git(
            str(self.path),
            "-c",
            "core.quotepath=false",
            "diff",
            "--raw",
            "--numstat",
            "-z",
            "-M",
            "--no-abbrev",
            "--no-ext-diff",
            "--no-textconv",
            "--end-of-options",
            start,
            check_oid(head),
            "--",
        )
        changes = _parse_raw_numstat(out)
        page = changes[:cap][offset : offset + limit]
        sizes = self._blob_sizes({oid for c in page for oid in c["_oids"]})
        wanted = [
            c
            for c in page
            if not c["binary"]
            and c["additions"] + c["deletions"] <= RANGE_PATCH_LINES
            and all(sizes.get(oid, 0) <= DIFF_MAX_BLOB for oid in c["_oids"])
        ]
        patches: dict[bytes, tuple[bytes, bool]] = {}
        if wanted:
            specs = [p for c in wanted for p in {c["_old"], c["_new"]}]
            with _git_reader(
                str(self.path),
                "--literal-pathspecs",
                "-c",
                "core.quotepath=false",
                "diff",
                "-p",
                *_DIFF_FLAGS,
                "--end-of-options",
                start,
                check_oid(head),
                "--",
                *(p.decode("utf-8", "surrogateescape") for p in specs),
            ) as text:
                budget = len(wanted) * PATCH_LIMIT if max_bytes is None else max_bytes
                patches = _read_patches(text, budget)
        files = []
        for change in page:
            old, new = change.pop("_old"), change.pop("_new")
            del change["_oids"]
            patch, cut = patches.get(_diff_header(old, new), (None, False))
            change["patch"] = "" if patch is None else patch.decode("utf-8", "replace")
            if cut or (patch is None and not change["binary"]):
                change["truncated"] = True
            files.append(change)
        return files, len(changes)

    def _blob_sizes(self, oids: set[str]) -> dict[str, int]:
        """Sizes of blobs from their object headers, in one git call: nothing is inflated."""
        oids.discard(ZERO_OID)
        if not oids:
            return {}
        code, out, err = _git_status(
            str(self.path),
            "cat-file",
            "--batch-check",
            stdin="".join(oid + "\n" for oid in oids).encode(),
        )
        if code != 0:
            raise GitError("git cat-file failed: " + err.decode("utf-8", "replace").strip())
        # "<oid> blob <size>", or "<oid> missing" for a submodule's commit.
        return {
            oid: int(size)
            for oid, kind, size in (
                line.split()
                for line in out.decode("ascii").splitlines()
                if not line.endswith(" missing")
            )
            if kind == "blob"
        }

    def range_text(self, base: str, head: str, kind: str, limit: int, into: IO[bytes]) -> bool:
        """Write the range as `git diff` (kind "diff") or `git format-patch` text into `into`.

        False, with git ended at once, when the text passes limit bytes; it is copied in
        chunks, so memory holds one chunk whatever the size (`into` may be a file).
        """
        if kind == "diff":
            start = self.merge_base(base, head)
            if start is None:
                raise NotFound("no common ancestor between base and head")
            args = [
                "diff",
                *_DIFF_FLAGS,
                "--end-of-options",
                start,
                check_oid(head),
                "--",
            ]
        else:
            args = [
                "format-patch",
                "--stdout",
                *_DIFF_FLAGS,
                "--end-of-options",
                check_oid(head),
                "^" + check_oid(base),
                "--",
            ]
        written = 0
        with _git_reader(str(self.path), *args) as out:
            while written <= limit and (chunk := out.read(min(TEXT_CHUNK, limit + 1 - written))):
                into.write(chunk)
                written += len(chunk)
        return written <= limit


_STATUS = {
    "A": "added",
    "D": "deleted",
    "M": "modified",
    "R": "renamed",
    "T": "modified",
    "C": "added",
}


def _parse_raw_numstat(out: bytes) -> list[dict]:
    """Pair `git diff --raw --numstat -z` records: raw lines come first, numstat in the same order."""
    tokens = out.split(b"\x00")
    raw: list[tuple[str, bytes, bytes, tuple[str, str]]] = []
    stats: list[tuple[str, str]] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.startswith(b":"):
            fields = token.decode("ascii").split()
            status, oids = fields[4][:1], (fields[2], fields[3])
            if status in "RC":
                raw.append((status, tokens[i + 1], tokens[i + 2], oids))
                i += 3
            else:
                raw.append((status, tokens[i + 1], tokens[i + 1], oids))
                i += 2
        elif token:
            plus, minus, path = token.split(b"\t", 2)
            stats.append((plus.decode(), minus.decode()))
            i += 1 if path else 3  # a rename's paths follow as two more tokens
        else:
            i += 1
    changes = []
    for (status, old, new, oids), (added, deleted) in zip(raw, stats):
        binary = added == "-"
        changes.append(
            {
                "path": new.decode("utf-8", "replace"),
                "oldPath": old.decode("utf-8", "replace")
                if status in ("D", "M", "R", "T")
                else None,
                "status": _STATUS.get(status, "modified"),
                "additions": 0 if binary else int(added),
                "deletions": 0 if binary else int(deleted),
                "binary": binary,
                "_old": old,
                "_new": new,
                "_oids": oids,
            }
        )
    return changes


def _c_quote(name: bytes) -> bytes:
    """A path as git writes it in a diff header (core.quotepath=false)."""
    if not any(c < 0x20 or c in b'"\\' or c == 0x7F for c in name):
        return name
    escapes = {
        7: b"\\a",
        8: b"\\b",
        9: b"\\t",
        10: b"\\n",
        11: b"\\v",
        12: b"\\f",
        13: b"\\r",
        34: b'\\"',
        92: b"\\\\",
    }
    body = b"".join(
        escapes.get(c) or (b"\\%03o" % c if c < 0x20 or c == 0x7F else bytes([c])) for c in name
    )
    return b'"' + body + b'"'


def _diff_header(old: bytes, new: bytes) -> bytes:
    return b"diff --git " + _c_quote(b"a/" + old) + b" " + _c_quote(b"b/" + new)


def _read_patches(out: IO[bytes], budget: int) -> dict[bytes, tuple[bytes, bool]]:
    """A streamed `git diff -p`, file by file, keyed by its `diff --git` line: the hunks
    (as the commit diff gives them, no headers) in whole lines, at most PATCH_LIMIT bytes
    each and budget in all, and whether some were cut. Reading stops once budget is spent.
    """
    patches: dict[bytes, tuple[bytes, bool]] = {}
    key: bytes | None = None
    kept: list[bytes] = []
    room, cut, in_hunks = 0, False, False

    def close() -> int:
        if key is not None:
            patches[key] = (b"".join(kept), cut)
        return sum(map(len, kept))

    # Inside a hunk every line starts with ' ', '+', '-' or '\\', so a line starting
    # "diff --git " always opens the next file.
    for line in _bounded_lines(out, PATCH_LIMIT):
        if line.startswith(b"diff --git "):
            budget -= close()
            if budget <= 0:
                return patches  # the files left get no patch and say truncated
            key, kept = line.rstrip(b"\n"), []
            room, cut, in_hunks = min(PATCH_LIMIT, budget), False, False
        elif key is None or not (in_hunks or line.startswith(b"@@")):
            continue  # the file's headers: the item has its paths and modes
        elif cut or len(line) > room:
            in_hunks = cut = True
        else:
            in_hunks = True
            kept.append(line)
            room -= len(line)
    close()
    return patches
