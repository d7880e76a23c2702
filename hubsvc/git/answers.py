"""Browsing answers kept by what names them for good, and a branch's tip read without a thread.

A tree page, a file or a diff at a commit never changes, so the second request for one
can be answered on the event loop. What stays to learn per request is where the branch
points (two small file reads, below) and, for a commit named by oid, that no prune has
taken it since (one stat of the repository's prune stamp). Each thread hop costs two
wake-ups, which on a loaded machine are milliseconds, more than the read itself.
"""

from __future__ import annotations

import functools
import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from .objects import _HEADS, _OID_RE, _ref_name

# A file of this name in a repository's folder (where no push can write one) is replaced
# by each prune: its identity says no object an answer was read from has gone since.
PRUNE_STAMP = "hubsvc-pruned"
Stamp = tuple[int, int]


class Answers:
    """Answers by key, up to a total weight (about their bytes); least recently used go."""

    def __init__(self, limit: int, most_one: int) -> None:
        self.limit, self.most_one = limit, most_one
        self.weight = 0
        self._kept: OrderedDict[Any, tuple[int, Any]] = OrderedDict()
        self._lock = threading.Lock()  # filled from git threads, read on the loop

    def get(self, key: Any) -> Any:
        """The answer kept for key, or None."""
        with self._lock:
            found = self._kept.get(key)
            if found is None:
                return None
            self._kept.move_to_end(key)
            return found[1]

    def put(self, key: Any, value: Any, weight: int) -> None:
        """Keep an answer (one heavier than most_one is not kept)."""
        if weight > self.most_one:
            return
        with self._lock:
            old = self._kept.pop(key, None)
            if old is not None:
                self.weight -= old[0]
            self._kept[key] = (weight, value)
            self.weight += weight
            while self.weight > self.limit:
                self.weight -= self._kept.popitem(last=False)[1][0]

    def clear(self) -> None:
        """Forget everything (tests)."""
        with self._lock:
            self._kept.clear()
            self.weight = 0


# Trees and files by commit oid and path: content-addressed, the same in every repository.
AT_COMMIT = Answers(32 << 20, 512 << 10)
# Diffs by (repository, prune stamp, oid): the commit must still be in that repository.
DIFFS = Answers(32 << 20, 1 << 20)


def branch_tip(git_dir: Path, branch: str) -> str | None:
    """The oid refs/heads/<branch> holds, read as git does (loose ref, then packed-refs).

    None when this cheap read cannot say (no such branch, a symbolic ref, an odd file):
    the caller then asks dulwich in a git thread, which gives the full answer. Cheap
    enough for the event loop: a 41-byte file, and packed-refs parsed once per version.
    """
    ref = _head_ref(branch)
    if ref is None:
        return None
    # os.open and os.read, not open(): no file object to build and drop on every read
    # of a browsing request (27 against 6 microseconds here).
    try:
        fd = os.open(os.path.join(git_dir, ref[1]), os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return _packed(git_dir).get(ref[0])
    except OSError:  # a reftable repository, permissions
        return None
    try:
        text = os.read(fd, 64)
    except OSError:  # a folder where a ref would be
        return None
    finally:
        os.close(fd)
    oid = text.strip().decode("ascii", "replace")
    return oid if len(text) <= 41 and _OID_RE.fullmatch(oid) else None


@functools.lru_cache(maxsize=1024)
def _head_ref(branch: str) -> tuple[bytes, str] | None:
    """refs/heads/<branch> as bytes and as a path, or None where the cheap read is not for it."""
    if _OID_RE.fullmatch(branch.lower()):
        return None  # a 40-hex name is read as an oid first: dulwich decides
    ref = _ref_name(_HEADS, branch)
    return None if ref is None else (ref, ref.decode("utf-8"))


_PACKED: dict[Path, tuple[tuple[int, int, int], dict[bytes, str]]] = {}
_PACKED_MOST = 256


def _packed(git_dir: Path) -> dict[bytes, str]:
    """packed-refs as {ref: oid}, parsed again whenever the file is replaced."""
    path = git_dir / "packed-refs"
    try:
        st = os.stat(path)
    except OSError:
        return {}
    version = (st.st_ino, st.st_mtime_ns, st.st_size)
    kept = _PACKED.get(git_dir)
    if kept is not None and kept[0] == version:
        return kept[1]
    refs: dict[bytes, str] = {}
    try:
        with open(path, "rb") as fh:
            for line in fh:
                if line[:1] in (b"#", b"^"):
                    continue
                oid, _, name = line.rstrip(b"\n").partition(b" ")
                if len(oid) == 40 and name:
                    refs[name] = oid.decode("ascii")
    except OSError:
        return {}
    if len(_PACKED) >= _PACKED_MOST:
        _PACKED.clear()
    _PACKED[git_dir] = (version, refs)
    return refs


def prune_stamp(git_dir: Path) -> Stamp | None:
    """The identity of the repository's prune stamp; None when it has none yet."""
    try:
        st = os.stat(git_dir / PRUNE_STAMP)
    except OSError:
        return None
    return (st.st_ino, st.st_mtime_ns)


def replace_prune_stamp(git_dir: Path) -> None:
    """A new stamp after a prune; raises if it cannot be written, so the prune fails too."""
    temp = git_dir / f"{PRUNE_STAMP}.{os.getpid()}.{threading.get_ident()}"
    temp.write_bytes(os.urandom(16))
    os.replace(temp, git_dir / PRUNE_STAMP)


def ensure_prune_stamp(git_dir: Path) -> Stamp | None:
    """The stamp's identity, writing a first one if there is none; None when it can't be."""
    found = prune_stamp(git_dir)
    if found is not None:
        return found
    temp = git_dir / f"{PRUNE_STAMP}.{os.getpid()}.{threading.get_ident()}"
    try:
        temp.write_bytes(os.urandom(16))
        try:
            os.link(temp, git_dir / PRUNE_STAMP)  # never over one a prune wrote meanwhile
        except FileExistsError:
            pass
        finally:
            temp.unlink()
    except OSError:
        return None
    return prune_stamp(git_dir)
