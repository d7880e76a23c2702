"""SIGTERM drains: what a process accepted is answered, then it exits 0 (hubsvc/web/drain.py).

Before: a push in flight failed with curl's "RPC failed" (aiohttp's shutdown stops
reading a closing connection), and the jobs lease stayed with the stopping process
until it exited.
"""

from __future__ import annotations

import asyncio
import http.client
import os
import shutil
import signal
import socket
import time

import aiohttp
import pytest
from aiohttp import WSMsgType

from .gitcli import git
from .proxy import RoundRobinProxy
from .server import ServerProcess, lease_holder, seed_owner, start_several, stop_all
from .test_ssh import add_key, hold, open_site, release

BODY = b'{"username": "owner", "password": "12345678"}'


def _open_trickle(port: int) -> socket.socket:
    """A sign-in whose head and first half of a body are sent: a request in flight."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    head = (
        "POST /auth/sign-in HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(BODY)}\r\n\r\n"
    )
    sock.sendall(head.encode() + BODY[:10])
    return sock


def _answer(sock: socket.socket) -> tuple[int, str]:
    """(status, the head of the answer) read from a connection the server then closes."""
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    sock.close()
    head = data.split(b"\r\n\r\n", 1)[0].decode()
    return int(head.split(" ", 2)[1]), head.lower()


def _get(conn: http.client.HTTPConnection, path: str) -> tuple[int, str | None]:
    """GET on a kept-alive connection: (status, its Connection header)."""
    conn.request("GET", path)
    resp = conn.getresponse()
    resp.read()
    return resp.status, resp.getheader("Connection")


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


async def _until(check, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not await asyncio.to_thread(check):
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


async def test_sigterm_answers_what_is_in_flight_then_exits_0(tmp_path):
    # drain_seconds far above the wait below: the process must leave once it is done,
    # not at the deadline.
    server = ServerProcess(tmp_path / "data", {"server": {"drain_seconds": 300}})
    await asyncio.to_thread(server.start)
    headers, _ = await asyncio.to_thread(seed_owner, server)
    work = tmp_path / "work"
    await git("init", "-q", "-b", "main", str(work))
    (work / "big.bin").write_bytes(os.urandom(1_500_000))  # does not compress
    await git("add", ".", cwd=work)
    await git("commit", "-qm", "big", cwd=work)

    with RoundRobinProxy([server.port], rate=500_000) as proxy:
        remote = proxy.url.replace("http://", "http://owner:12345678@") + "/owner/proj.git"
        push = asyncio.create_task(git("push", remote, "main", cwd=work, check=False))
        async with aiohttp.ClientSession() as session:
            ws = await session.ws_connect(
                server.url.replace("http", "ws") + "/ws?token=" + headers["Authorization"][7:]
            )
            assert (await ws.receive_json(timeout=10))["type"] == "connected"
            kept = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
            assert (await asyncio.to_thread(_get, kept, "/health"))[0] == 200
            trickle = await asyncio.to_thread(_open_trickle, server.port)
            await _until(lambda: proxy.sent_up > 200_000, "the push's upload did not start")

            server.proc.send_signal(signal.SIGTERM)
            # No new connection is taken...
            await _until(lambda: _refused(server.port), "still accepting")
            # ...but one kept alive is answered, and told it closes.
            assert await asyncio.to_thread(_get, kept, "/api/meta") == (200, "close")
            kept.close()
            # The socket is closed going away, so its client resumes on another process.
            message = await ws.receive(timeout=30)
            assert message.type == WSMsgType.CLOSE and message.data == 1001
            # A request whose body was still arriving is answered.
            trickle.sendall(BODY[10:])
            status, head = await asyncio.to_thread(_answer, trickle)
            assert status == 200 and "connection: close" in head
        code, _, err = await push
        assert code == 0, err
        assert "main -> main" in err
    assert await asyncio.to_thread(server.proc.wait, 60) == 0
    server.log.close()
    logs = server.logs()
    assert "drained in" in logs and "Traceback" not in logs


async def test_the_jobs_lease_moves_while_its_holder_drains(tmp_path, postgres_url, redis_url):
    a, b = await asyncio.to_thread(
        start_several,
        tmp_path / "data",
        2,
        redis_url,
        {"database": {"url": postgres_url}, "server": {"drain_seconds": 300}},
    )
    try:
        await _until(
            lambda: (lease_holder(a.data_dir, url=postgres_url) or ("", 0))[1] == a.proc.pid,
            "the first process did not take the lease",
        )
        await asyncio.to_thread(a.sign_up, "owner", "12345678")
        trickle = await asyncio.to_thread(_open_trickle, a.port)  # holds a's drain open
        a.proc.send_signal(signal.SIGTERM)
        # b holds the lease while a still drains: handed off, not left to run out.
        await _until(
            lambda: (lease_holder(a.data_dir, url=postgres_url) or ("", 0))[1] == b.proc.pid,
            "the lease did not move",
        )
        assert a.proc.poll() is None
        trickle.sendall(BODY[10:])
        status, _ = await asyncio.to_thread(_answer, trickle)
        assert status == 200
        assert await asyncio.to_thread(a.proc.wait, 60) == 0
        a.log.close()
        assert "handed off the jobs lease" in a.logs()
    finally:
        await asyncio.to_thread(stop_all, [a, b])


def test_an_ssh_session_under_way_finishes_and_new_ones_are_refused(tmp_path):
    if shutil.which("ssh") is None:
        if os.environ.get("HUBSVC_TEST_SSH") == "1":
            pytest.fail("HUBSVC_TEST_SSH=1 but the OpenSSH client (ssh) is not installed")
        pytest.skip("needs the OpenSSH client (ssh)")
    with open_site(tmp_path, {"server": {"drain_seconds": 300}}) as site:
        key, _ = add_key(site, "alice", "drain")
        held = hold(site, key)  # upload-pack has advertised and waits for the client
        try:
            site.server.proc.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + 30
            while not _refused(site.port):
                assert time.monotonic() < deadline, "SSH still accepting"
                time.sleep(0.05)
            assert site.server.proc.poll() is None  # it waits for the session
            out, err = held.communicate(b"0000", timeout=30)  # the client wants nothing
            assert held.returncode == 0, err
        finally:
            release(held)
        assert site.server.proc.wait(60) == 0
        site.server.log.close()
