"""A real hubsvc server process on a free port, for tests that need one."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PortTaken(RuntimeError):
    """The chosen port was taken before the server could bind it."""


class ServerProcess:
    """python run.py over a data folder, with a config written from `settings`."""

    def __init__(self, data_dir: Path, settings: dict[str, dict] | None = None) -> None:
        self.data_dir = Path(data_dir)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.settings = {
            "security": {"bcrypt_rounds": 4},
            "rate_limit": {"enabled": False},
            "ssh": {"port": 0},  # off unless the test asks (settings["ssh"]["port"])
        }
        for section, values in (settings or {}).items():
            self.settings.setdefault(section, {}).update(values)
        self.proc: subprocess.Popen | None = None
        self.log_path = self.data_dir.parent / f"server-{self.port}.log"

    def _write_config(self) -> Path:
        lines = []
        for section, values in self.settings.items():
            lines.append(f"[{section}]")
            lines += [f"{key} = {json.dumps(value)}" for key, value in values.items()]
        path = self.data_dir.parent / f"config-{self.port}.toml"
        path.write_text("\n".join(lines) + "\n")
        return path

    def start(self, timeout: float = 45) -> ServerProcess:
        # 45 s: at a load average of 10+ on two cores a start took past 20 s (a helper's run).
        for _ in range(3):
            try:
                return self._start(timeout)
            except PortTaken:
                # free_port's port was taken before the server bound it (another test's
                # process or an outgoing connection): the same start on another port.
                self.port = free_port()
                self.url = f"http://127.0.0.1:{self.port}"
                self.log_path = self.data_dir.parent / f"server-{self.port}.log"
        return self._start(timeout)

    def _start(self, timeout: float) -> ServerProcess:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        config = self._write_config()
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "run.py"),
                "--config",
                str(config),
                "--port",
                str(self.port),
                "--data-dir",
                str(self.data_dir),
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            # The file's [ssh] port decides, not the tests' HUBSVC_SSH_PORT=0.
            env={
                **{k: v for k, v in os.environ.items() if k != "HUBSVC_SSH_PORT"},
                "PYTHONPATH": str(ROOT),
            },
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.log.close()
                logs = self.logs()
                if f"port {self.port} is in use" in logs:
                    raise PortTaken(logs)
                raise RuntimeError(f"server exited: {logs}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=1) as resp:
                    # Another process may hold the port: only this one's answer counts.
                    if resp.status == 200 and self.proc.poll() is None:
                        return self
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.05)
        # Not left running behind the failure: it would take the CPU from the tests after.
        self.proc.kill()
        self.proc.wait()
        self.log.close()
        raise RuntimeError(f"server did not start: {self.logs()}")

    def logs(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, sig: int | None = None, timeout: float = 20) -> int:
        """Send sig (SIGTERM by default) and wait for the exit code."""
        import signal

        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig or signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        finally:
            self.log.close()
        return code

    def request(
        self, method: str, path: str, body: dict | None = None, headers: dict | None = None
    ) -> tuple[int, dict]:
        """A JSON request with urllib; returns status and decoded body."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            self.url + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json", **(headers or {})},
        )
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                raw = resp.read()
                return resp.status, (json.loads(raw) if raw else {})
        except urllib.error.HTTPError as err:
            raw = err.read()
            return err.code, (json.loads(raw) if raw else {})

    def sign_up(self, username: str, password: str, name: str | None = None) -> dict:
        """A new account (e-mail <username>@example.com); the sign-up answer, with its token."""
        status, body = self.request(
            "POST",
            "/auth/sign-up",
            {
                "email": f"{username}@example.com",
                "username": username,
                "password": password,
                "name": name or username,
            },
        )
        assert status == 201, body
        return body

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.stop()


def seed_owner(server: ServerProcess, repo: str = "proj") -> tuple[dict[str, str], str]:
    """Sign up `owner` (password 12345678) with a public repository: (headers, git URL)."""
    status, body = server.request(
        "POST",
        "/auth/sign-up",
        {"email": "o@example.com", "username": "owner", "password": "12345678", "name": "O"},
    )
    assert status == 201, body
    headers = {"Authorization": f"Bearer {body['token']}"}
    assert server.request("POST", "/api/repositories", {"name": repo}, headers)[0] == 201
    return headers, server.url.replace("http://", "http://owner:12345678@") + f"/owner/{repo}.git"


def several(
    data_dir: Path,
    count: int,
    settings: dict[str, dict] | None = None,
    redis: tuple[str, str] | None = None,
) -> list[ServerProcess]:
    """count servers over ONE data folder (one SQLite file), not started yet.

    With redis (url, prefix), each gets [redis] url and prefix: several processes on one
    data folder share their events, limits and caches through it.
    """
    merged = {section: dict(values) for section, values in (settings or {}).items()}
    if redis is not None:
        merged.setdefault("redis", {}).update(url=redis[0], prefix=redis[1])
    return [ServerProcess(data_dir, merged) for _ in range(count)]


def lease_holder(data_dir: Path, name: str = "jobs", url: str = "") -> tuple[str, int] | None:
    """(holder id, pid) of a lease as the database has it now, None when nobody holds it."""
    if url:  # PostgreSQL
        import psycopg

        with psycopg.connect(url) as pg:
            row = pg.execute("SELECT holder FROM leases WHERE name = %s", (name,)).fetchone()
    else:
        conn = sqlite3.connect(f"file:{Path(data_dir) / 'hubsvc.db'}?mode=ro", uri=True, timeout=5)
        try:
            row = conn.execute("SELECT holder FROM leases WHERE name = ?", (name,)).fetchone()
        finally:
            conn.close()
    if row is None:
        return None
    return row[0], int(row[0].split(":")[1])


def start_several(
    data_dir: Path, count: int, redis: tuple[str, str], settings: dict[str, dict] | None = None
) -> list[ServerProcess]:
    """count servers over one data folder (one SQLite file) sharing one Redis url and prefix.

    The first starts alone (it migrates the database and writes the secret key), the
    rest together. Stop them with stop_all.
    """
    merged = {section: dict(values) for section, values in (settings or {}).items()}
    merged.setdefault("redis", {}).update({"url": redis[0], "prefix": redis[1]})
    servers = [ServerProcess(data_dir, merged) for _ in range(count)]
    servers[0].start()
    started = [servers[0]]
    try:
        with ThreadPoolExecutor(count) as pool:
            for server in pool.map(lambda s: s.start(), servers[1:]):
                started.append(server)
    except BaseException:
        stop_all(servers)
        raise
    return servers


def stop_all(servers: list[ServerProcess]) -> None:
    """Stop every server that is running."""
    for server in servers:
        if server.proc is not None and server.proc.poll() is None:
            server.stop()
