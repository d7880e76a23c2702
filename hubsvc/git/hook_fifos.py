"""The server's end of the pre-receive hook's question: two FIFOs in a folder of each push's own.

receive-pack runs the hook as the server's child; the hook asks the running server,
which decides with its own code, as Gitea's hooks call its internal API. The hook is a
`sh` script (push_hooks.py): a Python start is ~7 ms of a push's critical path, sh and
one `cat` ~1.5, and sh reaches no socket. So each push gets a folder in the data
folder's run/ (0700, its name random, never logged) holding two FIFOs that the server
keeps open for reading and writing while the push runs: `ask`, where the hook writes its
question, and `answer`, where it reads the verdict. Holding both ends, the server makes
the hook's opens return at once and never sees an end of file, so the question ends
with a line ".". A folder left by a dead process is released by the next start: a hook
still waiting on it reads no answer and refuses its push.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

from aiohttp import web

log = logging.getLogger("hubsvc.git.hooks")

RefUpdate = tuple[str, str, str]  # (old, new, ref), as git hands them to its hooks
# The ref updates and the quarantine's environment (the hook's NAME=value lines) -> the
# lines that refuse them (none: accepted).
Decide = Callable[[list[RefUpdate], dict[str, str]], Awaitable[list[str]]]
QUESTION_BYTES = 16 * 1024 * 1024  # git's updates: about 100 bytes a ref
END = b"\n.\n"  # the question's last line; a ref update line has three fields
CHUNK = 65536
_HEX = frozenset("0123456789abcdef")


class HooksUnusable(RuntimeError):
    """git's hooks cannot reach the server: it must not serve pushes."""


class HookFifos:
    """Where the pre-receive hooks of this process's pushes ask their question."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._pushes: dict[Path, _Push] = {}

    async def start(self) -> None:
        """Make the folder, releasing what dead processes left in it."""
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        await asyncio.to_thread(_release_dead, self.folder)

    async def stop(self) -> None:
        """Release the pushes still open (their hooks refuse)."""
        for push in list(self._pushes.values()):
            push.close()

    @property
    def waiting(self) -> int:
        """Pushes whose hook may still ask."""
        return len(self._pushes)

    @contextlib.contextmanager
    def push(self, decide: Decide) -> Iterator[dict[str, str]]:
        """While the block runs, a hook given the yielded environment reaches decide."""
        # Named for this process: a start releases only the folders of dead ones (the
        # data folder may be shared by several processes).
        folder = Path(tempfile.mkdtemp(prefix=folder_prefix(), dir=self.folder))
        try:
            push = _Push(folder)
        except BaseException:
            _release(folder)
            raise
        self._pushes[folder] = push
        push.task = asyncio.ensure_future(self._serve(push, decide))
        try:
            yield {"HUBSVC_HOOK_DIR": str(folder), "HUBSVC_HOOK_PID": str(os.getpid())}
        finally:
            del self._pushes[folder]
            push.close()

    async def _serve(self, push: _Push, decide: Decide) -> None:
        try:
            problems = await self._answer(await push.question(), decide)
        except asyncio.CancelledError:
            push.close_answer()  # not always the push's end: the hook reads none and refuses
            raise
        except Exception:
            log.exception("answering a pre-receive hook failed")
            problems = ["hubsvc: the server failed to check this push"]
        said = "".join(f"{line}\n" for line in problems)
        try:
            await push.reply(f"{'refused' if problems else 'ok'}\n{said}".encode())
        except OSError:
            log.exception("answering a pre-receive hook failed")

    async def _answer(self, question: bytes | None, decide: Decide) -> list[str]:
        """The lines refusing the push the question names; [] accepts."""
        if question is None:
            return ["hubsvc: the hook's question is too long"]
        # NAME=value lines of the quarantine's variables, an empty line, git's lines
        lines = question.decode("utf-8", "replace").split("\n")
        blank = lines.index("") if "" in lines else len(lines)
        env = dict(line.partition("=")[::2] for line in lines[:blank])
        updates = []
        for line in filter(None, lines[blank + 1 :]):  # none: the start-up trial
            old, _, rest = line.partition(" ")
            new, _, ref = rest.partition(" ")
            if not (_is_oid(old) and _is_oid(new) and ref):
                return ["hubsvc: malformed ref update from the hook"]
            updates.append((old, new, ref))
        problems = await decide(updates, env)
        if updates:  # not the start-up trial
            log.info(
                "pre-receive: %s ref update(s) %s%s",
                len(updates),
                "refused: " if problems else "accepted",
                "; ".join(problems)[:500],
            )
        return problems

    async def trial(self, hooks: Path) -> None:
        """Run the pre-receive hook as git would, with no update: it must reach this server.

        Raises HooksUnusable saying what failed: a server whose hooks cannot run would take
        pushes its rules refuse and record none of them.
        """
        asked = asyncio.Event()

        async def decide(updates: list[RefUpdate], env: dict[str, str]) -> list[str]:
            asked.set()
            return []

        hook = hooks / "pre-receive"
        if not hooks.is_absolute():
            raise HooksUnusable(f"the git hooks folder {hooks} is not an absolute path")
        if not os.access(hook, os.X_OK):
            raise HooksUnusable(f"the git hook {hook} is missing or not executable")
        with contextlib.ExitStack() as stack:
            try:
                env = stack.enter_context(self.push(decide))
            except OSError as exc:  # a file system without FIFOs (some network mounts)
                raise HooksUnusable(
                    f"the server cannot make the folder its git hooks ask through in "
                    f"{self.folder} ({exc}); put data_dir on a local file system"
                ) from exc
            proc = await asyncio.create_subprocess_exec(
                str(hook),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=self.folder,
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **env},
            )
            out, _ = await asyncio.wait_for(proc.communicate(), 30)
        if proc.returncode != 0 or not asked.is_set():
            said = out.decode(errors="replace").strip()
            raise HooksUnusable(
                f"the git hook {hook} could not ask the server (exit {proc.returncode}"
                f"{': ' + said if said else ''}); pushes would go unchecked"
            )


class _Push:
    """One push's folder and the server's ends of its two FIFOs."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.task: asyncio.Future | None = None
        self.loop = asyncio.get_running_loop()
        os.mkfifo(folder / "ask", 0o600)
        os.mkfifo(folder / "answer", 0o600)
        # Read and write on each: the hook's opens return at once, and no write of the
        # hook's ever meets a FIFO without a reader.
        self.ask: int | None = os.open(folder / "ask", os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            self.answer: int | None = os.open(
                folder / "answer", os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC
            )
        except BaseException:
            os.close(self.ask)
            raise

    async def question(self) -> bytes | None:
        """The hook's question up to its last line; None past QUESTION_BYTES."""
        data, tail, size = bytearray(), b"", 0
        while self.ask is not None:
            try:
                chunk = os.read(self.ask, CHUNK)
            except BlockingIOError:
                await self._ready(self.ask, self.loop.add_reader, self.loop.remove_reader)
                continue
            size += len(chunk)
            tail = (tail + chunk)[-len(END) :]
            if size <= QUESTION_BYTES:
                data += chunk
            if tail == END:  # read on past the bound: the hook waits for the answer
                return bytes(data[: -len(END)]) if size <= QUESTION_BYTES else None
        raise asyncio.CancelledError  # closed while reading

    async def reply(self, answer: bytes) -> None:
        """Write the answer and close the server's end: the hook reads it, then the end."""
        view = memoryview(answer)
        while view and self.answer is not None:
            try:
                view = view[os.write(self.answer, view) :]
            except BlockingIOError:
                await self._ready(self.answer, self.loop.add_writer, self.loop.remove_writer)
        self.close_answer()

    async def _ready(self, fd: int, watch: Callable, unwatch: Callable) -> None:
        """Wait until the loop finds fd ready (watch: add_reader or add_writer)."""
        ready = self.loop.create_future()

        def wake() -> None:
            if not ready.done():
                ready.set_result(None)

        watch(fd, wake)
        try:
            await ready
        finally:
            if fd in (self.ask, self.answer):  # closed: its number may be another's now
                unwatch(fd)

    def close_answer(self) -> None:
        if self.answer is not None:
            self.loop.remove_writer(self.answer)
            os.close(self.answer)
            self.answer = None

    def close(self) -> None:
        """Stop answering, close both ends, release a hook still waiting, remove the folder."""
        if self.task is not None and not self.task.done():
            self.task.cancel()
        # Gone while this process holds both ends: a hook past its opens reads the end,
        # one before them finds no folder; none waits on an open.
        shutil.rmtree(self.folder, ignore_errors=True)
        if self.ask is not None:
            self.loop.remove_reader(self.ask)
            os.close(self.ask)
            self.ask = None
        self.close_answer()


def _release(folder: Path) -> None:
    """Free any hook waiting to open the folder's FIFOs (it then reads no answer and
    refuses), and remove the folder."""
    held = []
    try:
        # Both held while the folder goes: a hook woken from opening the answer's end
        # finds the question's open (or no folder), never a FIFO nobody will open again.
        for name in ("answer", "ask"):
            with contextlib.suppress(OSError):
                held.append(os.open(folder / name, os.O_RDWR | os.O_NONBLOCK))
        shutil.rmtree(folder, ignore_errors=True)
    finally:
        for fd in held:
            os.close(fd)


def _release_dead(run: Path) -> None:
    """Release the push folders of processes no longer running."""
    host = _place()
    for folder in run.glob("push-*-*"):
        _, pid, *named, _ = folder.name.split("-")
        if "-".join(named) != host or not folder.is_dir() or not pid.isdigit():
            continue  # another host's or container's (NFS, a shared volume): not our pids
        if not _alive(int(pid)):
            _release(folder)


def folder_prefix() -> str:
    """The start of this process's push folders' names: its pid and where it is."""
    return f"push-{os.getpid()}-{_place()}-"


def _place() -> str:
    """The host and the pid namespace that give this process's pid its meaning."""
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        namespace = 0  # not Linux: the host alone
    return f"{socket.gethostname()}.{namespace}"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process has that pid now: not ours to judge
    return True


def _is_oid(value: str) -> bool:
    return len(value) == 40 and set(value) <= _HEX


HOOK_FIFOS = web.AppKey("hook_fifos", HookFifos)
