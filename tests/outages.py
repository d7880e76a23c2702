"""A Redis and a PostgreSQL of the test's own, to stop and start (never the machine's).

Each skips with one line when its binaries are missing, and fails instead when the
environment says the shared server is there (HUBSVC_TEST_REDIS_URL /
HUBSVC_TEST_POSTGRES_URL, as CI sets them): there the binaries are installed too.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from .server import free_port
from .servers import POSTGRES_ENV, REDIS_ENV


def _missing(what: str, env: str) -> None:
    if os.environ.get(env):
        pytest.fail(f"{what} is missing, and {env} is set: install it")
    pytest.skip(f"outage tests need {what}")


class PrivateRedis:
    """redis-server on a free port in folder, without persistence; stop() and start() it."""

    def __init__(self, folder: Path) -> None:
        self.binary = shutil.which("redis-server")
        if self.binary is None:
            _missing("redis-server", REDIS_ENV)
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen | None = None

    def start(self) -> PrivateRedis:
        import redis

        self.proc = subprocess.Popen(
            [str(self.binary), "--port", str(self.port), "--bind", "127.0.0.1"]
            + ["--save", "", "--appendonly", "no", "--dir", str(self.folder)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                redis.Redis.from_url(self.url, socket_timeout=1).ping()
                return self
            except redis.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def stop(self) -> None:
        """SIGKILL, as a crash or a cut link: nothing said goodbye."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)


def _pg_bin(name: str) -> str:
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not found:
        _missing(f"PostgreSQL's {name} (/usr/lib/postgresql/*/bin)", POSTGRES_ENV)
    return found[-1]


class PrivatePostgres:
    """A PostgreSQL cluster of its own (initdb, pg_ctl) on a free port, trust auth."""

    def __init__(self) -> None:
        self.initdb, self.pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
        # A folder of its own under /tmp, not pytest's (0700 and root's when run as root).
        self.folder = Path(tempfile.mkdtemp(prefix="hubsvc-pg-"))
        self.data = self.folder / "pgdata"
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        # initdb refuses to run as root: run it (and the server) as postgres there.
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            self.as_user = ["runuser", "-u", "postgres", "--"]
            shutil.chown(self.folder, "postgres")

    def _run(self, *args: str) -> None:
        done = subprocess.run(
            [*self.as_user, *args], capture_output=True, text=True, timeout=120, cwd=self.folder
        )
        if done.returncode != 0:
            raise RuntimeError(f"{args[0]} failed: {done.stdout}\n{done.stderr}")

    def _ctl(self, action: str, *extra: str) -> None:
        self._run(
            self.pg_ctl,
            "-D",
            str(self.data),
            "-l",
            str(self.folder / "postgres.log"),
            "-o",
            f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off",
            "-w",
            action,
            *extra,
        )

    def start(self) -> PrivatePostgres:
        if not self.data.exists():
            self._run(self.initdb, "-D", str(self.data), "-U", "postgres", "--auth=trust")
        self._ctl("start")
        return self

    def restart(self) -> None:
        """pg_ctl restart -m fast: every connection cut, the server gone for a moment."""
        self._ctl("restart", "-m", "fast")

    def stop(self) -> None:
        """Stop it and remove its folder."""
        try:
            if (self.data / "postmaster.pid").exists():
                self._ctl("stop", "-m", "immediate")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


class CuttableLink:
    """A TCP proxy to one port: cut() ends every connection and refuses new ones, as a
    network partition seen from one process; mend() lets connections through again."""

    def __init__(self, target_port: int) -> None:
        import asyncio
        import threading

        self.target = target_port
        self.port = free_port()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    async def _pipe(self, reader, writer) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            writer.close()

    async def _handle(self, reader, writer) -> None:
        import asyncio

        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target)
        except OSError:
            writer.close()
            return
        self._writers |= {writer, up_writer}
        try:
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        finally:
            self._writers -= {writer, up_writer}

    def _call(self, coro):
        import asyncio

        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(10)

    async def _listen(self) -> None:
        import asyncio

        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)

    async def _cut(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()
        await self._server.wait_closed()

    def start(self) -> CuttableLink:
        self._thread.start()
        self._call(self._listen())
        return self

    def cut(self) -> None:
        self._call(self._cut())

    def mend(self) -> None:
        self._call(self._listen())

    def stop(self) -> None:
        if self._server is not None and self._server.is_serving():
            self._call(self._cut())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()
