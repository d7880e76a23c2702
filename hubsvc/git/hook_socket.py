"""The server's end of the pre-receive hook's question: a unix socket, one secret per push.

receive-pack runs the hook as the server's child; the hook asks the running server
(hookcall.py), which decides with its own code, as Gitea's hooks call its internal API.
Each push registers its decision under a random secret passed in git's environment
(never logged); an unknown secret is refused. The socket is 0600 in the data folder's
run/, so only the server's own user reaches it at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

from aiohttp import web

from .. import requestid

log = logging.getLogger("hubsvc.git.hooks")

RefUpdate = tuple[str, str, str]  # (old, new, ref), as git hands them to its hooks
# The ref updates and the quarantine's environment (hookcall.QUARANTINE) -> the lines
# that refuse them (none: accepted).
Decide = Callable[[list[RefUpdate], dict[str, str]], Awaitable[list[str]]]
SUN_PATH_MAX = 100  # a unix socket's path fits in 108 bytes; a long data folder does not
QUESTION_BYTES = 16 * 1024 * 1024  # git's updates: about 100 bytes a ref
_HEX = frozenset("0123456789abcdef")


class HooksUnusable(RuntimeError):
    """git's hooks cannot reach the server: it must not serve pushes."""


class HookSocket:
    """Where the pre-receive hooks of this process's pushes ask their question."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path: Path | None = None
        self._server: asyncio.Server | None = None
        self._own_dir: Path | None = None
        self._pushes: dict[bytes, Decide] = {}

    async def start(self) -> None:
        """Listen at <folder>/hooks-<pid>.sock (a private temporary folder when too long)."""
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = self.folder / f"hooks-{os.getpid()}.sock"  # processes sharing the folder
        if len(os.fsencode(path)) > SUN_PATH_MAX:
            self._own_dir = Path(tempfile.mkdtemp(prefix="hubsvc-hooks-"))  # 0700
            path = self._own_dir / "hooks.sock"
        path.unlink(missing_ok=True)  # left by a process that died with this pid
        self._server = await asyncio.start_unix_server(self._serve, path=str(path))
        os.chmod(path, 0o600)
        self.path = path

    async def stop(self) -> None:
        """Stop listening and remove the socket."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
        if self.path is not None:
            self.path.unlink(missing_ok=True)
        if self._own_dir is not None:
            shutil.rmtree(self._own_dir, ignore_errors=True)

    @property
    def waiting(self) -> int:
        """Pushes whose hook may still ask."""
        return len(self._pushes)

    @contextlib.contextmanager
    def push(self, decide: Decide) -> Iterator[dict[str, str]]:
        """While the block runs, a hook given the yielded environment reaches decide."""
        if self.path is None:
            raise RuntimeError("the hook socket is not listening")
        secret = secrets.token_urlsafe(32)
        key = hashlib.sha256(secret.encode()).digest()
        self._pushes[key] = decide
        try:
            yield {"HUBSVC_HOOK_SOCKET": str(self.path), "HUBSVC_HOOK_SECRET": secret}
        finally:
            del self._pushes[key]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            problems = await self._answer(await _read_all(reader))
        except Exception:
            log.exception("answering a pre-receive hook failed")
            problems = ["hubsvc: the server failed to check this push"]
        said = "".join(f"{line}\n" for line in problems)
        try:
            writer.write(f"{'refused' if problems else 'ok'}\n{said}".encode())
            await writer.drain()
        except ConnectionError:
            pass  # the hook is gone (git killed it): nobody to tell
        finally:
            writer.close()

    async def _answer(self, question: bytes | None) -> list[str]:
        """The lines refusing the push the question names (hookcall.py's format); [] accepts."""
        if question is None:
            return ["hubsvc: the hook's question is too long"]
        head, _, body = question.decode("utf-8", "replace").partition("\n\n")
        secret, *variables = head.split("\n")
        decide = self._pushes.get(hashlib.sha256(secret.encode()).digest())
        if decide is None:
            return ["hubsvc: this push is not known to the server"]
        env = dict(line.partition("=")[::2] for line in variables)
        rid = env.pop(requestid.ENV, "")
        if requestid.valid(rid):
            requestid.request_id_var.set(rid)  # this answer's task: its lines name the push
        updates = []
        for line in filter(None, body.splitlines()):  # none: the start-up trial
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
        """Run the pre-receive hook as git would, with no update: it must reach this socket.

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
        with self.push(decide) as env:
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


def _is_oid(value: str) -> bool:
    return len(value) == 40 and set(value) <= _HEX


async def _read_all(reader: asyncio.StreamReader) -> bytes | None:
    """Everything up to the hook's end of writing; None past QUESTION_BYTES."""
    data = bytearray()
    while chunk := await reader.read(65536):
        data += chunk
        if len(data) > QUESTION_BYTES:
            return None
    return bytes(data)


HOOK_SOCKET = web.AppKey("hook_socket", HookSocket)
