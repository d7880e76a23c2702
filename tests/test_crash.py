"""Crash safety with a real process: SIGKILL under concurrent writes, and during a push."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import subprocess
import threading
import time

from aiohttp import web

from .gitcli import ENV
from .receiver import Receiver
from .server import ServerProcess, free_port


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    if int(fh.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    return found


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().decode(errors="replace")
    except OSError:
        return ""


def _kill_all(server: ServerProcess) -> None:
    """A crash: the server and everything it started die at once."""
    kids = _children(server.proc.pid)
    server.proc.send_signal(signal.SIGKILL)
    for kid in kids:
        try:
            os.kill(kid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    server.proc.wait(10)
    server.log.close()


def _writer(server: ServerProcess, n: int, stop: threading.Event, acked: list) -> None:
    """Sign up, then create repositories, issues, comments and stars until stopped."""
    name = f"w{n}"
    status, body = server.request(
        "POST",
        "/auth/sign-up",
        {"email": f"{name}@example.com", "username": name, "password": "12345678", "name": name},
    )
    if status != 201:
        return
    acked.append(("user", name))
    headers = {"Authorization": f"Bearer {body['token']}"}
    k = 0
    while not stop.is_set():
        try:
            repo = f"r{k}"
            if server.request("POST", "/api/repositories", {"name": repo}, headers)[0] == 201:
                acked.append(("repo", name, repo))
            status, issue = server.request(
                "POST", f"/api/repositories/{name}/{repo}/issues", {"title": f"issue {k}"}, headers
            )
            if status == 201:
                acked.append(("issue", name, repo, issue["issue"]["number"]))
                if (
                    server.request(
                        "POST",
                        f"/api/repositories/{name}/{repo}/issues/1/comments",
                        {"body": f"comment {k}"},
                        headers,
                    )[0]
                    == 201
                ):
                    acked.append(("comment", name, repo, f"comment {k}"))
            if (
                server.request("POST", f"/api/repositories/{name}/{repo}/star", None, headers)[0]
                == 200
            ):
                acked.append(("star", name, repo))
        except OSError:
            return  # the server is gone
        k += 1


def test_sigkill_under_concurrent_writes_loses_nothing_acknowledged(tmp_path):
    port = free_port()
    settings = {"chat": {"webhook_url": f"http://127.0.0.1:{port}/hook", "retry_seconds": 0.2}}
    server = ServerProcess(tmp_path / "data", settings).start()
    stop, acked = threading.Event(), []
    threads = [threading.Thread(target=_writer, args=(server, n, stop, acked)) for n in range(4)]
    for thread in threads:
        thread.start()
    time.sleep(1.5)
    _kill_all(server)
    stop.set()
    for thread in threads:
        thread.join(30)
    assert len(acked) > 20

    db = sqlite3.connect(tmp_path / "data" / "hubsvc.db")
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    # Owed to the chat webhook: queued deliveries, and events of the log its sender had
    # not read yet (each is written with its change; the outbox row follows).
    queued = db.execute(
        "SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'pending'"
    ).fetchone()[0]
    queued += db.execute(
        "SELECT COUNT(*) FROM events WHERE id > (SELECT event_id FROM"
        " event_cursors WHERE name = 'chat-webhook')"
    ).fetchone()[0]
    db.close()
    assert queued > 0

    async def restart_and_check() -> Receiver:
        receiver = Receiver()
        runner = web.AppRunner(receiver.app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        again = ServerProcess(tmp_path / "data", settings)
        await asyncio.to_thread(again.start)
        try:
            await asyncio.to_thread(_check_acked, again, acked)
            await receiver.wait_for(queued, timeout=30)
        finally:
            await asyncio.to_thread(again.stop)
            await runner.cleanup()
        return receiver

    receiver = asyncio.run(restart_and_check())
    ids = [r["headers"]["X-Hubsvc-Delivery"] for r in receiver.requests]
    assert len(ids) == len(set(ids)) >= queued
    db = sqlite3.connect(tmp_path / "data" / "hubsvc.db")
    assert (
        db.execute("SELECT COUNT(*) FROM webhook_deliveries WHERE status = 'pending'").fetchone()[0]
        == 0
    )
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def _check_acked(server: ServerProcess, acked: list) -> None:
    """Every write that was answered 2xx before the crash is there."""
    for item in acked:
        kind, user = item[0], item[1]
        if kind == "user":
            status, _ = server.request(
                "POST", "/auth/sign-in", {"username": user, "password": "12345678"}
            )
            assert status == 200, item
        elif kind == "repo":
            assert server.request("GET", f"/api/repositories/{user}/{item[2]}")[0] == 200, item
        elif kind == "issue":
            assert (
                server.request("GET", f"/api/repositories/{user}/{item[2]}/issues/{item[3]}")[0]
                == 200
            ), item
        elif kind == "comment":
            status, body = server.request("GET", f"/api/repositories/{user}/{item[2]}/issues/1")
            assert item[3] in [c["body"] for c in body["comments"]], item
        elif kind == "star":
            status, body = server.request("GET", f"/api/repositories/{user}/{item[2]}/stars")
            assert user in [u["username"] for u in body["users"]], item


def _git(*args: str, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **ENV},
    )


def test_push_killed_midway_leaves_refs_and_fsck_clean(tmp_path):
    server = ServerProcess(tmp_path / "data").start()
    status, body = server.request(
        "POST",
        "/auth/sign-up",
        {"email": "p@example.com", "username": "pusher", "password": "12345678", "name": "P"},
    )
    headers = {"Authorization": f"Bearer {body['token']}"}
    assert (
        server.request("POST", "/api/repositories", {"name": "big", "autoInit": True}, headers)[0]
        == 201
    )
    url = f"http://pusher:12345678@127.0.0.1:{server.port}/pusher/big.git"
    work = tmp_path / "w"
    assert _git("clone", "-q", url, str(work)).returncode == 0
    before = _git("ls-remote", url).stdout
    (work / "blob.bin").write_bytes(os.urandom(60 << 20))  # incompressible: a long transfer
    _git("add", "blob.bin", cwd=work)
    _git("commit", "-qm", "big", cwd=work)
    push = subprocess.Popen(
        ["git", "push", "-q", "origin", "main"],
        cwd=work,
        env={**os.environ, **ENV},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if any("receive-pack" in _cmdline(k) for k in _children(server.proc.pid)):
            break
        time.sleep(0.005)
    else:
        raise AssertionError("receive-pack never started")
    _kill_all(server)
    push.wait(60)
    assert push.returncode != 0

    again = ServerProcess(tmp_path / "data").start()
    try:
        url = f"http://pusher:12345678@127.0.0.1:{again.port}/pusher/big.git"
        assert _git("ls-remote", url).stdout.replace(str(server.port), "") == before.replace(
            str(server.port), ""
        )
        bare = next((tmp_path / "data" / "repositories").glob("*/*.git"))
        fsck = _git("--git-dir", str(bare), "fsck", "--no-progress")
        assert fsck.returncode == 0, fsck.stderr
        # The repository still takes pushes.
        small = tmp_path / "small"
        assert _git("clone", "-q", url, str(small)).returncode == 0
        (small / "ok.txt").write_text("ok\n")
        _git("add", "ok.txt", cwd=small)
        _git("commit", "-qm", "ok", cwd=small)
        assert _git("push", "-q", "origin", "main", cwd=small).returncode == 0
    finally:
        again.stop()
