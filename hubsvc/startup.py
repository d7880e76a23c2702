"""Checks run before the server says it listens: each failure is one line naming the setting."""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import tempfile
from pathlib import Path
from typing import Any


class StartupError(Exception):
    """The server cannot start; the message says what to change."""


def check_listen(host: str, port: int, setting: str = "[server] port or --port") -> None:
    """Bind host:port once, as aiohttp will, so a busy port is reported before anything runs."""
    where = "(set [server] host or --host)"
    try:
        infos = socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except socket.gaierror as exc:
        raise StartupError(f"host {host} cannot be resolved: {exc.strerror} {where}") from None
    for family, kind, proto, _, address in infos:
        with socket.socket(family, kind, proto) as sock:
            # asyncio's create_server sets both, so a socket left in TIME_WAIT by the
            # previous run is no reason to refuse, and IPv6 leaves IPv4 to its own socket.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise StartupError(f"port {port} is in use (set {setting})") from None
                if exc.errno == errno.EACCES:
                    raise StartupError(
                        f"port {port} needs root or CAP_NET_BIND_SERVICE (set {setting})"
                    ) from None
                if exc.errno == errno.EADDRNOTAVAIL:
                    raise StartupError(
                        f"host {host} is not an address of this machine {where}"
                    ) from None
                raise StartupError(f"cannot listen on {host}:{port}: {exc.strerror}") from None


def check_data_dir(path: Path) -> None:
    """Create the data folder if needed and write a scratch file in it."""
    where = "(set [storage] data_dir or --data-dir)"
    if path.exists() and not path.is_dir():
        raise StartupError(f"data folder {path} is not a folder {where}")
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise StartupError(f"data folder {path} is not writable: {exc.strerror} {where}") from None


def describe(exc: OSError) -> str:
    """An OSError as one line: the file and the reason, without the errno."""
    return f"{exc.filename}: {exc.strerror}" if exc.filename else (exc.strerror or str(exc))


LOCK_NAME = "server.lock"
_held: list[Any] = []  # the locks' file descriptors and connections, held for life


def claim_data_dir(path: Path, several: bool) -> None:
    """Lock the data folder for this server process, or refuse to start.

    One process alone ([redis] url empty) takes the lock exclusively: a second server on
    the same data would run with split events, limits and caches. With Redis every
    process takes it shared, and refuses a folder a lone process holds (and the other
    way round). The command line's commands take no lock; they ask the database.
    """
    fd = os.open(path / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if several else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        if several:
            raise StartupError(
                f"a hubsvc server without [redis] url is running on data folder {path}: "
                "stop it, or give every process the same [redis] url and prefix"
            ) from None
        raise StartupError(
            f"another hubsvc server is running on data folder {path}: one process per data "
            "folder, unless every process sets [redis] url (and the same prefix) to share "
            "events, limits and caches"
        ) from None
    _held.append(fd)


def claim_database(url: str, several: bool) -> None:
    """The data folder's rule, held in PostgreSQL too: processes on other machines share
    the database but may not share a lockable folder. An advisory lock held by a
    connection of its own for the process's life: shared with Redis, exclusive without.
    """
    if not url:
        return
    from .store.engines.postgres import SERVER_LOCK, connect

    try:
        conn = connect(url)
    except Exception as exc:  # psycopg's errors; the message says what failed
        raise StartupError(f"cannot connect to [database] url: {exc}") from None
    take = "pg_try_advisory_lock_shared" if several else "pg_try_advisory_lock"
    if not conn.execute(f"SELECT {take}(%s)", (SERVER_LOCK,)).fetchone()[0]:
        conn.close()
        if several:
            raise StartupError(
                "a hubsvc server without [redis] url is running on this database: stop it,"
                " or give every process the same [redis] url and prefix"
            )
        raise StartupError(
            "another hubsvc server is running on this database: one process per database,"
            " unless every process sets [redis] url (and the same prefix)"
        )
    _held.append(conn)
