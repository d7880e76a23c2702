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


class _End:
    """One end of a pipe handed to the event loop, whose transport closes it exactly once.

    uvloop's pipe transports give the descriptor to libuv, which closes it, and then call
    the file object's close(), which would close the same number again: by then another
    thread may hold that number (a socket, git's own pipes), and loses it (uvloop issue
    763: a clone answered nothing, Popen read EAGAIN from its error pipe). asyncio's
    transports close only through close(). So close() here closes unless uvloop did.
    """

    def __init__(self, fd: int, loop: asyncio.AbstractEventLoop) -> None:
        self._fd = fd
        self._libuv_closes = type(loop).__module__.startswith("uvloop")

    def fileno(self) -> int:
        return self._fd

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0 and not self._libuv_closes:
            os.close(fd)

    def drop(self) -> None:
        """Close it: it was never handed to a transport."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)


async def start(
    cmd: Sequence[str], env: dict[str, str], stdin: bool = False, stderr: bool = True
) -> Piped:
    """Start cmd with stdout (and stdin, stderr when asked) as pipes on the running loop."""
    loop = asyncio.get_running_loop()
    # The pipes are made here, not by Popen: its file objects would own the descriptors
    # the loop's transports close (see _End).
    ours: list[_End] = []
    theirs: list[int] = []

    def pipe(child_reads: bool) -> tuple[_End, int]:
        read, write = os.pipe()
        mine, child = (write, read) if child_reads else (read, write)
        ours.append(_End(mine, loop))
        theirs.append(child)
        return ours[-1], child

    try:
        feed, feed_child = pipe(child_reads=True) if stdin else (None, subprocess.DEVNULL)
        out, out_child = pipe(child_reads=False)
        err, err_child = pipe(child_reads=False) if stderr else (None, subprocess.DEVNULL)
        popen = subprocess.Popen(
            list(cmd),
            stdin=feed_child,
            stdout=out_child,
            stderr=err_child,
            env=env,
            start_new_session=True,  # a group of its own, which kill() ends whole
        )
    except BaseException:
        for end in ours:
            end.drop()
        raise
    finally:
        for fd in theirs:
            os.close(fd)  # the child holds its own copies
    proc = Piped(popen)
    handed: list[_End] = []  # a transport closes these, even one that failed to start
    try:
        handed.append(out)
        proc.stdout = await _reader(loop, proc, out)
        if err is not None:
            handed.append(err)
            proc.stderr = await _reader(loop, proc, err)
        if feed is not None:
            handed.append(feed)
            transport, protocol = await loop.connect_write_pipe(
                asyncio.streams.FlowControlMixin, feed
            )
            proc._transports.append(transport)
            proc.stdin = asyncio.StreamWriter(transport, protocol, None, loop)
    except BaseException:
        proc.kill()
        proc.close()
        for end in ours:
            if end not in handed:
                end.drop()
        popen.wait()
        raise
    return proc


async def _reader(loop: asyncio.AbstractEventLoop, proc: Piped, pipe: _End) -> asyncio.StreamReader:
    reader = asyncio.StreamReader(limit=LIMIT, loop=loop)
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    proc._transports.append(transport)
    return reader
