"""Soak: a mixed load for N minutes, sampling RSS, fds, WAL size and latency each minute.

    python benchmarks/soak.py                       # 3 minutes
    python benchmarks/soak.py --minutes 15 --ws 200 --tracemalloc 120

Drives a real server with API workers (reads, issue and comment writes, sign-ins),
git workers (clone and push with the git CLI) and WebSocket clients held open, then
idles for --idle-minutes to see whether memory comes back down. Prints one row per
minute; with --tracemalloc N the server logs its top allocation growth every N
seconds (HUBSVC_TRACEMALLOC) and the last report is printed at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import harness

GIT_ENV = {
    **os.environ,
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "Soak",
    "GIT_AUTHOR_EMAIL": "soak@example.com",
    "GIT_COMMITTER_NAME": "Soak",
    "GIT_COMMITTER_EMAIL": "soak@example.com",
}
PASSWORD = "correct horse battery"


class Stats:
    """Latencies and counts of the current minute."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.latencies: list[float] = []
        self.errors = 0
        self.pushes = 0
        self.clones = 0

    def total(self) -> int:
        return len(self.latencies)


async def api_worker(
    session: aiohttp.ClientSession, url: str, users: list[dict], stats: Stats, stop: asyncio.Event
) -> None:
    rng = random.Random()
    while not stop.is_set():
        user = rng.choice(users)
        headers = {"Authorization": f"Bearer {user['token']}"}
        repo = f"/api/repositories/{user['name']}/proj"
        roll = rng.random()
        if roll < 0.35:
            method, path, body = "GET", "/api/users/me", None
        elif roll < 0.55:
            method, path, body = "GET", repo + "/issues", None
        elif roll < 0.70:
            method, path, body = "GET", repo, None
        elif roll < 0.80:
            method, path, body = "POST", repo + "/issues", {"title": f"soak {rng.random()}"}
        elif roll < 0.92:
            method, path, body = (
                "POST",
                repo + "/issues/1/comments",
                {"body": "x" * rng.randint(10, 2000)},
            )
        elif roll < 0.97:
            method, path, body = "GET", "/health", None
        else:
            method, path, body = (
                "POST",
                "/auth/sign-in",
                {"username": user["name"], "password": PASSWORD},
            )
        start = time.perf_counter()
        try:
            async with session.request(method, url + path, json=body, headers=headers) as resp:
                await resp.read()
                if resp.status >= 400:
                    stats.errors += 1
        except aiohttp.ClientError:
            stats.errors += 1
        stats.latencies.append(time.perf_counter() - start)


async def git(*args: str, cwd: Path | None = None) -> int:
    proc = await asyncio.create_subprocess_exec(
        "git",
        *args,
        cwd=cwd,
        env=GIT_ENV,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    return await proc.wait()


async def git_worker(
    n: int, url: str, users: list[dict], work: Path, stats: Stats, stop: asyncio.Event
) -> None:
    user = users[n % len(users)]
    host = url.removeprefix("http://")
    remote = f"http://{user['name']}:{PASSWORD.replace(' ', '%20')}@{host}/{user['name']}/proj.git"
    counter = 0
    while not stop.is_set():
        clone = work / f"clone-{n}"
        if await git("clone", "-q", remote, str(clone)) == 0:
            stats.clones += 1
            counter += 1
            (clone / f"f{n}.txt").write_text(f"{counter} {random.random()}\n")
            await git("add", "-A", cwd=clone)
            await git("commit", "-qm", f"soak {counter}", cwd=clone)
            for _ in range(3):  # another worker may have pushed to the same branch
                if await git("push", "-q", "origin", "HEAD:main", cwd=clone) == 0:
                    stats.pushes += 1
                    break
                await git("pull", "-q", "--rebase", "origin", "main", cwd=clone)
        else:
            stats.errors += 1
        await asyncio.to_thread(subprocess.run, ["rm", "-rf", str(clone)])


async def ws_client(
    session: aiohttp.ClientSession, url: str, token: str, stop: asyncio.Event
) -> None:
    ws_url = url.replace("http://", "ws://") + f"/ws?token={token}"
    while not stop.is_set():
        try:
            async with session.ws_connect(ws_url, heartbeat=20) as ws:
                # Reconnect now and then, as browsers do when tabs come and go.
                deadline = time.monotonic() + random.uniform(30, 120)
                while not stop.is_set() and time.monotonic() < deadline:
                    try:
                        await asyncio.wait_for(ws.receive(), 1)
                    except TimeoutError:
                        pass
        except aiohttp.ClientError:
            await asyncio.sleep(1)


def sample(server: harness.Server) -> dict:
    pid = server.pid
    wal = server.data_dir / "hubsvc.db-wal"
    return {
        "rss": harness.rss_kib(pid) / 1024,
        "fds": len(os.listdir(f"/proc/{pid}/fd")),
        "wal": (wal.stat().st_size if wal.exists() else 0) / 1e6,
    }


def row(minute: str, s: dict, stats: Stats | None) -> str:
    if stats is None or not stats.latencies:
        lat = f"{'-':>8} {'-':>8} {0:>8} {0:>6} {0:>6} {0:>6}"
    else:
        ms = sorted(x * 1000 for x in stats.latencies)
        p99 = ms[min(len(ms) - 1, int(len(ms) * 0.99))]
        lat = (
            f"{statistics.median(ms):8.1f} {p99:8.1f} {len(ms):>8} {stats.errors:>6} "
            f"{stats.clones:>6} {stats.pushes:>6}"
        )
    return f"{minute:>6} {s['rss']:8.1f} {s['fds']:>5} {s['wal']:8.2f} {lat}"


async def main(args: argparse.Namespace) -> int:
    env = {"HUBSVC_TRACEMALLOC": str(args.tracemalloc)} if args.tracemalloc else {}
    server = harness.Server(
        {
            "websocket": {"max_per_ip": args.ws + 10},
            "server": {"git_processes_per_client": 64, "git_processes": 64},
        },
        env=env,
    ).start()
    try:
        users = []
        for n in range(args.users):
            name = f"soak{n}"
            token = harness.sign_up(server.url, name, PASSWORD)
            harness.expect(
                *harness.request_json(
                    server.url + "/api/repositories",
                    "POST",
                    {"name": "proj", "autoInit": True},
                    harness.bearer(token),
                ),
                201,
            )
            harness.expect(
                *harness.request_json(
                    server.url + f"/api/repositories/{name}/proj/issues",
                    "POST",
                    {"title": "one"},
                    harness.bearer(token),
                ),
                201,
            )
            users.append({"name": name, "token": token})
        stats, stop = Stats(), asyncio.Event()
        connector = aiohttp.TCPConnector(limit=0)
        print(
            f"# soak: {args.minutes} min, {args.api} API workers, {args.git} git workers, "
            f"{args.ws} WebSocket clients; then {args.idle_minutes} min idle"
        )
        print(
            f"{'min':>6} {'RSS MiB':>8} {'fds':>5} {'WAL MB':>8} {'p50 ms':>8} {'p99 ms':>8} "
            f"{'requests':>8} {'errors':>6} {'clones':>6} {'pushes':>6}"
        )
        print(row("start", sample(server), None), flush=True)
        totals = {"requests": 0, "clones": 0, "pushes": 0, "errors": 0}
        with tempfile.TemporaryDirectory(prefix="soak-git-") as work:
            async with aiohttp.ClientSession(connector=connector) as session:
                tasks = [
                    asyncio.create_task(api_worker(session, server.url, users, stats, stop))
                    for _ in range(args.api)
                ]
                tasks += [
                    asyncio.create_task(git_worker(n, server.url, users, Path(work), stats, stop))
                    for n in range(args.git)
                ]
                tasks += [
                    asyncio.create_task(
                        ws_client(session, server.url, users[n % len(users)]["token"], stop)
                    )
                    for n in range(args.ws)
                ]
                for minute in range(1, args.minutes + 1):
                    await asyncio.sleep(60)
                    print(row(str(minute), sample(server), stats), flush=True)
                    totals["requests"] += stats.total()
                    totals["clones"] += stats.clones
                    totals["pushes"] += stats.pushes
                    totals["errors"] += stats.errors
                    stats.reset()
                stop.set()
                await asyncio.gather(*tasks, return_exceptions=True)
        for minute in range(1, args.idle_minutes + 1):
            await asyncio.sleep(60)
            print(row(f"idle{minute}", sample(server), None), flush=True)
        print(
            f"# totals: {totals['requests']} API requests, {totals['clones']} clones, "
            f"{totals['pushes']} pushes, {totals['errors']} errors"
        )
        status, body = harness.request_json(server.url + "/health")
        print(f"# /health {status}: {body}")
        if args.tracemalloc:
            lines = [line for line in server.logs(200000).splitlines() if "tracemalloc:" in line]
            starts = [i for i, line in enumerate(lines) if "traced" in line]
            print("# last tracemalloc report:")
            for line in lines[starts[-1] :] if starts else []:
                print("#", line.split("tracemalloc:", 1)[1])
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=int, default=3)
    parser.add_argument("--idle-minutes", type=int, default=1)
    parser.add_argument("--api", type=int, default=16, help="concurrent API workers")
    parser.add_argument("--git", type=int, default=2, help="concurrent clone+push workers")
    parser.add_argument("--ws", type=int, default=200, help="WebSocket clients held open")
    parser.add_argument("--users", type=int, default=10)
    parser.add_argument(
        "--tracemalloc",
        type=float,
        default=0,
        help="seconds between the server's tracemalloc reports (0: off)",
    )
    sys.exit(asyncio.run(main(parser.parse_args())))
