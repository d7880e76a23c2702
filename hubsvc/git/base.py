"""One bare repository opened with dulwich: creating it, its refs and its settings."""

from __future__ import annotations

import errno
import functools
import io
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from dulwich.file import FileLocked
from dulwich.objects import Blob, Commit, Tree
from dulwich.repo import Repo

from ..errors import BadRequest, Conflict, NotFound
from .objects import _HEADS, _OID_RE, _SHORT_OID_RE, _TAGS, T, _iso, _ref_name, _text, _valid_branch
from .process import GitError, _git_status, _run_git

R = TypeVar("R", bound="RepoBase")
# A HEAD.lock older than this was left by a killed process (set_default_branch).
STALE_LOCK_SECONDS = 2.0


def _locked(method: Callable[..., T]) -> Callable[..., T]:
    """Serialise calls on one instance: dulwich's pack cache has no lock of its own."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> T:
        with self._lock:
            return method(self, *args, **kwargs)

    return wrapper


def _configure(repo: Repo) -> None:
    """Settings every hosted repository needs for smart-HTTP pushes."""
    config = repo.get_config()
    config.set((b"http",), b"receivepack", True)
    config.set((b"receive",), b"denyNonFastForwards", False)
    config.set((b"core",), b"logallrefupdates", False)
    # Written with plain files, not dulwich's GitFile: on a full disk that one fails
    # again in its finalizer and prints a traceback to stderr after the 507 is sent.
    text = io.BytesIO()
    config.write_to_file(text)
    target = Path(repo.controldir()) / "config"
    lock = target.with_name("config.lock")
    try:
        lock.write_bytes(text.getvalue())
        os.replace(lock, target)
    except BaseException:
        lock.unlink(missing_ok=True)
        raise


class RepoBase:
    """One bare repository on disk: opening, creating, refs (the mixins add the rest)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._repo = Repo(str(self.path))
        self._store = self._repo.object_store
        self._lock = threading.RLock()

    def close(self) -> None:
        """Release the pack files dulwich keeps open."""
        with self._lock:
            self._repo.close()

    def __enter__(self: R) -> R:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- creating ---------------------------------------------------------------

    @classmethod
    def init_bare(cls: type[R], path: str | Path, default_branch: str = "main") -> R:
        """Create an empty bare repository whose HEAD names default_branch."""
        head = _valid_branch(default_branch)
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        if any(path.iterdir()):
            raise FileExistsError(f"{path} is not empty")
        # git's own init, not dulwich's: on a full disk dulwich's lock files fail again in
        # their finalizers and print tracebacks after the 507 went out.
        try:
            _run_git(
                None,
                "init",
                "--bare",
                "--quiet",
                "--template=",
                "--initial-branch=" + head[len(_HEADS) :].decode(),
                "--",
                str(path),
            )
        except GitError as exc:
            if "No space left" in str(exc):
                raise OSError(errno.ENOSPC, str(exc)) from exc
            raise
        repo = Repo(str(path))
        try:
            _configure(repo)
        finally:
            repo.close()
        return cls(path)

    @classmethod
    def clone_bare(cls: type[R], source_path: str | Path, dest_path: str | Path) -> R:
        """Copy a repository's branches, tags, HEAD and history for a fork."""
        dest = Path(dest_path)
        # A local clone hard-links (or copies) the object files: objects never
        # change in place, so the fork survives the source's deletion or gc, and
        # no alternates file ties it to the source. --template= skips sample hooks.
        _run_git(
            None,
            "clone",
            "--bare",
            "--quiet",
            "--template=",
            "--",
            str(source_path),
            str(dest),
            timeout=600,
        )
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

        return f"{scrub(name)} <{scrub(email)}>".encode()

    # -- refs -------------------------------------------------------------------

    @_locked
    def set_default_branch(self, branch: str) -> None:
        """Point HEAD at a branch (which need not exist yet)."""
        target = _valid_branch(branch)
        if self._repo.refs.get_symrefs().get(b"HEAD") == target:
            return  # already: no lock taken, nothing a kill could leave behind
        lock = os.path.join(self._repo.controldir(), "HEAD.lock")
        try:
            if time.time() - os.stat(lock).st_mtime > STALE_LOCK_SECONDS:
                # A process killed while writing HEAD left its lock: no writer holds one
                # for more than microseconds, and without this every later write (a dead
                # push's recovery among them) fails on it for good.
                os.unlink(lock)
        except FileNotFoundError:
            pass
        try:
            self._repo.refs.set_symbolic_ref(b"HEAD", target)
        except FileLocked:
            raise GitError("HEAD is locked by another writer") from None

    @_locked
    def default_branch(self) -> str | None:
        """The branch HEAD points at, or None when HEAD is detached."""
        target = self._repo.refs.get_symrefs().get(b"HEAD")
        if not target or not target.startswith(_HEADS):
            return None
        return target[len(_HEADS) :].decode("utf-8", "replace")

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
            out.append(
                {
                    "name": text,
                    "commit": {
                        "oid": commit.id.decode("ascii"),
                        "message": _text(commit.message, commit.encoding),
                        "date": _iso(commit.commit_time),
                    },
                    "isDefault": text == default,
                }
            )
        return sorted(out, key=lambda branch: branch["name"])

    @_locked
    def tags(self) -> list[dict[str, str]]:
        """Every tag with the commit it names (annotated tags peeled), sorted by name."""
        out = []
        for name in self._repo.refs.keys(base=_TAGS):
            commit = self._commit_or_none(self._peel(self._repo.refs[_TAGS + name]))
            if commit is not None:
                out.append(
                    {"name": name.decode("utf-8", "replace"), "oid": commit.id.decode("ascii")}
                )
        return sorted(out, key=lambda tag: tag["name"])

    @_locked
    def head_oids(self) -> dict[str, str]:
        """Branch and tag refs mapped to commit oids (tags peeled), to diff pushes."""
        out = {}
        for ref in self._repo.refs:
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
            sha = self._repo.refs[ref] if ref in self._repo.refs else None  # noqa: SIM401 - refs has no .get
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

    def expand_oid(self, rev: str) -> str | None:
        """The commit a 7-39 hex prefix names; None when none does; 400 when several do."""
        prefix = rev.lower() if isinstance(rev, str) else ""
        if _OID_RE.fullmatch(prefix):
            return prefix if self._commit_or_none(prefix.encode("ascii")) else None
        if not _SHORT_OID_RE.fullmatch(prefix):
            return None
        # cat-file answers "ambiguous" for the bare prefix; ^{commit} lets git prefer
        # the one commit among objects of other types, as `git show abc1234` does.
        code, out, _ = _git_status(
            str(self.path),
            "cat-file",
            "--batch-check",
            stdin=f"{prefix}\n{prefix}^{{commit}}\n".encode(),
        )
        if code != 0:
            raise GitError("git cat-file failed")
        bare, peeled = out.decode("ascii", "replace").splitlines()[:2]
        if not peeled.endswith("missing"):
            return peeled.split()[0]
        if bare.endswith("ambiguous"):
            raise BadRequest(f"short commit id {prefix} is ambiguous: give more characters")
        return None
