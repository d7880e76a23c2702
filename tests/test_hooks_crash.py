"""A repository hook across SIGKILL: an event answered 2xx to its author is delivered after
a restart, in order, each with the delivery id it had before."""

from __future__ import annotations

import asyncio
import signal

from aiohttp import web

from .receiver import Receiver
from .server import ServerProcess, free_port


async def test_sigkill_right_after_2xx_then_restart_delivers(tmp_path):
    receiver = Receiver()
    runner = web.AppRunner(receiver.app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    # Down at first: whatever the killed process managed to try, it was not delivered.
    receiver.plan = [503] * 10000
    settings = {
        "webhooks": {"allowed_hosts": ["127.0.0.1"], "retry_seconds": 0.1, "max_retry_seconds": 0.2}
    }
    server = ServerProcess(tmp_path / "data", settings)
    await asyncio.to_thread(server.start)
    try:

        def produce() -> None:
            status, body = server.request(
                "POST",
                "/auth/sign-up",
                {
                    "email": "o@example.com",
                    "username": "owner",
                    "password": "12345678",
                    "name": "O",
                },
            )
            assert status == 201
            headers = {"Authorization": f"Bearer {body['token']}"}
            assert (
                server.request(
                    "POST", "/api/repositories", {"name": "proj", "visibility": "private"}, headers
                )[0]
                == 201
            )
            status, hook = server.request(
                "POST",
                "/api/repositories/owner/proj/hooks",
                {"url": f"http://127.0.0.1:{port}/hook", "format": "json"},
                headers,
            )
            assert status == 201, hook
            for n in range(3):
                assert (
                    server.request(
                        "POST",
                        "/api/repositories/owner/proj/issues",
                        {"title": f"issue {n}"},
                        headers,
                    )[0]
                    == 201
                )
            # The kill comes right after the answer: no time to deliver, maybe not to queue.
            server.proc.send_signal(signal.SIGKILL)

        await asyncio.to_thread(produce)
        assert await asyncio.to_thread(server.proc.wait, 20) == -signal.SIGKILL
        server.log.close()
        tried = {
            r["headers"]["X-Hubsvc-Delivery"]: r["json"]["data"]["issue"]["title"]
            for r in receiver.requests
        }
        receiver.plan = []
        receiver.requests.clear()
        restarted = ServerProcess(tmp_path / "data", server.settings)
        await asyncio.to_thread(restarted.start)
        try:
            requests = await receiver.wait_for(3, timeout=20)
            await asyncio.sleep(0.5)
        finally:
            await asyncio.to_thread(restarted.stop)
    finally:
        await runner.cleanup()
    assert len(receiver.requests) == 3
    titles = [r["json"]["data"]["issue"]["title"] for r in requests]
    assert titles == ["issue 0", "issue 1", "issue 2"]
    for r in requests:  # what was tried before the kill comes again under the same id
        guid = r["headers"]["X-Hubsvc-Delivery"]
        assert (
            tried.get(guid, r["json"]["data"]["issue"]["title"])
            == r["json"]["data"]["issue"]["title"]
        )
    assert "Traceback" not in restarted.logs()
