"""git started by `subprocess` with its pipes on the event loop, for the smart-HTTP routes.

uvloop starts a child with fork(), which copies the server's page tables first: about
19 ms for a process holding 80 MB here, against 3 ms for subprocess's vfork. So the
process is started with `subprocess.Popen`, its pipes handed to the loop as streams,
and its exit awaited on a pidfd, which leaves the loop's own child handling alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
from collections.abc import Sequence

LIMIT = 2**16  # the stream buffer, as asyncio.subprocess has it


class Piped:
    """A started process with asyncio streams on its pipes (asyncio.subprocess.Process's API)."""

    def __init__(self, popen: subprocess.Popen) -> None:
        self._popen = popen
        self.pid = popen.pid
        self.stdin: asyncio.StreamWriter | None = None
        self.stdout: asyncio.StreamReader | None = None
        self.stderr: asyncio.StreamReader | None = None
        self._transports: list[asyncio.BaseTransport] = []

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

    def kill(self) -> None:
        """SIGKILL to its process group: git and every child it started (hooks included)."""
        # The group outlives git while any child of it runs (a hook git was waiting for
        # when it was killed), and its id is not reused while it does.
        with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone
            os.killpg(self.pid, signal.SIGKILL)

    async def wait(self) -> int:
        """Its exit code, once it has exited (awaited on a pidfd, never blocking the loop)."""
        if self._popen.poll() is not None:
            return self._popen.returncode
        loop = asyncio.get_running_loop()
        exited = loop.create_future()

        def readable() -> None:
            if not exited.done():
                exited.set_result(None)

        fd = os.pidfd_open(self.pid)
        loop.add_reader(fd, readable)
        try:
            while self._popen.poll() is None:
                await exited
                exited = loop.create_future()
        finally:
            loop.remove_reader(fd)
            os.close(fd)
        return self._popen.returncode

    def close(self) -> None:
        """Close the pipes' transports (a pipe left unread holds its end open until then)."""
        for transport in self._transports:
            transport.close()


async def start(
    cmd: Sequence[str], env: dict[str, str], stdin: bool = False, stderr: bool = True
) -> Piped:
    """Start cmd with stdout (and stdin, stderr when asked) as pipes on the running loop."""
    loop = asyncio.get_running_loop()
    popen = subprocess.Popen(
        list(cmd),
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if stderr else subprocess.DEVNULL,
        env=env,
        start_new_session=True,  # a group of its own, which kill() ends whole
    )
    proc = Piped(popen)
    try:
        proc.stdout = await _reader(loop, proc, popen.stdout)
        if stderr:
            proc.stderr = await _reader(loop, proc, popen.stderr)
        if stdin:
            transport, protocol = await loop.connect_write_pipe(
                asyncio.streams.FlowControlMixin, popen.stdin
            )
            proc._transports.append(transport)
            proc.stdin = asyncio.StreamWriter(transport, protocol, None, loop)
    except BaseException:
        proc.kill()
        proc.close()
        for pipe in (popen.stdin, popen.stdout, popen.stderr):
            if pipe is not None:
                pipe.close()
        popen.wait()
        raise
    return proc


async def _reader(
    loop: asyncio.AbstractEventLoop, proc: Piped, pipe: object
) -> asyncio.StreamReader:
    reader = asyncio.StreamReader(limit=LIMIT, loop=loop)
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    proc._transports.append(transport)
    return reader
