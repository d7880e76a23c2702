"""A thin, blocking wrapper over one bare repository that returns plain data.

Small reads (refs, trees, blobs, one commit's diff) go through dulwich in-process,
which beats spawning git for them. History walks (`commits`, `commits_between`)
run the git CLI: it stops after `--skip` + limit commits using the commit-graph,
where dulwich's walker parses every commit it passes.

One `GitRepo` keeps one dulwich `Repo` open. Its object store caches open packs
and rescans the pack directory whenever an object is missing, so a push landed by
another process is seen by an instance opened before it. dulwich does not promise
that this pack cache is thread-safe, so each instance serialises its dulwich calls
behind a lock and may be shared between `asyncio.to_thread` calls. Call `close()`
(or use `with`) to release the pack files.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import itertools
import os
import re
import stat
import subprocess
import tempfile
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, Any, TypeVar

from dulwich.diff_tree import (
    CHANGE_ADD,
    CHANGE_DELETE,
    CHANGE_MODIFY,
    CHANGE_RENAME,
    RenameDetector,
    TreeChange,
    tree_changes,
)
from dulwich.objects import S_ISGITLINK, Blob, Commit, Tree, hex_to_filename
from dulwich.pack import OFS_DELTA, REF_DELTA, Pack
from dulwich.patch import unified_diff
from dulwich.refs import check_ref_format
from dulwich.repo import Repo

from ..errors import BadRequest, Conflict, NotFound

ZERO_OID = "0" * 40
PATCH_LIMIT = 1 << 20  # bytes of patch text per file before "truncated"
DIFF_MAX_BLOB = 4 << 20  # larger sides are not line-diffed: difflib would take seconds
BINARY_SNIFF = 8000  # git's own window for the NUL-byte binary test
GIT_TIMEOUT = 30.0
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


class GitError(RuntimeError):
    """The git CLI failed; the error middleware turns this into a 500."""


def _locked(method: Callable[..., T]) -> Callable[..., T]:
    """Serialise calls on one instance: dulwich's pack cache has no lock of its own."""
    @functools.wraps(method)
    def wrapper(self: GitRepo, *args: Any, **kwargs: Any) -> T:
        with self._lock:
            return method(self, *args, **kwargs)
    return wrapper


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


def _iso(seconds: int) -> str:
    """Epoch seconds as ISO 8601 UTC with a Z."""
    # A crafted commit can carry any timestamp; datetime only covers years 1..9999.
    seconds = min(max(seconds, 0), 253402300799)
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _text(raw: bytes, encoding: bytes | None = None) -> str:
    """Decode commit text the way git log would show it, never failing."""
    if encoding:
        try:
            return raw.decode(encoding.decode("ascii"), "replace")
        except (LookupError, UnicodeDecodeError):
            pass
    return raw.decode("utf-8", "replace")


def _split_ident(raw: bytes) -> tuple[bytes, bytes]:
    """Split "Name <email>" into its two parts as git's %an and %ae do."""
    name, _, rest = raw.partition(b"<")
    email = rest.rpartition(b">")[0] if b">" in rest else rest
    return name.strip(), email


def _person(name: bytes, email: bytes, seconds: int) -> dict:
    return {"name": _text(name), "email": _text(email), "date": _iso(seconds)}


def _commit_item(commit: Commit) -> dict:
    """The API's commit item from a dulwich commit."""
    return {
        "oid": commit.id.decode("ascii"),
        "message": _text(commit.message, commit.encoding),
        "author": _person(*_split_ident(commit.author), commit.author_time),
        "committer": _person(*_split_ident(commit.committer), commit.commit_time),
        "parents": [parent.decode("ascii") for parent in commit.parents],
        "timestamp": commit.author_time * 1000,
    }


def _log_item(fields: list[bytes]) -> dict:
    """The API's commit item from one `git log` record (see _LOG_FIELDS)."""
    oid, parents, an, ae, at, cn, ce, ct, message = fields
    return {
        "oid": oid.decode("ascii"),
        "message": _text(message),
        "author": _person(an, ae, int(at)),
        "committer": _person(cn, ce, int(ct)),
        "parents": [p.decode("ascii") for p in parents.split()],
        "timestamp": int(at) * 1000,
    }


def _parse_log(output: bytes) -> list[dict]:
    fields = output.split(b"\x00")
    width = len(_LOG_FIELDS)
    # `-z` ends every record with NUL, so a well-formed answer leaves one empty tail.
    if fields[-1] != b"" or (len(fields) - 1) % width:
        raise GitError("unexpected git log output")
    return [_log_item(fields[i:i + width]) for i in range(0, len(fields) - 1, width)]


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
        return bytes(buf[pos - n:pos])
    return _delta_result_size(_inflate_head(read, 20))


def _entry_type(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "dir"
    if S_ISGITLINK(mode):
        return "submodule"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "file"


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


def _git_env() -> dict[str, str]:
    """An environment where only the repository's own config shapes git's output."""
    # GIT_DIR and friends leak in when running under a hook; --git-dir must win.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_TERMINAL_PROMPT="0", GIT_NO_REPLACE_OBJECTS="1",
               GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    return env


def _kill_timer(proc: subprocess.Popen, timeout: float) -> tuple[threading.Timer, threading.Event]:
    """A started timer that kills proc after timeout, and the event it sets when it does."""
    fired = threading.Event()

    def kill() -> None:
        fired.set()
        proc.kill()

    timer = threading.Timer(timeout, kill)
    timer.start()
    return timer, fired


def _spawn(cmd: list[str], stdin: bytes | None, env: dict[str, str],
           timeout: float) -> tuple[int, bytes, bytes]:
    """Run a command to completion; a timer kills it when it overruns.

    subprocess.run(timeout=…) polls for the child's exit every few milliseconds, which
    costs about a millisecond per git call; blocking in communicate() and killing from
    a timer does not.
    """
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    timer, fired = _kill_timer(proc, timeout)
    try:
        out, err = proc.communicate(stdin)
    finally:
        timer.cancel()
    if fired.is_set():
        raise GitError(f"git {cmd[-1] if cmd else ''} timed out after {timeout:g} s")
    return proc.returncode, out, err


def _run_git(git_dir: str | None, *args: str, timeout: float = GIT_TIMEOUT) -> bytes:
    """Run git without a shell and return stdout, raising GitError on failure."""
    cmd = ["git"] + ([f"--git-dir={git_dir}"] if git_dir else []) + list(args)
    code, out, err = _spawn(cmd, None, _git_env(), timeout)
    if code != 0:
        message = err.decode("utf-8", "replace").strip()
        raise GitError(f"git {args[0]} failed: {message}")
    return out


@contextlib.contextmanager
def _git_reader(git_dir: str, *args: str, timeout: float = GIT_TIMEOUT) -> Iterator[IO[bytes]]:
    """git's stdout, to read as far as wanted: leaving early ends git, a failure raises GitError.

    Nothing buffers the whole output, so a diff of huge files costs what the caller keeps.
    """
    # stderr goes to a file: git may write a lot of it while stdout is not being read.
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(["git", f"--git-dir={git_dir}", *args], stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=err, env=_git_env())
        assert proc.stdout is not None
        timer, fired = _kill_timer(proc, timeout)
        whole = False
        try:
            yield proc.stdout
            whole = not proc.stdout.read(1)  # read to its end: git's exit code counts
            if whole:
                proc.wait()
        finally:
            timer.cancel()
            if proc.returncode is None:
                proc.kill()
            proc.stdout.close()
            code = proc.wait()
        if fired.is_set():
            raise GitError(f"git {args[0]} timed out after {timeout:g} s")
        if whole and code != 0:
            err.seek(0)
            message = err.read(4096).decode("utf-8", "replace").strip()
            raise GitError(f"git {args[0]} failed: {message}")


def _bounded_lines(out: IO[bytes], longest: int) -> Iterator[bytes]:
    """The lines of a stream; one longer than longest comes cut to longest + 1 bytes."""
    while line := out.readline(longest + 1):
        if len(line) > longest and not line.endswith(b"\n"):
            while (rest := out.readline(longest + 1)) and not rest.endswith(b"\n"):
                pass  # the rest of the line is read and dropped, never held
        yield line


def _configure(repo: Repo) -> None:
    """Settings every hosted repository needs for smart-HTTP pushes."""
    config = repo.get_config()
    config.set((b"http",), b"receivepack", True)
    config.set((b"receive",), b"denyNonFastForwards", False)
    config.set((b"core",), b"logallrefupdates", False)
    config.write_to_path()


class GitRepo:
    """One bare repository on disk."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._repo = Repo(str(self.path))
        self._store = self._repo.object_store
        self._lock = threading.RLock()

    def close(self) -> None:
        """Release the pack files dulwich keeps open."""
        with self._lock:
            self._repo.close()

    def __enter__(self) -> GitRepo:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- creating ---------------------------------------------------------------

    @classmethod
    def init_bare(cls, path: str | Path, default_branch: str = "main") -> GitRepo:
        """Create an empty bare repository whose HEAD names default_branch."""
        head = _valid_branch(default_branch)
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        if any(path.iterdir()):
            raise FileExistsError(f"{path} is not empty")
        repo = Repo.init_bare(str(path), default_branch=head[len(_HEADS):])
        try:
            _configure(repo)
        finally:
            repo.close()
        return cls(path)

    @classmethod
    def clone_bare(cls, source_path: str | Path, dest_path: str | Path) -> GitRepo:
        """Copy a repository's branches, tags, HEAD and history for a fork."""
        dest = Path(dest_path)
        # A local clone hard-links (or copies) the object files: objects never
        # change in place, so the fork survives the source's deletion or gc, and
        # no alternates file ties it to the source. --template= skips sample hooks.
        _run_git(None, "clone", "--bare", "--quiet", "--template=",
                 "--", str(source_path), str(dest), timeout=600)
        _run_git(str(dest), "config", "--remove-section", "remote.origin")
        with Repo(str(source_path)) as source:
            head = source.refs.get_symrefs().get(b"HEAD")
        repo = Repo(str(dest))
        try:
            # git 2.31+ carries even an unborn HEAD across, older git guesses it
            # from the branch tips; take it from the source to be sure.
            if head:
                repo.refs.set_symbolic_ref(b"HEAD", head)
            _configure(repo)
        finally:
            repo.close()
        return cls(dest)

    @_locked
    def auto_init(self, branch: str, author: str, email: str, readme: str) -> str:
        """Commit a README.md on a new branch and return the commit oid."""
        ref = _valid_branch(branch)
        blob = Blob.from_string(readme.encode("utf-8"))
        tree = Tree()
        tree.add(b"README.md", 0o100644, blob.id)
        commit = Commit()
        commit.tree = tree.id
        commit.author = commit.committer = self._ident(author, email)
        commit.author_time = commit.commit_time = int(time.time())
        commit.author_timezone = commit.commit_timezone = 0
        commit.message = b"Initial commit\n"
        for obj in (blob, tree, commit):
            self._store.add_object(obj)
        if not self._repo.refs.add_if_new(ref, commit.id):
            raise Conflict("branch already exists")
        return commit.id.decode("ascii")

    @staticmethod
    def _ident(name: str, email: str) -> bytes:
        # "<", ">" and newlines would make a commit header git cannot parse.
        def scrub(text: str) -> str:
            return re.sub(r"[<>\x00\n]", "", text).strip()
        return f"{scrub(name)} <{scrub(email)}>".encode("utf-8")

    # -- refs -------------------------------------------------------------------

    @_locked
    def set_default_branch(self, branch: str) -> None:
        """Point HEAD at a branch (which need not exist yet)."""
        self._repo.refs.set_symbolic_ref(b"HEAD", _valid_branch(branch))

    @_locked
    def default_branch(self) -> str | None:
        """The branch HEAD points at, or None when HEAD is detached."""
        target = self._repo.refs.get_symrefs().get(b"HEAD")
        if not target or not target.startswith(_HEADS):
            return None
        return target[len(_HEADS):].decode("utf-8", "replace")

    @_locked
    def is_empty(self) -> bool:
        """True when the repository has no branches."""
        return not self._repo.refs.keys(base=_HEADS)

    @_locked
    def branches(self) -> list[dict]:
        """Every branch with its tip commit, sorted by name."""
        default = self.default_branch()
        out = []
        for name in self._repo.refs.keys(base=_HEADS):
            commit = self._commit_or_none(self._repo.refs[_HEADS + name])
            if commit is None:
                continue
            text = name.decode("utf-8", "replace")
            out.append({
                "name": text,
                "commit": {
                    "oid": commit.id.decode("ascii"),
                    "message": _text(commit.message, commit.encoding),
                    "date": _iso(commit.commit_time),
                },
                "isDefault": text == default,
            })
        return sorted(out, key=lambda branch: branch["name"])

    @_locked
    def head_oids(self) -> dict[str, str]:
        """Branch and tag refs mapped to commit oids (tags peeled), to diff pushes."""
        out = {}
        for ref in self._repo.refs.keys():
            if not ref.startswith((_HEADS, _TAGS)):
                continue
            peeled = self._peel(self._repo.refs[ref])
            if peeled is not None:
                out[ref.decode("utf-8", "replace")] = peeled.decode("ascii")
        return out

    @_locked
    def resolve(self, rev: str) -> str | None:
        """A branch, tag or full commit oid as a commit oid; None when unknown."""
        if not isinstance(rev, str):
            return None
        if _OID_RE.fullmatch(rev.lower()):
            commit = self._commit_or_none(rev.lower().encode("ascii"))
            if commit is not None:
                return commit.id.decode("ascii")
        for prefix in (_HEADS, _TAGS):
            ref = _ref_name(prefix, rev)
            if ref is None:
                return None
            sha = self._repo.refs[ref] if ref in self._repo.refs else None
            commit = self._commit_or_none(self._peel(sha))
            if commit is not None:
                return commit.id.decode("ascii")
        # Branches and tags win over an abbreviated oid, as in git.
        return self.expand_oid(rev) if _SHORT_OID_RE.fullmatch(rev.lower()) else None

    def _peel(self, sha: bytes | None) -> bytes | None:
        """Follow tag objects down to what they tag; None when an object is missing."""
        if sha is None:
            return None
        try:
            return self._store.peel(sha)[1].id
        except KeyError:
            return None

    def _commit_or_none(self, sha: bytes | None) -> Commit | None:
        try:
            obj = self._store[sha] if sha else None
        except KeyError:
            return None
        return obj if isinstance(obj, Commit) else None

    def _commit_for(self, rev: str) -> bytes:
        """The commit oid a rev names, or NotFound("branch not found")."""
        oid = self.resolve(rev)
        if oid is None:
            raise NotFound("branch not found")
        return oid.encode("ascii")

    # -- history (git CLI) ------------------------------------------------------

    def commits(self, rev: str, limit: int, skip: int) -> tuple[list[dict], bool]:
        """A page of history from rev, newest first, and whether more follows."""
        return self.commits_page(rev, limit, skip)[1:]

    def commits_page(self, rev: str, limit: int, skip: int
                     ) -> tuple[str | None, list[dict], bool]:
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

    def commits_between(self, old: str | None, new: str,
                        max_count: int) -> tuple[list[dict], int]:
        """Commits in new but not old (newest first, capped) and their total."""
        revs = [check_oid(new)]
        if revs[0] == ZERO_OID:
            return [], 0
        if old and old != ZERO_OID:
            revs.append("^" + check_oid(old))
        count = _run_git(str(self.path), "rev-list", "--count",
                         "--end-of-options", *revs, "--")
        items = self._log(revs, skip=0, max_count=max_count) if max_count > 0 else []
        return items, int(count)

    def commits_new(self, new: str, exclude: list[str], max_count: int
                    ) -> tuple[list[dict], int]:
        """Commits reachable from new and from none of exclude (newest first, capped), and their total."""
        # Given on standard input: a repository's refs can outgrow a command line.
        revs = "\n".join([check_oid(new)] + ["^" + check_oid(oid) for oid in exclude]) + "\n"
        code, out, err = _git_status(str(self.path), "rev-list", "--count", "--stdin",
                                     stdin=revs.encode())
        if code != 0:
            raise GitError("git rev-list failed: " + err.decode("utf-8", "replace").strip())
        items: list[dict] = []
        if max_count > 0:
            code, out_log, err = _git_status(str(self.path), "log", "-z", f"--format={_LOG_FORMAT}",
                                             f"--max-count={max_count}", "--stdin",
                                             stdin=revs.encode())
            if code != 0:
                raise GitError("git log failed: " + err.decode("utf-8", "replace").strip())
            items = _parse_log(out_log)
        return items, int(out)

    def _log(self, revs: list[str], skip: int, max_count: int) -> list[dict]:
        # revs are oids we produced, and --end-of-options keeps them from being
        # read as options anyway.
        output = _run_git(str(self.path), "log", "-z", f"--format={_LOG_FORMAT}",
                          f"--skip={skip}", f"--max-count={max_count}",
                          "--end-of-options", *revs, "--")
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
        _run_git(git_dir, "reflog", "expire", "--expire=now", "--expire-unreachable=now",
                 "--all")
        # -a -d rewrites every pack with the reachable objects only; prune takes the
        # loose ones; the commit-graph is rewritten so it names no pruned commit.
        _run_git(git_dir, "repack", "-a", "-d", "-q")
        _run_git(git_dir, "prune", "--expire=now")
        self.write_commit_graph()

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
        packs = self._store.packs
        # Content rename detection reads every deleted and modified blob whole: only
        # when none is large; else renames are found by oid alone, which reads nothing.
        changes = list(tree_changes(self._store, old_tree, commit.tree))
        if any(self._too_large(entry, packs) for c in changes for entry in (c.old, c.new)):
            changes = _exact_renames(changes)
        else:
            changes = list(tree_changes(self._store, old_tree, commit.tree,
                                        rename_detector=RenameDetector(self._store)))
        changes.sort(key=lambda c: (c.new or c.old).path)
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

    def _too_large(self, entry: Any, packs: list[Pack]) -> bool:
        if entry is None or entry.sha is None or S_ISGITLINK(entry.mode):
            return False
        return (self._object_size(entry.sha, packs) or 0) > DIFF_MAX_BLOB

    def _file_change(self, change: TreeChange, packs: list[Pack], patch_limit: int) -> dict:
        kind = change.type
        old = change.old if kind in (CHANGE_DELETE, CHANGE_MODIFY, CHANGE_RENAME) else None
        new = change.new if kind != CHANGE_DELETE else None
        # A copy has no API status of its own; it reads as an added file.
        status = {CHANGE_DELETE: "deleted", CHANGE_MODIFY: "modified",
                  CHANGE_RENAME: "renamed"}.get(kind, "added")
        entry = new or old
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
                patch, additions, deletions, truncated = _patch(old_bytes, new_bytes,
                                                                patch_limit)
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

    def blob_head(self, oid: str, size: int = BINARY_SNIFF) -> bytes:
        """The first bytes of a blob, read by git without ever holding the whole of it."""
        proc = subprocess.Popen(["git", f"--git-dir={self.path}", "cat-file", "blob", check_oid(oid)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, env=_git_env())
        try:
            assert proc.stdout is not None
            head = b""
            while len(head) < size and (chunk := proc.stdout.read(size - len(head))):
                head += chunk
            return head
        finally:
            proc.kill()
            proc.communicate()

    # -- trees and files --------------------------------------------------------

    def tree(self, rev: str, path: str) -> list[dict]:
        """The entries of one directory at rev: directories first, then by name."""
        return self.tree_page(rev, path, None, 0)[0]

    @_locked
    def tree_page(self, rev: str, path: str, limit: int | None, offset: int
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
        order = sorted(((not stat.S_ISDIR(e.mode), e.path.decode("utf-8", "replace"), e)
                        for e in self._store[sha].iteritems()), key=lambda t: t[:2])
        end = len(order) if limit is None else offset + limit
        packs = self._store.packs  # listed once: each listing rescans the pack folder
        entries = [self._tree_entry(prefix, name, entry, packs)
                   for _, name, entry in order[offset:end]]
        return entries, end < len(order)

    def _tree_entry(self, prefix: str, name: str, entry: Any, packs: list[Pack]) -> dict:
        kind = _entry_type(entry.mode)
        size = None
        if kind in ("file", "symlink"):
            size = self._object_size(entry.sha, packs)
        return {"name": name, "path": prefix + name, "type": kind, "size": size,
                "oid": entry.sha.decode("ascii"), "mode": f"{entry.mode:06o}"}

    def _object_size(self, sha: bytes, packs: list[Pack]) -> int | None:
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
        size = self._object_size(sha, self._store.packs)
        item = {"path": "/".join(parts), "name": parts[-1], "oid": sha.decode("ascii")}
        if size is None:
            raise NotFound("path not found")
        if max_bytes is not None and size > max_bytes:
            # The first bytes tell text from binary; the content itself stays in git.
            text = _as_text(self.blob_head(sha.decode("ascii")))
            return {**item, "size": size, "isBinary": text is None,
                    "encoding": "utf-8" if text is not None else "base64", "content": "",
                    "truncated": True}
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
        size = self._object_size(sha, self._store.packs)
        if size is None:
            raise NotFound("path not found")
        oid = sha.decode("ascii")
        if size > max_bytes:
            return {"oid": oid, "size": size, "data": None,
                    "contentType": _content_type(self.blob_head(oid))}
        data = self._store.get_raw(sha)[1]
        return {"oid": oid, "size": len(data), "data": data, "contentType": _content_type(data)}

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
        _run_git(str(self.path), "fetch", "--quiet", "--no-tags", "--no-write-fetch-head",
                 "--end-of-options", str(source_path), f"+{oid}:{ref}")

    def pull_ref(self, number: int) -> str | None:
        """Where refs/pull/<number>/head points, if it exists."""
        with self._lock:
            try:
                return self._repo.refs[f"refs/pull/{int(number)}/head".encode()].decode("ascii")
            except KeyError:
                return None

    def set_pull_ref(self, number: int, oid: str) -> None:
        """Point refs/pull/<number>/head at a commit of this repository."""
        code, _, err = _git_status(str(self.path), "update-ref", "-m", "hubsvc pull request",
                                   f"refs/pull/{int(number)}/head", check_oid(oid))
        if code != 0:
            raise GitError("git update-ref failed: " + err.decode("utf-8", "replace").strip())

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        """Whether ancestor is reachable from descendant."""
        code, _, _ = _git_status(str(self.path), "merge-base", "--is-ancestor",
                                 "--end-of-options", check_oid(ancestor), check_oid(descendant))
        return code == 0

    def merge_tree(self, base: str, head: str) -> str | None:
        """A real three-way merge of two commits: the merged tree's oid, or None on conflict."""
        code, out, err = _git_status(str(self.path), "merge-tree", "--write-tree",
                                     "--no-messages", "--end-of-options",
                                     check_oid(base), check_oid(head))
        if code == 0:
            return out.split()[0].decode("ascii")
        if code == 1:
            return None
        raise GitError("git merge-tree failed: " + err.decode("utf-8", "replace").strip())

    def commit_tree(self, tree: str, parents: list[str], message: str, name: str,
                    email: str) -> str:
        """Write a commit object (no ref moves) and return its oid."""
        args = ["commit-tree", check_oid(tree)]
        for parent in parents:
            args += ["-p", check_oid(parent)]
        ident = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email,
                 "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email}
        code, out, err = _git_status(str(self.path), *args, stdin=message.encode(), env=ident)
        if code != 0:
            raise GitError("git commit-tree failed: " + err.decode("utf-8", "replace").strip())
        return out.strip().decode("ascii")

    def update_branch(self, branch: str, new: str, old: str) -> bool:
        """Move a branch from old to new atomically; False when it no longer points at old."""
        ref = _ref_name(_HEADS, branch)
        if ref is None:
            raise BadRequest("invalid branch name")
        code, _, _ = _git_status(str(self.path), "update-ref", "-m", "hubsvc merge",
                                 "--end-of-options", ref.decode(), check_oid(new), check_oid(old))
        return code == 0

    # -- abbreviated oids and comparing two commits (pull requests, compare) -----

    def expand_oid(self, rev: str) -> str | None:
        """The commit a 7-39 hex prefix names; None when none does; 400 when several do."""
        prefix = rev.lower() if isinstance(rev, str) else ""
        if _OID_RE.fullmatch(prefix):
            return prefix if self._commit_or_none(prefix.encode("ascii")) else None
        if not _SHORT_OID_RE.fullmatch(prefix):
            return None
        # cat-file answers "ambiguous" for the bare prefix; ^{commit} lets git prefer
        # the one commit among objects of other types, as `git show abc1234` does.
        code, out, _ = _git_status(str(self.path), "cat-file", "--batch-check",
                                   stdin=f"{prefix}\n{prefix}^{{commit}}\n".encode())
        if code != 0:
            raise GitError("git cat-file failed")
        bare, peeled = out.decode("ascii", "replace").splitlines()[:2]
        if not peeled.endswith("missing"):
            return peeled.split()[0]
        if bare.endswith("ambiguous"):
            raise BadRequest(f"short commit id {prefix} is ambiguous: give more characters")
        return None

    def merge_base(self, base: str, head: str) -> str | None:
        """The best common ancestor of two commits, None for unrelated histories."""
        code, out, err = _git_status(str(self.path), "merge-base", "--end-of-options",
                                     check_oid(base), check_oid(head))
        if code == 1:
            return None
        if code != 0:
            raise GitError("git merge-base failed: " + err.decode("utf-8", "replace").strip())
        return out.strip().decode("ascii")

    def ahead_behind(self, base: str, head: str) -> tuple[int, int]:
        """(commits in head not in base, commits in base not in head)."""
        out = _run_git(str(self.path), "rev-list", "--left-right", "--count",
                       "--end-of-options", f"{check_oid(base)}...{check_oid(head)}", "--")
        behind, ahead = (int(n) for n in out.split())
        return ahead, behind

    def range_commits(self, base: str, head: str, limit: int, skip: int,
                      cap: int = RANGE_COMMITS) -> tuple[list[dict], int]:
        """Commits in head and not in base, oldest first (the first cap of them), and their total."""
        out = _run_git(str(self.path), "rev-list", "--reverse", "--end-of-options",
                       check_oid(head), "^" + check_oid(base), "--")
        oids = out.decode("ascii").split()
        page = oids[:cap][skip:skip + limit]
        if not page:
            return [], len(oids)
        code, log, err = _git_status(str(self.path), "log", "--no-walk=unsorted", "-z",
                                     f"--format={_LOG_FORMAT}", "--stdin",
                                     stdin="\n".join(page).encode() + b"\n")
        if code != 0:
            raise GitError("git log failed: " + err.decode("utf-8", "replace").strip())
        return _parse_log(log), len(oids)

    def range_files(self, base: str, head: str, limit: int, offset: int,
                    cap: int = RANGE_FILES, max_bytes: int | None = None
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
        out = _run_git(str(self.path), "-c", "core.quotepath=false", "diff", "--raw",
                       "--numstat", "-z", "-M", "--no-abbrev", "--no-ext-diff", "--no-textconv",
                       "--end-of-options", start, check_oid(head), "--")
        changes = _parse_raw_numstat(out)
        page = changes[:cap][offset:offset + limit]
        sizes = self._blob_sizes({oid for c in page for oid in c["_oids"]})
        wanted = [c for c in page if not c["binary"]
                  and c["additions"] + c["deletions"] <= RANGE_PATCH_LINES
                  and all(sizes.get(oid, 0) <= DIFF_MAX_BLOB for oid in c["_oids"])]
        patches: dict[bytes, tuple[bytes, bool]] = {}
        if wanted:
            specs = [p for c in wanted for p in {c["_old"], c["_new"]}]
            with _git_reader(str(self.path), "--literal-pathspecs", "-c", "core.quotepath=false",
                             "diff", "-p", "-M", "--no-color", "--no-ext-diff", "--no-textconv",
                             "--end-of-options", start, check_oid(head), "--",
                             *(p.decode("utf-8", "surrogateescape") for p in specs)) as text:
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
        code, out, err = _git_status(str(self.path), "cat-file", "--batch-check",
                                     stdin="".join(oid + "\n" for oid in oids).encode())
        if code != 0:
            raise GitError("git cat-file failed: " + err.decode("utf-8", "replace").strip())
        # "<oid> blob <size>", or "<oid> missing" for a submodule's commit.
        return {oid: int(size) for oid, kind, size in
                (line.split() for line in out.decode("ascii").splitlines()
                 if not line.endswith(" missing")) if kind == "blob"}

    def range_text(self, base: str, head: str, kind: str, limit: int) -> bytes | None:
        """The range as `git diff` (kind "diff") or `git format-patch` text; None past limit bytes.

        git is ended as soon as its output passes limit, so no more than that is ever held.
        """
        if kind == "diff":
            start = self.merge_base(base, head)
            if start is None:
                raise NotFound("no common ancestor between base and head")
            args = ["diff", "-M", "--no-color", "--no-ext-diff", "--no-textconv",
                    "--end-of-options", start, check_oid(head), "--"]
        else:
            args = ["format-patch", "--stdout", "-M", "--no-color", "--no-ext-diff",
                    "--no-textconv", "--end-of-options", check_oid(head),
                    "^" + check_oid(base), "--"]
        with _git_reader(str(self.path), *args) as out:
            text = out.read(limit + 1)
        return text if len(text) <= limit else None


_STATUS = {"A": "added", "D": "deleted", "M": "modified", "R": "renamed", "T": "modified",
           "C": "added"}


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
            added, deleted, path = token.split(b"\t", 2)
            stats.append((added.decode(), deleted.decode()))
            i += 1 if path else 3  # a rename's paths follow as two more tokens
        else:
            i += 1
    changes = []
    for (status, old, new, oids), (added, deleted) in zip(raw, stats):
        binary = added == "-"
        changes.append({
            "path": new.decode("utf-8", "replace"),
            "oldPath": old.decode("utf-8", "replace") if status in ("D", "M", "R", "T") else None,
            "status": _STATUS.get(status, "modified"),
            "additions": 0 if binary else int(added),
            "deletions": 0 if binary else int(deleted),
            "binary": binary,
            "_old": old, "_new": new, "_oids": oids,
        })
    return changes


def _c_quote(name: bytes) -> bytes:
    """A path as git writes it in a diff header (core.quotepath=false)."""
    if not any(c < 0x20 or c in b'"\\' or c == 0x7F for c in name):
        return name
    escapes = {7: b"\\a", 8: b"\\b", 9: b"\\t", 10: b"\\n", 11: b"\\v", 12: b"\\f",
               13: b"\\r", 34: b'\\"', 92: b"\\\\"}
    body = b"".join(escapes.get(c) or (b"\\%03o" % c if c < 0x20 or c == 0x7F else bytes([c]))
                    for c in name)
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


def _git_status(git_dir: str, *args: str, stdin: bytes | None = None,
                env: dict[str, str] | None = None) -> tuple[int, bytes, bytes]:
    """Run git and return (exit code, stdout, stderr) without raising on a non-zero code."""
    return _spawn(["git", f"--git-dir={git_dir}", *args], stdin if stdin is not None else b"",
                  {**_git_env(), **(env or {})}, GIT_TIMEOUT)
