"""Running the git CLI: without a shell, with a deadline, streamed or whole."""

from __future__ import annotations

import contextlib
import heapq
import itertools
import os
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import IO

GIT_TIMEOUT = 30.0  # seconds a git command may run


class GitError(RuntimeError):
    """The git CLI failed; the error middleware turns this into a 500."""


def _git_env() -> dict[str, str]:
    """An environment where only the repository's own config shapes git's output."""
    # GIT_DIR and friends leak in when running under a hook; --git-dir must win.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_TERMINAL_PROMPT="0",
        GIT_NO_REPLACE_OBJECTS="1",
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
    )
    return env


class _Deadline:
    """One process watched by the watchdog: cancel() when it is done."""

    def __init__(self, proc: subprocess.Popen, watchdog: _Watchdog) -> None:
        self.proc = proc
        self.fired = threading.Event()
        self.cancelled = False
        self._watchdog = watchdog

    def cancel(self) -> None:
        """Stop watching; a process already killed stays killed (fired says so)."""
        self._watchdog.cancel(self)


class _Watchdog:
    """One thread that kills the git processes past their deadline.

    A threading.Timer per git call started a thread each time: 0.17 ms here, a tenth
    of what spawning git costs.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, _Deadline]] = []
        self._seq = itertools.count()
        self._cancelled = 0  # cancelled entries still in the heap
        self._thread: threading.Thread | None = None

    def watch(self, proc: subprocess.Popen, timeout: float) -> _Deadline:
        """Kill proc once timeout seconds have passed, unless cancelled first."""
        deadline = _Deadline(proc, self)
        with self._cond:
            entry = (time.monotonic() + timeout, next(self._seq), deadline)
            heapq.heappush(self._heap, entry)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="git-deadlines", daemon=True)
                self._thread.start()
            if self._heap[0] is entry:
                self._cond.notify()
        return deadline

    def cancel(self, deadline: _Deadline) -> None:
        """Forget a deadline; the heap drops cancelled entries when they are half of it."""
        with self._cond:
            if deadline.cancelled or deadline.fired.is_set():
                return
            deadline.cancelled = True
            self._cancelled += 1
            if self._cancelled > 64 and self._cancelled * 2 > len(self._heap):
                self._heap = [entry for entry in self._heap if not entry[2].cancelled]
                heapq.heapify(self._heap)
                self._cancelled = 0

    def _run(self) -> None:
        with self._cond:
            while True:
                while self._heap and self._heap[0][2].cancelled:
                    heapq.heappop(self._heap)
                    self._cancelled -= 1
                if not self._heap:
                    self._cond.wait()
                    continue
                wait = self._heap[0][0] - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                deadline = heapq.heappop(self._heap)[2]
                # Under the lock: a cancel() either came before (skipped above) or
                # finds the deadline fired.
                deadline.fired.set()
                with contextlib.suppress(OSError):
                    deadline.proc.kill()


_WATCHDOG = _Watchdog()


def _kill_timer(proc: subprocess.Popen, timeout: float) -> tuple[_Deadline, threading.Event]:
    """A deadline that kills proc after timeout, and the event set when it does."""
    deadline = _WATCHDOG.watch(proc, timeout)
    return deadline, deadline.fired


def _spawn(
    cmd: list[str], stdin: bytes | None, env: dict[str, str], timeout: float
) -> tuple[int, bytes, bytes]:
    """Run a command to completion; a timer kills it when it overruns.

    subprocess.run(timeout=…) polls for the child's exit every few milliseconds, which
    costs about a millisecond per git call; blocking in communicate() and killing from
    a timer does not.
    """
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
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
        proc = subprocess.Popen(
            ["git", f"--git-dir={git_dir}", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=err,
            env=_git_env(),
        )
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


def _git_status(
    git_dir: str, *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None
) -> tuple[int, bytes, bytes]:
    """Run git and return (exit code, stdout, stderr) without raising on a non-zero code."""
    return _spawn(
        ["git", f"--git-dir={git_dir}", *args],
        stdin if stdin is not None else b"",
        {**_git_env(), **(env or {})},
        GIT_TIMEOUT,
    )
