"""The real process: starts on a data folder, serves, shuts down cleanly on SIGTERM/SIGINT."""

from __future__ import annotations

import signal
import stat
import threading
import time
import urllib.error
import urllib.request

import pytest

from .server import ServerProcess


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serves_then_stops_cleanly(tmp_path, sig):
    server = ServerProcess(tmp_path / "data").start()
    status, body = server.request(
        "POST",
        "/auth/sign-up",
        {"email": "p@example.com", "username": "proc", "password": "12345678", "name": "P"},
    )
    assert status == 201
    status, me = server.request(
        "GET", "/api/users/me", headers={"Authorization": f"Bearer {body['token']}"}
    )
    assert status == 200 and me["user"]["username"] == "proc"
    assert stat.S_IMODE((tmp_path / "data" / "secret_key").stat().st_mode) == 0o600
    # A request in flight when the signal arrives still gets its answer.
    answers = []
    worker = threading.Thread(
        target=lambda: answers.append(
            server.request("POST", "/auth/sign-in", {"username": "proc", "password": "12345678"})
        )
    )
    worker.start()
    time.sleep(0.01)
    assert server.stop(sig) == 0
    worker.join(10)
    assert answers and answers[0][0] in (200,)
    # The database was closed: the WAL was checkpointed and removed.
    assert not (tmp_path / "data" / "hubsvc.db-wal").exists()
    assert "Traceback" not in server.logs()


def test_restart_keeps_accounts(tmp_path):
    with ServerProcess(tmp_path / "data") as server:
        status, _ = server.request(
            "POST",
            "/auth/sign-up",
            {"email": "k@example.com", "username": "keep", "password": "12345678", "name": "K"},
        )
        assert status == 201
    with ServerProcess(tmp_path / "data") as server:
        status, body = server.request(
            "POST", "/auth/sign-in", {"username": "keep", "password": "12345678"}
        )
        assert status == 200


def test_json_log_lines_carry_the_request_id(tmp_path):
    import json

    server = ServerProcess(tmp_path / "data", {"server": {"access_log_json": True}}).start()
    req = urllib.request.Request(
        server.url + "/api/users/nobody", headers={"X-Request-Id": "trace-42"}
    )
    try:
        urllib.request.urlopen(req, timeout=10)
    except urllib.error.HTTPError as err:
        assert err.code == 404 and err.headers["X-Request-Id"] == "trace-42"
    assert server.stop() == 0
    entries = [json.loads(line) for line in server.logs().splitlines() if line.startswith("{")]
    assert entries and len(entries) == len([l for l in server.logs().splitlines() if l.strip()])
    access = [e for e in entries if e.get("path") == "/api/users/nobody"]
    assert access and access[0]["status"] == 404 and access[0]["request_id"] == "trace-42"
