"""Plain data from git objects: paths, oids, people, commit items, pack headers, text."""

from __future__ import annotations

import re
import stat
import zlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from dulwich.errors import ObjectFormatException
from dulwich.objects import S_ISGITLINK, Commit
from dulwich.pack import OFS_DELTA, REF_DELTA
from dulwich.refs import check_ref_format

from ..errors import BadRequest
from .process import GitError

ZERO_OID = "0" * 40
PATCH_LIMIT = 1 << 20  # bytes of patch text per file before "truncated"
DIFF_MAX_BLOB = 4 << 20  # larger sides are not line-diffed: difflib would take seconds
BINARY_SNIFF = 8000  # git's own window for the NUL-byte binary test
MAX_PATH = 4096
RANGE_COMMITS = 250  # commits a pull request or compare lists, as on GitHub
RANGE_FILES = 3000  # files a pull request lists, as on GitHub
RANGE_PATCH_LINES = 20000  # changed lines past which a file's patch is left out

_OID_RE = re.compile(r"[0-9a-f]{40}")
_SHORT_OID_RE = re.compile(r"[0-9a-f]{7,39}")
_HEADS = b"refs/heads/"
_TAGS = b"refs/tags/"

# One record per commit: fields split by NUL; `-z` ends each record with NUL too.
_LOG_FIELDS = ("%H", "%P", "%an", "%ae", "%at", "%cn", "%ce", "%ct", "%B")
_LOG_FORMAT = "%x00".join(_LOG_FIELDS)

# Raw bytes may be served with these types: browsers render them, never run them.
# SVG is left out on purpose, it can carry script.
_IMAGE_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
    (b"BM", "image/bmp"),
    (b"\x00\x00\x01\x00", "image/x-icon"),
)

T = TypeVar("T")
K = TypeVar("K")
V = TypeVar("V")


class Kept(Generic[K, V]):
    """Facts about objects by oid, for every repository: an object never changes.

    Past `most` entries it starts empty again: no bookkeeping on a read, and a lookup
    or a store is one dict operation, safe from any thread.
    """

    def __init__(self, most: int) -> None:
        self.most = most
        self._kept: dict[K, V] = {}

    def get(self, key: K) -> V | None:
        """The value kept for key, or None."""
        return self._kept.get(key)

    def put(self, key: K, value: V) -> None:
        """Keep a value."""
        if len(self._kept) >= self.most:
            self._kept = {}
        self._kept[key] = value


def clean_path(path: str) -> list[str]:
    """Split a user-given repository path into components, rejecting escapes."""
    if len(path) > MAX_PATH or "\x00" in path or "\\" in path or path.startswith("/"):
        raise BadRequest("invalid path")
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise BadRequest("invalid path") from None
    # "a//b" and a trailing "/" name the same entry; only "." and ".." can escape.
    parts = [part for part in path.split("/") if part]
    if any(part in (".", "..") for part in parts):
        raise BadRequest("invalid path")
    return parts


def check_oid(oid: str) -> str:
    """Return a full 40-hex object id in lower case, or raise BadRequest."""
    lowered = oid.lower() if isinstance(oid, str) else ""
    if not _OID_RE.fullmatch(lowered):
        raise BadRequest("invalid commit id")
    return lowered


def _valid_branch(branch: str) -> bytes:
    """Return the full ref of a branch name, or raise BadRequest."""
    ref = _ref_name(_HEADS, branch)
    if ref is None:
        raise BadRequest("invalid branch name")
    return ref


def _ref_name(prefix: bytes, name: str) -> bytes | None:
    """The full ref for a short name, or None when git would refuse the name."""
    if not name or name.startswith("-") or name in ("HEAD", "@"):
        return None
    try:
        ref = prefix + name.encode("utf-8")
    except UnicodeEncodeError:
        return None
    return ref if check_ref_format(ref) else None


def _iso(seconds: int | None) -> str:
    """Epoch seconds as ISO 8601 UTC with a Z."""
    # A crafted commit can carry any timestamp, or one dulwich reads as None;
    # datetime only covers years 1..9999.
    seconds = min(max(seconds or 0, 0), 253402300799)
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _text(raw: bytes, encoding: bytes | None = None) -> str:
    """Decode commit text the way git log would show it, never failing."""
    if encoding:
        try:
            return raw.decode(encoding.decode("ascii"), "replace")
        except (LookupError, UnicodeDecodeError):
            pass
    return raw.decode("utf-8", "replace")


def _split_ident(raw: bytes) -> tuple[bytes, bytes]:
    """Split "Name <email>" into its two parts as git's %an and %ae do (split_ident_line).

    The name runs to the first "<" less trailing whitespace (leading whitespace stays);
    the email runs from there to the next ">". Without both, git shows neither.
    """
    name, bracket, rest = raw.partition(b"<")
    email, closed, _ = rest.partition(b">")
    if not bracket or not closed:
        return b"", b""
    return name.rstrip(b" \t\n\r"), email


def _person(name: bytes, email: bytes, seconds: int | None, encoding: bytes | None = None) -> dict:
    return {"name": _text(name, encoding), "email": _text(email, encoding), "date": _iso(seconds)}


def _commit_item(commit: Commit) -> dict:
    """The API's commit item from a dulwich commit, as `git log` shows it (see _log_item)."""
    # git log re-encodes the whole commit, names too, from its encoding header.
    encoding = commit.encoding
    return {
        "oid": commit.id.decode("ascii"),
        "message": _text(commit.message or b"", encoding),
        "author": _person(*_split_ident(commit.author), commit.author_time, encoding),
        "committer": _person(*_split_ident(commit.committer), commit.commit_time, encoding),
        "parents": [parent.decode("ascii") for parent in commit.parents],
        "timestamp": max(commit.author_time or 0, 0) * 1000,  # as _iso reads it
    }


def _readable(commit: Commit) -> bool:
    """Whether _commit_item can describe the commit as git log would (else git answers)."""
    try:
        fields = (commit.author, commit.author_time, commit.committer, commit.commit_time)
    except ObjectFormatException:
        return False
    # git reads a date as unsigned: a negative one is git's to show.
    return None not in fields and commit.author_time >= 0 and commit.commit_time >= 0


def _epoch(raw: bytes) -> int:
    """A `git log` date in seconds; 0 where git printed none (a crafted, unreadable date)."""
    return int(raw) if raw.isdigit() else 0


def _log_item(fields: list[bytes]) -> dict:
    """The API's commit item from one `git log` record (see _LOG_FIELDS)."""
    oid, parents, an, ae, at, cn, ce, ct, message = fields
    return {
        "oid": oid.decode("ascii"),
        "message": _text(message),
        "author": _person(an, ae, _epoch(at)),
        "committer": _person(cn, ce, _epoch(ct)),
        "parents": [p.decode("ascii") for p in parents.split()],
        "timestamp": _epoch(at) * 1000,
    }


def _parse_log(output: bytes) -> list[dict]:
    fields = output.split(b"\x00")
    width = len(_LOG_FIELDS)
    # `-z` ends every record with NUL, so a well-formed answer leaves one empty tail.
    if fields[-1] != b"" or (len(fields) - 1) % width:
        raise GitError("unexpected git log output")
    return [_log_item(fields[i : i + width]) for i in range(0, len(fields) - 1, width)]


def _is_binary(data: bytes) -> bool:
    """Git's test: a NUL byte early in the content."""
    return b"\x00" in data[:BINARY_SNIFF]


def _as_text(data: bytes) -> str | None:
    """The content as text, or None when it must travel as base64."""
    if _is_binary(data):
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _content_type(data: bytes) -> str:
    """A Content-Type that cannot make a browser run the bytes."""
    if _as_text(data) is not None:
        return "text/plain; charset=utf-8"
    for magic, mime in _IMAGE_MAGIC:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return "application/octet-stream"


def _delta_result_size(delta: bytes) -> int:
    """The result size from a git delta header: two little-endian base-128 varints."""
    _, pos = _varint(delta, 0)  # the size of the base
    return _varint(delta, pos)[0]


def _varint(buf: Any, pos: int) -> tuple[int, int]:
    """A little-endian base-128 varint at pos: (value, position after it)."""
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def _inflate_head(read: Callable[[int], bytes], want: int) -> bytes:
    """The first `want` bytes of a zlib stream, inflating no more than that."""
    inflater, out = zlib.decompressobj(), b""
    while len(out) < want and not inflater.eof:
        chunk = inflater.unconsumed_tail or read(256)
        if not chunk:
            break
        out += inflater.decompress(chunk, want - len(out))
    return out


def _packed_size(buf: Any, offset: int) -> int:
    """An object's size from its pack entry header, as `git cat-file -s` reads it."""
    byte = buf[offset]
    kind, size, shift, pos = (byte >> 4) & 7, byte & 0x0F, 4, offset + 1
    while byte & 0x80:
        byte = buf[pos]
        pos += 1
        size |= (byte & 0x7F) << shift
        shift += 7
    if kind == OFS_DELTA:
        while buf[pos] & 0x80:
            pos += 1
        pos += 1
    elif kind == REF_DELTA:
        pos += 20
    else:
        return size

    # A delta states its result's size in its first bytes: two varints of at most 10
    # bytes each; inflating those is all it takes.
    def read(n: int) -> bytes:
        nonlocal pos
        pos += n
        return bytes(buf[pos - n : pos])

    return _delta_result_size(_inflate_head(read, 20))


def _entry_type(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "dir"
    if S_ISGITLINK(mode):
        return "submodule"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "file"
