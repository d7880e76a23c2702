"""The SSH server: keys in, git out, started and stopped with the HTTP server.

Every connection authenticates with a public key registered to a user or as a
repository's deploy key (store.keys); password and keyboard-interactive logins are not
offered. A watcher closes, within a second, the connections of a key removed or an
account disabled since (the database is the one truth, so it works across processes),
and those idle past [ssh] idle_seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import asyncssh
from aiohttp import web

from ..clients import address_group
from ..keys import CONFIG, STATE, STORE
from ..tasks import BACKGROUND
from ..web.ratelimit import SIGN_IN_LIMITER
from .hostkeys import fingerprints, load_host_keys
from .session import Principal, serve

log = logging.getLogger("hubsvc.ssh")
WATCH_SECONDS = 0.5  # an open session of a removed key ends within this (and a query)
DRAIN_GRACE = 2.0  # draining: a connection signing in gets this long to open its session
# Draining: a connection whose sessions ended is closed by us only after this, so the
# client reads its exit status and hangs up first. OpenSSH exits 255 when our disconnect
# arrives in the same read as the channel's close, even though the session ended well.
HANG_UP_GRACE = 2.0


class SshService:
    """The listener, its open connections, and the watcher that ends revoked ones."""

    def __init__(self, app: web.Application) -> None:
        self.app = app
        self.port = 0  # the port listened on, once started
        self.fingerprints: dict[str, str] = {}
        self.connections: set[_Connection] = set()
        self._per_ip: dict[str, int] = {}
        # Addresses past their sign-in budget, until when: no key is even looked at.
        self.blocked: dict[str, float] = {}
        self._server: asyncssh.SSHAcceptor | None = None
        self._watcher: asyncio.Task | None = None

    async def start(self) -> None:
        """Listen on [ssh] port with the host keys (made once in <data>/ssh/ when unset)."""
        config = self.app[CONFIG]
        settings = config["ssh"]
        keys = await asyncio.to_thread(load_host_keys, config.data_dir, settings["host_keys"])
        self.fingerprints = fingerprints(keys)
        self.app[STATE]["ssh_fingerprints"] = self.fingerprints  # GET /api/meta
        self._server = await asyncssh.create_server(
            lambda: _Connection(self),
            config["server"]["host"],
            settings["port"],
            server_host_keys=keys,
            process_factory=self._session,
            encoding=None,
            allow_pty=False,
            agent_forwarding=False,
            x11_forwarding=False,
            allow_scp=False,
            # Before a key is proven, the idle limit too (and never more than two minutes).
            login_timeout=min(settings["idle_seconds"], 120),
            reuse_port=settings["reuse_port"] or None,
        )
        self.port = self._server.sockets[0].getsockname()[1]
        self._watcher = asyncio.create_task(self._watch())
        log.info("SSH listening on %s:%s", config["server"]["host"], self.port)

    def stop_listening(self) -> None:
        """Accept no new connection; the open ones go on (a draining process)."""
        if self._server is not None:
            self._server.close()  # idempotent; wait_closed would wait for the sessions

    async def drain(self, deadline: float) -> None:
        """Let sessions under way end, closing each connection once it has none (a git
        client opens one per connection, so it is done), until the loop time deadline."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        while self.connections and loop.time() < deadline:
            now = time.monotonic()
            for conn in list(self.connections):
                if conn.sessions:
                    continue
                if conn.sessions_run == 0:
                    # A connection that has not opened its session yet gets a moment to.
                    done = loop.time() - started >= DRAIN_GRACE
                else:
                    done = now - conn.ended >= HANG_UP_GRACE
                if done:
                    conn.close()
            await asyncio.sleep(0.05)

    async def stop(self) -> None:
        """Stop listening and close every connection."""
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
        self.stop_listening()
        for conn in list(self.connections):
            conn.close()
        if self._server is not None:
            await self._server.wait_closed()

    def admit(self, group: str) -> bool:
        """Count a new connection from group; False past [ssh] max_per_ip."""
        count = self._per_ip.get(group, 0)
        if count >= self.app[CONFIG]["ssh"]["max_per_ip"]:
            return False
        self._per_ip[group] = count + 1
        return True

    def leave(self, group: str) -> None:
        """A connection admitted for group closed."""
        left = self._per_ip.get(group, 1) - 1
        if left > 0:
            self._per_ip[group] = left
        else:
            self._per_ip.pop(group, None)

    async def _session(self, process: asyncssh.SSHServerProcess) -> None:
        conn = process.channel.get_connection().get_owner()
        assert isinstance(conn, _Connection) and conn.principal is not None  # authenticated
        conn.sessions += 1
        conn.sessions_run += 1
        try:
            await serve(self.app, process, conn.principal, conn.group, conn.touch)
        finally:
            conn.sessions -= 1
            conn.ended = time.monotonic()

    async def _watch(self) -> None:
        """Close connections of keys removed or accounts disabled, and idle ones."""
        while True:
            await asyncio.sleep(WATCH_SECONDS)
            try:
                await self._sweep()
            except Exception:
                log.exception("checking open SSH sessions failed")

    async def _sweep(self) -> None:
        idle = self.app[CONFIG]["ssh"]["idle_seconds"]
        now = time.monotonic()
        for group, until in list(self.blocked.items()):
            if until <= now:
                del self.blocked[group]
        by_key: dict[str, list[_Connection]] = {}
        for conn in list(self.connections):
            if now - conn.last > idle:
                log.info("closing an SSH connection idle for %s s", idle)
                conn.close()
            elif conn.principal is not None:
                by_key.setdefault(conn.principal.fingerprint, []).append(conn)
        if not by_key:
            return
        keys = self.app[STORE].keys
        # Account keys in one query; deploy keys (fewer, and left out of it) one by one.
        rows = await keys.by_fingerprints(list(by_key))
        for fingerprint, conns in by_key.items():
            row = rows.get(fingerprint)
            if row is None and conns[0].principal and conns[0].principal.user is None:
                row = await keys.by_fingerprint(fingerprint)
            if row is None or (row.get("user_id") and row.get("disabled")):
                for conn in conns:
                    log.info("closing the SSH session of a removed key or disabled account")
                    conn.close()


class _Connection(asyncssh.SSHServer):
    """One client connection: its address, the key it proved, when it last moved bytes."""

    def __init__(self, service: SshService) -> None:
        self.service = service
        self.app = service.app
        self.conn: asyncssh.SSHServerConnection | None = None
        self.group = ""
        self.admitted = False
        self.principal: Principal | None = None
        self._candidate: Principal | None = None
        self.last = time.monotonic()
        self.sessions = 0  # sessions under way
        self.sessions_run = 0  # sessions opened, ended or not
        self.ended = 0.0  # when a session last ended (time.monotonic)

    def touch(self) -> None:
        """Bytes moved: the idle clock starts again."""
        self.last = time.monotonic()

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self.conn = conn
        peer = conn.get_extra_info("peername")
        self.group = address_group(
            peer[0] if peer else "", self.app[CONFIG]["rate_limit"]["ipv6_prefix"]
        )
        self.admitted = self.service.admit(self.group)
        if not self.admitted:
            log.warning("refused an SSH connection from %s: ssh.max_per_ip reached", self.group)
            conn.close()
            return
        self.service.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.service.connections.discard(self)
        if self.admitted:
            self.admitted = False
            self.service.leave(self.group)

    def begin_auth(self, username: str) -> bool:
        return True  # every connection proves a key

    def password_auth_supported(self) -> bool:
        return False

    def kbdint_auth_supported(self) -> bool:
        return False

    def public_key_auth_supported(self) -> bool:
        return True

    async def validate_public_key(self, username: str, key: asyncssh.SSHKey) -> bool:
        """Whether key is a registered key of an enabled account, or a deploy key."""
        # Asked twice per key (offered, then signed); asyncssh checks the signature after.
        self.touch()
        blocked = self.service.blocked
        if blocked.get(self.group, 0.0) > time.monotonic():
            self.close()  # as a sign-in past its budget: not even a right key answers
            return False
        blocked.pop(self.group, None)
        fingerprint = key.get_fingerprint("sha256")
        principal = await _principal(self.app, fingerprint)
        if principal is None:
            # Unknown keys spend the address's sign-in budget: guessing costs what
            # guessing passwords does.
            limiter = self.app.get(SIGN_IN_LIMITER)
            if limiter is not None:
                allowed, _, wait = await limiter.spend(f"{self.group}|ssh")
                if not allowed:
                    log.warning("SSH authentication from %s: too many failures", self.group)
                    blocked[self.group] = time.monotonic() + wait
                    self.close()
            return False
        self._candidate = principal
        return True

    def auth_completed(self) -> None:
        # The last key validated is the one whose signature just verified.
        self.principal = self._candidate
        self.touch()
        if self.principal is not None:
            self.app[BACKGROUND].spawn(self.app[STORE].keys.touch(self.principal.key_id))


async def _principal(app: web.Application, fingerprint: str) -> Principal | None:
    """The registered key of this fingerprint as a principal, or None (unknown, disabled)."""
    store = app[STORE]
    row: dict[str, Any] | None = await store.keys.by_fingerprint(fingerprint)
    if row is None:
        return None
    if row.get("user_id"):
        user = await store.users.by_id(row["user_id"])
        if user is None or user["disabled"]:
            return None
        return Principal(row["id"], fingerprint, user, None, bool(row["read_only"]))
    repo = await store.repos.by_id(row["repo_id"])
    if repo is None:
        return None
    name = f"{repo['owner_username']}/{repo['name']}"
    return Principal(row["id"], fingerprint, None, repo["id"], bool(row["read_only"]), name)


SSH = web.AppKey("ssh", SshService)


async def ssh_ctx(app: web.Application) -> AsyncIterator[None]:
    """The SSH server beside the HTTP one, when [ssh] port is set."""
    service = app[SSH]
    if not app[CONFIG]["ssh"]["port"]:
        yield
        return
    await service.start()
    yield
    await service.stop()


async def ssh_closing(app: web.Application) -> None:
    """on_shutdown: accept no more SSH connections; sessions under way go on (drain)."""
    app[SSH].stop_listening()
