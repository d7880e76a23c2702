"""One SSH session: the checks HTTP makes, then git's conversation over the channel."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import asyncssh
from aiohttp import web

from ..errors import ApiError, Forbidden, NotFound, Unavailable
from ..git import pipes
from ..git.files import REPO_FILES
from ..git.protocol import Moved, git_command, git_env
from ..git.slots import held_slot
from ..keys import CONFIG, STORE
from ..metrics import git_operation
from ..policy import Caps
from ..requestid import request_id_var
from ..services.push_policy import DEPLOYKEY, READ_ONLY_KEY, SSHKEY, Pusher
from ..services.push_timing import PushClock
from ..services.receiving import receiving
from ..web.permissions import checked, find_repo
from ..web.ratelimit import GIT_LIMITER
from .commands import NOT_FOUND, ONLY_GIT, Command, parse

log = logging.getLogger("hubsvc.ssh")
CHUNK = 64 * 1024
NO_SHELL = "You've successfully authenticated, but hubsvc does not provide shell access."


@dataclass
class Principal:
    """Who a connection authenticated as: a user's key, or a repository's deploy key."""

    key_id: int
    fingerprint: str
    user: dict | None  # None for a deploy key
    repo_id: int | None  # a deploy key's repository
    read_only: bool
    repo_name: str = ""  # a deploy key's owner/name, for its greeting

    @property
    def caps(self) -> Caps:
        """The policy's view of the key: git only; a deploy key its one repository."""
        if self.repo_id is None:
            return Caps("sshkey")
        scope = "repo:read" if self.read_only else "repo:write"
        return Caps("deploykey", frozenset({scope}), frozenset({self.repo_id}))

    @property
    def pusher(self) -> Pusher:
        """How the pre-receive hook finds this key again when git is about to move refs."""
        if self.user is None:
            return Pusher(0, DEPLOYKEY, fingerprint=self.fingerprint)
        return Pusher(self.user["id"], SSHKEY, fingerprint=self.fingerprint)

    @property
    def who(self) -> str:
        return self.user["username"] if self.user is not None else self.repo_name


class Refusal(Exception):
    """The session ends with this line on stderr and exit status 1."""


async def serve(
    app: web.Application,
    process: asyncssh.SSHServerProcess,
    principal: Principal,
    client: str,
    touch: Callable[[], None],
) -> None:
    """Answer one session: git's commands run, everything else refused with a line."""
    # An id per session, as HTTP gives one per request: its log lines, the push's hook
    # decision and the hook deliveries of its events all carry it.
    request_id_var.set(f"{random.getrandbits(64):016x}")
    try:
        status = await _serve(app, process, principal, client, touch)
    except Refusal as exc:
        process.stderr.write(f"{exc}\n".encode())
        status = 1
    except ApiError as exc:  # what HTTP would answer with a status: a full disk, a busy database
        process.stderr.write(f"ERROR: {exc.message}\n".encode())
        status = 1
    except (ConnectionError, asyncssh.Error):
        return  # the client went away (or the session was closed): nobody to answer
    except Exception:
        log.exception("an SSH session of %s failed", principal.who)
        process.stderr.write(b"ERROR: the server failed\n")
        status = 1
    with contextlib.suppress(Exception):  # the channel may be gone already
        process.exit(status)


async def _serve(
    app: web.Application,
    process: asyncssh.SSHServerProcess,
    principal: Principal,
    client: str,
    touch: Callable[[], None],
) -> int:
    if process.subsystem:
        raise Refusal(ONLY_GIT)
    if not process.command:
        # As GitHub: a greeting that proves the key works, and no shell.
        process.stderr.write(f"Hi {principal.who}! {NO_SHELL}\n".encode())
        return 1
    command = parse(process.command)
    if command is None:
        raise Refusal(ONLY_GIT)
    repo = await _repository(app, principal, command)
    limiter = app.get(GIT_LIMITER)
    if limiter is not None:
        bucket = f"user:{principal.user['id']}" if principal.user else f"key:{principal.key_id}"
        allowed, _, _ = await limiter.spend(bucket)
        if not allowed:
            raise Refusal("ERROR: too many git operations, try again in a minute")
    started, moved, code = time.monotonic(), Moved(), -1
    try:
        with held_slot(app, client):
            if command.service != "git-receive-pack":
                files = app[REPO_FILES]
                fetch = command.service == "git-upload-pack"
                cmd = git_command(
                    command.service,
                    files.path(repo["id"]),
                    stateless=False,
                    settings=files.fetch_settings(repo["id"]) if fetch else (),
                )
                code = await _run(app, process, cmd, {}, None, touch, moved)
                if fetch:
                    files.fetched()
            else:
                code = await _push(app, process, principal, repo, touch, moved)
            return code
    except Unavailable as exc:
        raise Refusal(f"ERROR: {exc}") from None
    finally:
        git_operation(command.service, "ssh", started, moved.received, moved.sent, code == 0)


async def _repository(app: web.Application, principal: Principal, command: Command) -> dict:
    """The repository, with HTTP's rules: unreadable is not found, pushing needs write."""
    write = command.service == "git-receive-pack"
    caps = principal.caps
    try:
        repo, _ = await find_repo(app[STORE], principal.user, caps, command.owner, command.name)
    except NotFound:
        raise Refusal(NOT_FOUND) from None
    if principal.user is not None and principal.user["disabled"]:
        raise Refusal("ERROR: this account is disabled")
    try:
        return checked(
            repo, caps, "git.write" if write else "git.read", "write" if write else "read"
        )
    except Forbidden:
        if principal.user is None and principal.read_only:
            raise Refusal(READ_ONLY_KEY) from None
        full = f"{repo['owner_username']}/{repo['name']}"
        raise Refusal(f"ERROR: Permission to {full} denied to {principal.who}.") from None


async def _push(
    app: web.Application,
    process: asyncssh.SSHServerProcess,
    principal: Principal,
    repo: dict,
    touch: Callable[[], None],
    moved: Moved,
) -> int:
    """git receive-pack under the push's bookkeeping, as smart HTTP runs it."""
    clock = PushClock()
    files = app[REPO_FILES]
    async with (
        files.pushing(repo["id"]),
        receiving(app, repo, principal.user, principal.pusher, clock) as push,
    ):
        cmd = git_command("git-receive-pack", push.path, hooks=push.hooks, stateless=False)
        limit = app[CONFIG]["limits"]["push_bytes"]
        code = await _run(app, process, cmd, push.env, limit, touch, moved)
        # Recorded before the channel closes: git on the client returns only then.
        await push.record()
        return code


async def _run(
    app: web.Application,
    process: asyncssh.SSHServerProcess,
    cmd: list[str],
    extra: dict[str, str],
    limit: int | None,
    touch: Callable[[], None],
    moved: Moved,
) -> int:
    """git with the channel as its stdin, stdout and stderr; killed at the timeout or limit."""
    protocol = str((process.env or {}).get("GIT_PROTOCOL", ""))
    proc = await pipes.start(cmd, git_env(protocol, extra), stdin=True)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    timeout = app[CONFIG]["git"]["timeout_seconds"]
    feeder = asyncio.ensure_future(_feed(process, proc.stdin, limit, touch, moved))
    # Over the limit: git dies before the pack is all in, so no ref can move.
    feeder.add_done_callback(
        lambda f: proc.kill() if not f.cancelled() and f.exception() is not None else None
    )
    try:
        async with asyncio.timeout(timeout):
            await asyncio.gather(
                _copy(proc.stdout, process.stdout, touch, moved),
                _copy(proc.stderr, process.stderr, touch),
            )
            code = await proc.wait()
    except TimeoutError:
        raise Refusal(f"ERROR: git took longer than {timeout} s (git.timeout_seconds)") from None
    finally:
        feeder.cancel()
        with contextlib.suppress(BaseException):
            await feeder
        proc.kill()
        proc.close()
        await proc.wait()
    if feeder.done() and not feeder.cancelled() and isinstance(feeder.exception(), _TooLarge):
        raise Refusal(f"ERROR: {feeder.exception()}")
    return code


class _TooLarge(Exception):
    pass


async def _feed(
    process: asyncssh.SSHServerProcess,
    stdin: asyncio.StreamWriter,
    limit: int | None,
    touch: Callable[[], None],
    moved: Moved,
) -> None:
    """The client's bytes into git, counted against the push limit."""
    total = 0
    try:
        while data := await process.stdin.read(CHUNK):
            touch()
            total += len(data)
            moved.received += len(data)
            if limit is not None and total > limit:
                raise _TooLarge(
                    f"push is larger than {limit} bytes (the server's limits.push_bytes)"
                )
            stdin.write(data)
            await stdin.drain()
    except (ConnectionError, BrokenPipeError):
        pass  # git stopped reading (it has what it needs, or it failed and says so)
    finally:
        if not stdin.is_closing():
            stdin.close()


async def _copy(
    source: asyncio.StreamReader,
    sink: asyncssh.SSHWriter,
    touch: Callable[[], None],
    moved: Moved | None = None,
) -> None:
    while chunk := await source.read(CHUNK):
        touch()
        if moved is not None:
            moved.sent += len(chunk)
        sink.write(chunk)
        await sink.drain()
