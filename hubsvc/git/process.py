"""Running the git CLI: without a shell, with a deadline, streamed or whole."""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
import threading
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


def _kill_timer(proc: subprocess.Popen, timeout: float) -> tuple[threading.Timer, threading.Event]:
    """A started timer that kills proc after timeout, and the event it sets when it does."""
    fired = threading.Event()

    def kill() -> None:
        fired.set()
        proc.kill()

    timer = threading.Timer(timeout, kill)
    timer.start()
    return timer, fired


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
