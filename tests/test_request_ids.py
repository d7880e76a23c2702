"""Logs an operator can search: [log] format = "json" lines with the request id, user,
route, status and duration; and one push followed by its request id from git's request
to the pre-receive hook's decision and to the webhook delivery a real receiver gets,
also when another process (the lease holder) sends it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess

from aiohttp import web

from .receiver import Receiver
from .server import ServerProcess, free_port, lease_holder, seed_owner, start_several, stop_all

GIT_ENV = {
    **os.environ,
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "T",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "T",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}


def git(*args: str, cwd=None) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True)


def json_lines(server: ServerProcess) -> list[dict]:
    """Every line of the server's log, each one JSON object (a line that is not fails)."""
    return [json.loads(line) for line in server.logs().splitlines() if line.strip()]


def push_with_id(tmp_path, url: str, rid: str) -> None:
    """A commit pushed with stock git, its requests carrying X-Request-Id: rid."""
    work = tmp_path / "work"
    work.mkdir()
    git("init", "-q", "-b", "main", cwd=work)
    (work / "README").write_text("hello\n")
    git("add", "README", cwd=work)
    git("commit", "-qm", "first", cwd=work)
    git("-c", f"http.extraHeader=X-Request-Id: {rid}", "push", "-q", url, "main", cwd=work)


async def receive(port: int, servers: list[ServerProcess], act) -> Receiver:
    """Run act (blocking) with a webhook receiver on port; wait for one delivery."""
    receiver = Receiver()
    runner = web.AppRunner(receiver.app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        await asyncio.to_thread(act)
        await receiver.wait_for(1, timeout=30)
    finally:
        await runner.cleanup()
    return receiver


def add_hook(server: ServerProcess, headers: dict, port: int) -> None:
    status, body = server.request(
        "POST",
        "/api/repositories/owner/proj/hooks",
        {"url": f"http://127.0.0.1:{port}/hook", "events": ["push"]},
        headers,
    )
    assert status == 201, body


def test_json_lines_and_a_push_followed_by_its_request_id(tmp_path):
    port = free_port()
    server = ServerProcess(
        tmp_path / "data",
        {"log": {"format": "json"}, "webhooks": {"allowed_hosts": ["127.0.0.1"]}},
    ).start()
    rid = "push-trace-0123"
    try:
        headers, url = seed_owner(server)
        add_hook(server, headers, port)
        status, _ = server.request(
            "GET", "/api/repositories/owner/proj", headers={**headers, "X-Request-Id": "read-1"}
        )
        assert status == 200
        receiver = asyncio.run(receive(port, [server], lambda: push_with_id(tmp_path, url, rid)))
    finally:
        assert server.stop() == 0
    lines = json_lines(server)
    read = [e for e in lines if e.get("request_id") == "read-1" and "route" in e]
    assert len(read) == 1, read
    assert read[0]["user"] == "owner"
    assert read[0]["route"] == "/api/repositories/{owner}/{name}"
    assert read[0]["path"] == "/api/repositories/owner/proj"
    assert read[0]["status"] == 200 and read[0]["ms"] > 0 and read[0]["method"] == "GET"
    # The hook's question came from git's process, not from the request's task: the id
    # travelled through git's environment and the hook socket.
    decided = [
        e for e in lines if e["logger"] == "hubsvc.git.hooks" and "pre-receive" in e["message"]
    ]
    assert [e["request_id"] for e in decided] == [rid], decided
    assert "accepted" in decided[0]["message"]
    delivered = receiver.requests[0]
    assert delivered["headers"]["X-Hubsvc-Request-Id"] == rid
    assert delivered["headers"]["X-Hubsvc-Event"] == "push"


def test_a_delivery_sent_by_another_process_carries_the_push_id(tmp_path, redis_url):
    """Two processes on Redis: the push lands on the one without the lease, the lease
    holder sends the delivery, with the push's id read from the database."""
    port = free_port()
    servers = start_several(
        tmp_path / "data",
        2,
        redis_url,
        {"log": {"format": "json"}, "webhooks": {"allowed_hosts": ["127.0.0.1"]}},
    )
    rid = "push-across-0123"
    try:
        holder = lease_holder(tmp_path / "data")
        assert holder is not None
        pusher = next(s for s in servers if s.proc.pid != holder[1])
        sender = next(s for s in servers if s.proc.pid == holder[1])
        headers, url = seed_owner(pusher)
        add_hook(pusher, headers, port)
        receiver = asyncio.run(receive(port, servers, lambda: push_with_id(tmp_path, url, rid)))
    finally:
        stop_all(servers)
    assert receiver.requests[0]["headers"]["X-Hubsvc-Request-Id"] == rid
    decided = [e for e in json_lines(pusher) if e["logger"] == "hubsvc.git.hooks"]
    assert [e["request_id"] for e in decided if "pre-receive" in e["message"]] == [rid]
    assert not [e for e in json_lines(sender) if e.get("path", "").endswith("receive-pack")]
