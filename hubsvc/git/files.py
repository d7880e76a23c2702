"""Where the bare repositories live on disk, and access to them off the event loop."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import shutil
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web

from .answers import Stamp, branch_tip, ensure_prune_stamp, prune_stamp
from .pack_cache import PackCache
from .push_hooks import install_hooks
from .repo import GitRepo

log = logging.getLogger("hubsvc.git.files")
T = TypeVar("T")
# A repository's lock files (in its folder, where no push can write a file of that name):
# pushes hold PUSHES shared; a prune holds GATE, then PUSHES, exclusively.
GATE = "hubsvc-gate.lock"
PUSHES = "hubsvc-pushes.lock"
LOCK_POLL = 0.05  # seconds between tries of a lock another process holds
# asyncio's default pool size: git reads are mostly waiting on the disk or on git.
GIT_THREADS = min(32, (os.cpu_count() or 1) + 4)


class RepoFiles:
    """Bare repositories at paths built from ids only, so no user-given name reaches the disk."""

    def __init__(
        self, root: Path, cache_size: int = 64, pack_cache: PackCache | None = None
    ) -> None:
        self.root = Path(root)
        self.pack_cache = pack_cache
        # Beside the repositories, never inside one: a push can't write into it.
        self.hooks = self.root.parent / "git-hooks"
        self.spool = self.root.parent / "tmp"
        self.cache_size = cache_size
        self._open: OrderedDict[int, GitRepo] = OrderedDict()
        self._paths: dict[int, Path] = {}
        self._lock = threading.Lock()  # the git threads share the cache
        # A pool of their own: a huge tree or diff then queues behind other git reads,
        # never in front of password hashing or anything else on the default pool.
        self._pool: ThreadPoolExecutor | None = None
        # Repositories this process is pruning: its own pushes queue here, and its own
        # prunes of one repository take turns (the file locks order the processes).
        self._quiet: dict[int, asyncio.Event] = {}

    def prepare(self) -> None:
        """Create the hooks and the spool folder the git services use."""
        install_hooks(self.hooks)
        self.spool.mkdir(parents=True, exist_ok=True)
        if self.pack_cache is not None:
            self.pack_cache.prepare()

    def fetch_settings(self, repo_id: int) -> tuple[str, ...]:
        """upload-pack's own `-c` settings: the pack cache's hook, when it is on.

        The hook keys packs by the repository's prune stamp, so one is written first if
        the repository has none (one stat otherwise); no stamp, no cache.
        """
        cache = self.pack_cache
        if cache is None or not cache.enabled:
            return ()
        path = self.path(repo_id)
        stamp = ensure_prune_stamp(path)
        return () if stamp is None else cache.setting(path, stamp)

    def fetched(self) -> None:
        """After an upload-pack: sweep the pack cache in a git thread, when one is due."""
        cache = self.pack_cache
        if cache is None or not cache.sweep_soon():
            return
        task = asyncio.ensure_future(self._thread(cache.sweep))
        task.add_done_callback(_log_failure)

    def path(self, repo_id: int) -> Path:
        """<root>/<id // 1000>/<id>.git: a rename never touches a file."""
        # Kept per id: two pathlib joins were a tenth of a kept file read's own time.
        found = self._paths.get(repo_id)
        if found is None:
            if len(self._paths) >= 4096:
                self._paths.clear()
            found = self._paths[repo_id] = (
                self.root / f"{int(repo_id) // 1000:03d}" / f"{int(repo_id)}.git"
            )
        return found

    def tip(self, repo_id: int, branch: str) -> str | None:
        """Where a branch points, read on the event loop; None: ask a git thread instead."""
        return branch_tip(self.path(repo_id), branch)

    def prune_stamp(self, repo_id: int) -> Stamp | None:
        """The identity of the repository's prune stamp (one stat, fine on the event loop)."""
        return prune_stamp(self.path(repo_id))

    def get(self, repo_id: int) -> GitRepo:
        """An open GitRepo, reused across requests; blocking: call it in a git thread.

        Opening one reads its refs and packs, and closing an evicted one closes files, so
        both happen in the worker thread that needs the handle, never on the event loop.
        """
        evicted = []
        with self._lock:
            repo = self._open.get(repo_id)
            if repo is not None:
                self._open.move_to_end(repo_id)
                return repo
        opened = GitRepo(self.path(repo_id))
        with self._lock:
            repo = self._open.setdefault(repo_id, opened)
            self._open.move_to_end(repo_id)
            while len(self._open) > self.cache_size:
                evicted.append(self._open.popitem(last=False)[1])
        if repo is not opened:  # another thread opened it meanwhile
            evicted.append(opened)
        for old in evicted:
            old.close()
        return repo

    def forget(self, repo_id: int) -> None:
        """Drop a cached handle (after a delete); blocking: call it in a git thread."""
        with self._lock:
            repo = self._open.pop(repo_id, None)
        if repo is not None:
            repo.close()

    async def _thread(self, fn: Callable[..., T], *args: Any) -> T:
        """Call fn(*args) in one of the git threads."""
        if self._pool is None:
            self._pool = ThreadPoolExecutor(GIT_THREADS, thread_name_prefix="git")
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    async def run(self, repo_id: int, fn: Callable[..., T], *args: Any) -> T:
        """Call fn(GitRepo, *args) in a git worker thread."""
        return await self._thread(lambda: fn(self.get(repo_id), *args))

    def _lock_file(self, repo_id: int, name: str) -> int | None:
        """An open descriptor on one of a repository's lock files; None: no such repository."""
        try:
            return os.open(self.path(repo_id) / name, os.O_RDWR | os.O_CREAT, 0o600)
        except FileNotFoundError:  # deleted meanwhile: git itself answers the push
            return None

    @contextlib.asynccontextmanager
    async def pushing(self, repo_id: int) -> AsyncIterator[None]:
        """Held while a push runs; waits while any process holds the repository quiet.

        A shared lock on the repository's PUSHES file for the push's whole length, taken
        through the GATE file, which a prune holds exclusively: while it does, a push on
        any process sharing the data folder waits here.
        """
        while repo_id in self._quiet:
            await self._quiet[repo_id].wait()
        gate, busy = self._lock_file(repo_id, GATE), self._lock_file(repo_id, PUSHES)
        try:
            if gate is not None and busy is not None:
                await _flock(gate, fcntl.LOCK_SH)
                await _flock(busy, fcntl.LOCK_SH)  # free: no prune is past the gate
            if gate is not None:
                os.close(gate)
                gate = None
            yield
        finally:
            for fd in (gate, busy):
                if fd is not None:
                    os.close(fd)  # closing the last descriptor releases its lock

    @contextlib.asynccontextmanager
    async def quiet(self, repo_id: int) -> AsyncIterator[None]:
        """No push runs or starts in the repository, on any process, while this is held.

        File locks, not a row in the database: they bind every process on the data folder
        whichever database it uses, and a process that dies releases them with its files.
        The gate first (new pushes wait), then PUSHES exclusively: the running ones ended.
        """
        while repo_id in self._quiet:
            await self._quiet[repo_id].wait()
        done = self._quiet[repo_id] = asyncio.Event()
        gate = busy = None
        try:
            gate, busy = self._lock_file(repo_id, GATE), self._lock_file(repo_id, PUSHES)
            if gate is not None and busy is not None:
                await _flock(gate, fcntl.LOCK_EX)
                await _flock(busy, fcntl.LOCK_EX)
            yield
        finally:
            for fd in (busy, gate):
                if fd is not None:
                    os.close(fd)
            del self._quiet[repo_id]
            done.set()

    async def prune_unreachable(self, repo_id: int) -> None:
        """Delete the objects no ref reaches; call it holding quiet(repo_id)."""

        def prune() -> None:
            self.forget(repo_id)  # its packs are replaced: reopen afterwards
            with GitRepo(self.path(repo_id)) as git:
                git.prune_unreachable()

        await self._thread(prune)

    async def create(self, repo_id: int, default_branch: str) -> None:
        """A new empty bare repository."""
        await self._thread(lambda: GitRepo.init_bare(self.path(repo_id), default_branch).close())

    async def fork(self, source_id: int, repo_id: int) -> None:
        """A full, independent copy of another repository."""
        await self._thread(
            lambda: GitRepo.clone_bare(self.path(source_id), self.path(repo_id)).close()
        )

    def assets(self, repo_id: int) -> Path:
        """<data>/assets/<id // 1000>/<id>: the repository's release assets, by asset id."""
        return self.root.parent / "assets" / f"{int(repo_id) // 1000:03d}" / str(int(repo_id))

    async def remove(self, repo_id: int) -> None:
        """Delete a repository's folder and its release assets."""

        def remove() -> None:
            self.forget(repo_id)
            shutil.rmtree(self.path(repo_id), True)
            shutil.rmtree(self.assets(repo_id), True)

        await self._thread(remove)

    def close(self) -> None:
        """Close every cached handle and let the git threads end (blocking: off the loop)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        with self._lock:
            handles = list(self._open.values())
            self._open.clear()
        for repo in handles:
            repo.close()


def _log_failure(task: asyncio.Future) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("sweeping the pack cache failed: %s", task.exception())


async def _flock(fd: int, kind: int) -> None:
    """Take a file lock without blocking the event loop: try, and try again shortly."""
    while True:
        try:
            fcntl.flock(fd, kind | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            await asyncio.sleep(LOCK_POLL)


REPO_FILES = web.AppKey("repo_files", RepoFiles)
