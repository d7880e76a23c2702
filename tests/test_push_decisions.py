"""Git's hooks run and ask the server: on README's install, and at the moment refs move."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from .gitcli import ENV
from .server import ROOT, ServerProcess, free_port


def _git(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        env={**os.environ, **ENV},
        capture_output=True,
        text=True,
        timeout=60,
    )


def _call(url: str, method: str, path: str, body=None, token: str | None = None):
    req = urllib.request.Request(
        url + path,
        data=json.dumps(body).encode() if body is not None else None,
        method=method,
        headers={
            "Content-Type": "application/json",
            **({"Authorization": f"Bearer {token}"} if token else {}),
        },
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if raw else {}
    except urllib.error.HTTPError as err:
        raw = err.read()
        return err.code, json.loads(raw) if raw else {}


def test_readmes_first_command_runs_the_hooks(tmp_path):
    """`python run.py` in a folder of its own keeps the data in ./data; git still runs the
    hooks: a protected branch refuses a direct push, and a push becomes an event."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "run.py").symlink_to(ROOT / "run.py")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUBSVC_")}
    # README's command as written; only what a test must change comes from the
    # environment (a free port, fast password hashing, no rate limit).
    env.update(
        PYTHONPATH=str(ROOT),
        HUBSVC_SERVER_PORT=str(port),
        HUBSVC_SECURITY_BCRYPT_ROUNDS="4",
        HUBSVC_RATE_LIMIT_ENABLED="false",
    )
    log = open(tmp_path / "server.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "run.py"],
        cwd=checkout,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, (tmp_path / "server.log").read_text()
            try:
                with urllib.request.urlopen(url + "/health", timeout=1):
                    break
            except OSError:
                assert time.monotonic() < deadline, (tmp_path / "server.log").read_text()
                time.sleep(0.05)
        assert (checkout / "data" / "hubsvc.db").is_file()  # ./data, relative to where it ran

        status, body = _call(
            url,
            "POST",
            "/auth/sign-up",
            {"email": "o@example.com", "username": "owner", "password": "12345678", "name": "O"},
        )
        assert status == 201, body
        token = body["token"]
        assert _call(url, "POST", "/api/repositories", {"name": "proj"}, token)[0] == 201
        remote = url.replace("http://", "http://owner:12345678@") + "/owner/proj.git"
        work = tmp_path / "work"
        assert _git("clone", "-q", remote, str(work), cwd=tmp_path).returncode == 0
        _git("commit", "-q", "--allow-empty", "-m", "first", cwd=work)
        pushed = _git("push", "-q", "origin", "HEAD:main", cwd=work)
        assert pushed.returncode == 0, pushed.stderr
        rule = {
            "requiredPullRequestReviews": {"requiredApprovingReviewCount": 1},
            "enforceAdmins": True,
        }
        status, body = _call(
            url, "PUT", "/api/repositories/owner/proj/branches/main/protection", rule, token
        )
        assert status == 200, body

        _git("commit", "-q", "--allow-empty", "-m", "direct", cwd=work)
        refused = _git("push", "origin", "HEAD:main", cwd=work)
        assert refused.returncode != 0, refused.stderr
        assert "main is protected: changes must go through a pull request" in refused.stderr

        pushed = _git("push", "-q", "origin", "HEAD:topic", cwd=work)
        assert pushed.returncode == 0, pushed.stderr
        status, body = _call(url, "GET", "/api/repositories/owner/proj/events", token=token)
        assert status == 200, body
        refs = [e["data"]["ref"] for e in body["events"] if e["type"] == "push"]
        assert refs == ["refs/heads/main", "refs/heads/topic"], body
    finally:
        proc.terminate()
        proc.wait(20)
        log.close()


def test_a_server_whose_hooks_cannot_run_does_not_start(tmp_path):
    data = tmp_path / "data"
    ServerProcess(data).start().stop()
    (data / "git-hooks" / "pre-receive").chmod(0o644)  # as on a noexec mount
    server = ServerProcess(data)
    with pytest.raises(RuntimeError, match="server exited"):
        server.start()
    assert server.proc is not None and server.proc.wait(10) == 2
    assert "pre-receive is missing or not executable" in server.logs()
