"""The event log's costs: issue-create latency against the code without it, and a
WebSocket resume of 1,000 missed events against reading the same events from the feed.

    python benchmarks/bench_events.py [--rounds 5] [--creates 200] [--missed 1000]
                                      [--baseline-ref REF]

The baseline server runs REF (default: the commit before the event log) from a temporary
git worktree of this checkout, over its own data folder, in the same run; rounds
alternate between the two servers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import harness

ROOT = Path(__file__).resolve().parent.parent


def baseline_ref() -> str:
    """The parent of the commit that brought the event log."""
    found = subprocess.run(
        ["git", "-C", str(ROOT), "log", "--format=%H", "-1", "--grep", "^Events as a log"],
        capture_output=True,
        text=True,
        check=True,
    )
    return found.stdout.strip() + "^"


def seed(url: str) -> tuple[str, str]:
    """A user with a repository; returns (token, issues URL)."""
    token = harness.sign_up(url, "bench")
    harness.expect(
        *harness.request_json(
            url + "/api/repositories", "POST", {"name": "proj"}, harness.bearer(token)
        ),
        201,
    )
    return token, url + "/api/repositories/bench/proj/issues"


def create_latency(url: str, token: str, issues: str, n: int) -> float:
    body = json.dumps({"title": "benchmark issue", "body": "x" * 200}).encode()
    headers = {**harness.bearer(token), "Content-Type": "application/json"}
    result = harness.latency(issues, n, headers, method="POST", body=body, expect_status=(201,))
    return result.median_ms


async def resume_time(url: str, token: str, issues: str, missed: int) -> tuple[float, float]:
    """(ms until the last of `missed` replayed notifications arrived, ms to read them from the feed)."""
    ws_url = url.replace("http://", "ws://") + f"/ws?token={token}"
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(ws_url) as ws:
            cursor = (await ws.receive_json())["lastEventId"]
        headers = harness.bearer(token)
        sem = asyncio.Semaphore(8)

        async def one(n: int) -> None:
            async with (
                sem,
                session.post(issues, json={"title": f"missed {n}"}, headers=headers) as resp,
            ):
                assert resp.status == 201

        await asyncio.gather(*(one(n) for n in range(missed)))
        start = time.perf_counter()
        got = 0
        async with session.ws_connect(ws_url + f"&after={cursor}") as ws:
            while got < missed:
                message = await ws.receive_json(timeout=30)
                got += message["type"] == "notification"
        replay = (time.perf_counter() - start) * 1000
        start, after, read = time.perf_counter(), cursor, 0
        while read < missed:
            async with session.get(
                url + "/api/events", params={"after": after, "limit": 100}, headers=headers
            ) as resp:
                page = await resp.json()
            read += len(page["events"])
            after = page["lastEventId"]
        feed = (time.perf_counter() - start) * 1000
    return replay, feed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--creates", type=int, default=200, help="issue creations per round")
    parser.add_argument("--missed", type=int, default=1000, help="events missed before resume")
    parser.add_argument("--baseline-ref", default=None)
    args = parser.parse_args(argv)
    ref = args.baseline_ref or baseline_ref()
    load = Path("/proc/loadavg").read_text().split()[0]
    print(f"# {' '.join([sys.executable, *sys.argv])}; baseline {ref}; load average {load}")
    with tempfile.TemporaryDirectory(prefix="bench-events-") as tmp:
        old = Path(tmp) / "baseline"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(old), ref], check=True
        )
        try:
            new_server, old_server = (
                harness.Server().start(),
                harness.Server(root=old, name="baseline").start(),
            )
            try:
                new_seed, old_seed = seed(new_server.url), seed(old_server.url)
                news, olds = [], []
                for n in range(args.rounds):
                    pairs = [(olds, old_server, old_seed), (news, new_server, new_seed)]
                    for out, server, (token, issues) in pairs if n % 2 else pairs[::-1]:
                        out.append(create_latency(server.url, token, issues, args.creates))
                    print(
                        f"# round {n + 1}: with the log {news[-1]:.2f} ms, "
                        f"without {olds[-1]:.2f} ms",
                        flush=True,
                    )
                harness.report(
                    "issue create p50 latency, with the event log",
                    harness.median(news),
                    "ms",
                    harness.median(olds),
                    "the same without it",
                    target=1.1,
                    higher_is_better=False,
                    digits=2,
                )
                replays, feeds = [], []
                for n in range(max(1, args.rounds // 2)):
                    replay, feed = asyncio.run(resume_time(new_server.url, *new_seed, args.missed))
                    replays.append(replay)
                    feeds.append(feed)
                    print(
                        f"# resume round {n + 1}: {replay:.0f} ms replay, {feed:.0f} ms feed",
                        flush=True,
                    )
                harness.report(
                    f"WebSocket resume of {args.missed} missed events",
                    harness.median(replays),
                    "ms",
                    harness.median(feeds),
                    "reading them from GET /api/events",
                    digits=0,
                    note="target ≤ 200 ms to the last one: "
                    + ("met" if harness.median(replays) <= 200 else "NOT MET"),
                )
            finally:
                new_server.stop()
                old_server.stop()
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(old)], check=False
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
