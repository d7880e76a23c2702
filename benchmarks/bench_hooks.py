"""Hook delivery benchmark: one repository hook catching up a backlog of events.

    python benchmarks/bench_hooks.py [--events 10000 --rounds 3]

Starts hubsvc (`run.py`, webhooks.allowed_hosts = ["127.0.0.1"], max_retry_seconds 0.2),
signs up an owner, creates a repository and a hook (format json) whose receiver is not
listening yet, opens one issue through the API (its delivery fails and is retried), then
writes `--events - 1` more issue events straight into the events table (the backlog a
hook finds after an outage). Then the receiver (aiohttp in this process, answering 200)
starts listening, and the time from then to the last delivery is measured.

Baseline: the same receiver fed the same bodies by one aiohttp client posting in order on
a kept-alive connection (the fastest in-order sender there is). Target: ≥ 500
deliveries/s for the hook. Exit code 1 when the target is not met.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import time

import aiohttp
import harness
from aiohttp import web


class Counter:
    def __init__(self, want: int) -> None:
        self.want, self.count, self.first, self.done = want, 0, None, asyncio.Event()
        self.order_ok, self.last_id = True, 0
        self.bodies: list[bytes] = []

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        event_id = int(json.loads(body)["id"])
        self.order_ok &= event_id > self.last_id
        self.last_id = event_id
        self.count += 1
        self.first = self.first or time.monotonic()
        if self.count >= self.want:
            self.done.set()
        return web.Response(status=200)


async def _listen(counter: Counter, port: int) -> web.AppRunner:
    app = web.Application()
    app.router.add_post("/hook", counter.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner


async def hook_round(events: int) -> tuple[float, float]:
    """Deliveries per second from the receiver's start, and from its first request."""
    port = harness.free_port()
    settings = {
        "webhooks": {"allowed_hosts": ["127.0.0.1"], "retry_seconds": 0.1, "max_retry_seconds": 0.2}
    }
    with harness.Server(settings) as server:
        token = harness.sign_up(server.url, "bench")
        auth = harness.bearer(token)
        harness.expect(
            *harness.request_json(server.url + "/api/repositories", "POST", {"name": "proj"}, auth),
            201,
        )
        harness.expect(
            *harness.request_json(
                server.url + "/api/repositories/bench/proj/hooks",
                "POST",
                {"url": f"http://127.0.0.1:{port}/hook", "format": "json"},
                auth,
            ),
            201,
        )
        harness.expect(
            *harness.request_json(
                server.url + "/api/repositories/bench/proj/issues", "POST", {"title": "t"}, auth
            ),
            201,
        )
        db = sqlite3.connect(server.data_dir / "hubsvc.db", timeout=30)
        row = db.execute(
            "SELECT type, action, repo_id, actor_id, payload, created_at"
            " FROM events ORDER BY id DESC LIMIT 1"
        ).fetchone()
        with db:
            db.executemany(
                "INSERT INTO events (type, action, repo_id, actor_id, payload,"
                " created_at) VALUES (?, ?, ?, ?, ?, ?)",
                [row] * (events - 1),
            )
        db.close()
        counter = Counter(events)
        started = time.monotonic()
        runner = await _listen(counter, port)
        try:
            await asyncio.wait_for(counter.done.wait(), 600)
        finally:
            end = time.monotonic()
            await runner.cleanup()
        assert counter.order_ok, "deliveries out of order"
    return events / (end - started), events / (end - counter.first)


async def baseline_round(events: int) -> float:
    """The same number of bodies posted in order by one kept-alive client."""
    port = harness.free_port()
    counter = Counter(events)
    runner = await _listen(counter, port)
    body = json.dumps({"id": "1", "type": "issue", "data": {"title": "t" * 200}}).encode()
    try:
        async with aiohttp.ClientSession() as session:
            started = time.monotonic()
            for n in range(events):
                async with session.post(
                    f"http://127.0.0.1:{port}/hook",
                    data=body.replace(b'"1"', f'"{n + 1}"'.encode(), 1),
                    headers={"Content-Type": "application/json"},
                ) as resp:
                    await resp.read()
            return events / (time.monotonic() - started)
    finally:
        await runner.cleanup()


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    hooks, firsts, bases = [], [], []
    for n in range(args.rounds):
        rate, from_first = await hook_round(args.events)
        base = await baseline_round(args.events)
        print(
            f"# round {n + 1}: hook {rate:,.0f}/s ({from_first:,.0f}/s from its first "
            f"request), baseline {base:,.0f}/s",
            flush=True,
        )
        hooks.append(rate)
        firsts.append(from_first)
        bases.append(base)
    hook, base = harness.median(hooks), harness.median(bases)
    harness.report("baseline in-order POSTs to the receiver", base, "req/s")
    harness.report(
        f"hook catching up {args.events:,} events",
        hook,
        "deliveries/s",
        baseline=base,
        note=f"{harness.median(firsts):,.0f}/s from the first "
        f"request; target ≥ 500/s: {'met' if hook >= 500 else 'NOT MET'}",
    )
    return 0 if hook >= 500 else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
