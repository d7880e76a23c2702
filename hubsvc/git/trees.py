"""Trees, files and blobs at a revision, resolved inside git tree objects."""

from __future__ import annotations

import base64
import functools
import stat
import subprocess
import zlib
from collections.abc import Callable
from typing import Any

from dulwich.objects import S_ISGITLINK, hex_to_filename
from dulwich.pack import Pack

from ..errors import NotFound
from .base import RepoBase, _locked
from .objects import (
    BINARY_SNIFF,
    Kept,
    _as_text,
    _content_type,
    _entry_type,
    _inflate_head,
    _packed_size,
    check_oid,
    clean_path,
)
from .process import _git_env, _git_status

# Where GitHub looks for CODEOWNERS, in its order; a file over 3 MB counts as none.
CODEOWNERS_PATHS = (".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS")
CODEOWNERS_MAX = 3 * 1024 * 1024
SIZES: Kept[bytes, int] = Kept(1 << 16)  # object sizes by oid: 65,536, about 8 MiB


class TreeMixin(RepoBase):
    """Directory listings, files, raw blobs and object sizes."""

    # -- trees and files --------------------------------------------------------

    def tree(self, rev: str, path: str) -> list[dict]:
        """The entries of one directory at rev: directories first, then by name."""
        return self.tree_page(rev, path, None, 0)[0]

    @_locked
    def tree_page(
        self, rev: str, path: str, limit: int | None, offset: int
    ) -> tuple[list[dict], bool]:
        """A page of one directory's entries (directories first, then by name), and whether more follow."""
        parts = clean_path(path)
        oid = self.resolve(rev)
        if oid is None:
            if self.is_empty():
                return [], False
            raise NotFound("branch not found")
        mode, sha = self._lookup(oid.encode("ascii"), parts)
        if not stat.S_ISDIR(mode):
            raise NotFound("path is not a directory")
        prefix = "".join(part + "/" for part in parts)
        # Sorted as light tuples; entries (and sizes) are built for the page alone.
        order = sorted(
            (
                (not stat.S_ISDIR(e.mode), e.path.decode("utf-8", "replace"), e)
                for e in self._store[sha].iteritems()
            ),
            key=lambda t: t[:2],
        )
        end = len(order) if limit is None else offset + limit
        packs = self._packs_once()
        entries = [
            self._tree_entry(prefix, name, entry, packs) for _, name, entry in order[offset:end]
        ]
        return entries, end < len(order)

    def _packs_once(self) -> Callable[[], list[Pack]]:
        """The store's packs, listed at the first call only: each listing rescans the folder."""
        return functools.cache(lambda: self._store.packs)

    def _tree_entry(
        self, prefix: str, name: str, entry: Any, packs: Callable[[], list[Pack]]
    ) -> dict:
        kind = _entry_type(entry.mode)
        size = None
        if kind in ("file", "symlink"):
            size = self._object_size(entry.sha, packs)
        return {
            "name": name,
            "path": prefix + name,
            "type": kind,
            "size": size,
            "oid": entry.sha.decode("ascii"),
            "mode": f"{entry.mode:06o}",
        }

    def _object_size(self, sha: bytes, packs: Callable[[], list[Pack]]) -> int | None:
        """An object's size, kept by oid: a listing asks for the same blobs again and again."""
        size = SIZES.get(sha)
        if size is None:
            size = self._read_size(sha, packs())
            if size is not None:
                SIZES.put(sha, size)
        return size

    def _read_size(self, sha: bytes, packs: list[Pack]) -> int | None:
        """An object's size from its header, as `git cat-file -s` reads it: nothing is inflated."""
        # Rebuilding a blob at the end of a 50-deep delta chain costs ~0.2 ms in a
        # fresh instance, and inflating a 400 MB blob of zeros to count it took 800 MB;
        # a delta's header already states the size of its result.
        for pack in packs:
            try:
                offset = pack.index.object_offset(sha)
            except KeyError:
                continue
            try:
                return _packed_size(pack.data._buffer(), offset)  # the pack's mmap
            except (AttributeError, ValueError, IndexError, zlib.error):
                break  # a pack dulwich no longer maps as it did: git answers below
        try:
            with open(hex_to_filename(self._store.path, sha), "rb") as fh:
                header = _inflate_head(fh.read, 32)  # "blob <size>\0", a loose object
            return int(header.split(b"\x00", 1)[0].split(b" ", 1)[1])
        except (OSError, ValueError, IndexError, zlib.error):
            pass
        code, out, _ = _git_status(str(self.path), "cat-file", "-s", sha.decode("ascii"))
        return int(out) if code == 0 else None

    @_locked
    def file(self, rev: str, path: str, max_bytes: int | None = None) -> dict:
        """One file at rev: UTF-8 text, or base64 for binary data; over max_bytes no content."""
        parts, sha = self._blob_oid(rev, path)
        size = self._object_size(sha, self._packs_once())
        item = {"path": "/".join(parts), "name": parts[-1], "oid": sha.decode("ascii")}
        if size is None:
            raise NotFound("path not found")
        if max_bytes is not None and size > max_bytes:
            # The first bytes tell text from binary; the content itself stays in git.
            text = _as_text(self.blob_head(sha.decode("ascii")))
            return {
                **item,
                "size": size,
                "isBinary": text is None,
                "encoding": "utf-8" if text is not None else "base64",
                "content": "",
                "truncated": True,
            }
        data = self._store.get_raw(sha)[1]
        text = _as_text(data)
        return {
            **item,
            "size": len(data),
            "isBinary": text is None,
            "encoding": "utf-8" if text is not None else "base64",
            "content": text if text is not None else base64.b64encode(data).decode("ascii"),
        }

    @_locked
    def blob_stream_info(self, rev: str, path: str) -> tuple[bytes, str]:
        """A file's raw bytes and a Content-Type that is safe to serve them with."""
        data = self._blob(rev, path)[2]
        return data, _content_type(data)

    @_locked
    def raw_blob(self, rev: str, path: str, max_bytes: int) -> dict:
        """A file's oid, size and safe Content-Type, with its bytes only when at most max_bytes."""
        sha = self._blob_oid(rev, path)[1]
        size = self._object_size(sha, self._packs_once())
        if size is None:
            raise NotFound("path not found")
        oid = sha.decode("ascii")
        if size > max_bytes:
            return {
                "oid": oid,
                "size": size,
                "data": None,
                "contentType": _content_type(self.blob_head(oid)),
            }
        data = self._store.get_raw(sha)[1]
        return {"oid": oid, "size": len(data), "data": data, "contentType": _content_type(data)}

    def codeowners(self, rev: str) -> str | None:
        """The CODEOWNERS file at rev, from the first of GitHub's places that has one."""
        for path in CODEOWNERS_PATHS:
            try:
                found = self.file(rev, path, CODEOWNERS_MAX)
            except NotFound:
                continue
            # Too large or not text: GitHub ignores such a file, and so no one owns anything.
            return None if found.get("truncated") or found["isBinary"] else found["content"]
        return None

    def _blob_oid(self, rev: str, path: str) -> tuple[list[str], bytes]:
        """(path parts, blob oid) of a file or symlink at rev."""
        parts = clean_path(path)
        mode, sha = self._lookup(self._commit_for(rev), parts)
        if stat.S_ISDIR(mode) or S_ISGITLINK(mode):
            raise NotFound("path is not a file")
        return parts, sha

    def _blob(self, rev: str, path: str) -> tuple[list[str], bytes, bytes]:
        """(path parts, blob oid, content) of a file or symlink at rev."""
        parts, sha = self._blob_oid(rev, path)
        try:
            return parts, sha, self._store.get_raw(sha)[1]
        except KeyError:
            raise NotFound("path not found") from None

    def _lookup(self, commit_oid: bytes, parts: list[str]) -> tuple[int, bytes]:
        """Walk tree objects from a commit's root; never touches the disk path."""
        mode, sha = stat.S_IFDIR, self._store[commit_oid].tree
        for part in parts:
            if not stat.S_ISDIR(mode):
                raise NotFound("path not found")
            try:
                mode, sha = self._store[sha][part.encode("utf-8")]
            except KeyError:
                raise NotFound("path not found") from None
        return mode, sha

    def blob_head(self, oid: str, size: int = BINARY_SNIFF) -> bytes:
        """The first bytes of a blob, read by git without ever holding the whole of it."""
        proc = subprocess.Popen(
            ["git", f"--git-dir={self.path}", "cat-file", "blob", check_oid(oid)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=_git_env(),
        )
        try:
            assert proc.stdout is not None
            head = b""
            while len(head) < size and (chunk := proc.stdout.read(size - len(head))):
                head += chunk
            return head
        finally:
            proc.kill()
            proc.communicate()
