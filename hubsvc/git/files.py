"""Where the bare repositories live on disk, and access to them off the event loop."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import threading
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web

from .push_hooks import install_hooks
from .repo import GitRepo

T = TypeVar("T")
# asyncio's default pool size: git reads are mostly waiting on the disk or on git.
GIT_THREADS = min(32, (os.cpu_count() or 1) + 4)


class RepoFiles:
    """Bare repositories at paths built from ids only, so no user-given name reaches the disk."""

    def __init__(self, root: Path, cache_size: int = 64) -> None:
        self.root = Path(root)
        # Beside the repositories, never inside one: a push can't write into it.
        self.hooks = self.root.parent / "git-hooks"
        self.spool = self.root.parent / "tmp"
        self.cache_size = cache_size
        self._open: OrderedDict[int, GitRepo] = OrderedDict()
        self._lock = threading.Lock()  # the git threads share the cache
        # A pool of their own: a huge tree or diff then queues behind other git reads,
        # never in front of password hashing or anything else on the default pool.
        self._pool: ThreadPoolExecutor | None = None
        # Pushes running per repository, and repositories being pruned: a prune must not
        # take objects a push has stored but not yet pointed a ref at.
        self._pushes: dict[int, int] = {}
        self._quiet: dict[int, asyncio.Event] = {}

    def prepare(self) -> None:
        """Create the hooks and the spool folder the git services use."""
        install_hooks(self.hooks)
        self.spool.mkdir(parents=True, exist_ok=True)

    def path(self, repo_id: int) -> Path:
        """<root>/<id // 1000>/<id>.git: a rename never touches a file."""
        return self.root / f"{int(repo_id) // 1000:03d}" / f"{int(repo_id)}.git"

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

    @contextlib.asynccontextmanager
    async def pushing(self, repo_id: int) -> AsyncIterator[None]:
        """Held while a push runs; waits while the repository is held quiet."""
        while repo_id in self._quiet:
            await self._quiet[repo_id].wait()
        self._pushes[repo_id] = self._pushes.get(repo_id, 0) + 1
        try:
            yield
        finally:
            self._pushes[repo_id] -= 1
            if not self._pushes[repo_id]:
                del self._pushes[repo_id]

    @contextlib.asynccontextmanager
    async def quiet(self, repo_id: int) -> AsyncIterator[None]:
        """No push runs or starts in the repository while this is held (this process)."""
        while repo_id in self._quiet:
            await self._quiet[repo_id].wait()
        done = self._quiet[repo_id] = asyncio.Event()
        try:
            while self._pushes.get(repo_id):
                await asyncio.sleep(0.05)
            yield
        finally:
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

    async def remove(self, repo_id: int) -> None:
        """Delete a repository's folder."""

        def remove() -> None:
            self.forget(repo_id)
            shutil.rmtree(self.path(repo_id), True)

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


REPO_FILES = web.AppKey("repo_files", RepoFiles)
