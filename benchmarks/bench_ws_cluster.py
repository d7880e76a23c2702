"""WebSocket fan-out through Redis: 1,000 clients spread over two processes, against one.

    python benchmarks/bench_ws_cluster.py [--clients 1000 --events 50 --gap 0.05
                                           --redis redis://127.0.0.1:6379/0]

Two runs, each on a fresh temporary data folder: one process alone ([redis] url empty),
then two processes over the same data folder (one SQLite file) sharing Redis (a prefix
of their own, its keys deleted after). Each run: `run.py` processes (rate limit off,
bcrypt cost 4, `[websocket] max_per_ip` = clients + 100); the owner `wsowner` and four
users signed up; `wsowner/live` created (public); `--clients` sockets opened from this
process, spread round-robin over the processes, each subscribed to `wsowner/live` with
the users' tokens (the hub reaches them through the subscription).

Events: a poster thread opens an issue on the first process with
`POST /api/repositories/wsowner/live/issues`; with two processes, half the clients hear
of it through Redis (process A publishes the event log's head, process B reads the
event from the log and fans it out). Per event:

    t0      = the poster has read the answer, less Server-Timing fanout (how long the
              write waited for the local fan-out): about when the event committed
    t_last  = the last client has read the notification (matched by its title)
    latency = t_last - t0

`--events` events one after another, `--gap` seconds after each one is complete. Printed:
p50 and p99 of the latency per run (and per process in the two-process run), and the
ratio two/one. The issue's target: p99 ≤ 150 ms with two processes.

A third run is the bare aiohttp hub of bench_ws.py (`bench_ws.py _baseline`, one process,
one `send_str` per socket), sent a copy of hubsvc's notification with `POST /publish`.
Each run's server CPU per event is the utime + stime of all its server processes over
the measured events ÷ events; issue 25 item 1's target: two processes ≤ 0.3 × bare.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import harness  # noqa: E402

FANOUT = re.compile(r"fanout;dur=([0-9.]+)")
CPU_TARGET_RATIO = 0.3
CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def start_bare(folder: Path) -> tuple[subprocess.Popen, str]:
    """bench_ws.py's bare aiohttp hub, the CPU baseline."""
    port = harness.free_port()
    log = open(folder / f"bare-{port}.log", "ab")
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "bench_ws.py"),
            "_baseline",
            "--port",
            str(port),
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(url + "/health", timeout=1):
                return proc, url
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def publish_bare(url: str, sample: str, title: str) -> float:
    """POST /publish a copy of hubsvc's notification titled `title`; when it was answered."""
    message = json.loads(sample)
    message["notification"]["id"] = uuid.uuid4().hex
    message["notification"]["data"]["issue"]["title"] = title
    host = url.removeprefix("http://")
    conn = http.client.HTTPConnection(host, timeout=30)
    conn.request("POST", "/publish", json.dumps(message), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    resp.read()
    done = time.perf_counter()
    assert resp.status == 202, resp.status
    conn.close()
    return done


def start(data: Path, settings: dict, count: int) -> list[tuple[subprocess.Popen, str]]:
    """count run.py processes over one data folder; the first alone, then the rest."""
    started = []
    for _ in range(count):
        port = harness.free_port()
        config = data.parent / f"config-{port}.toml"
        config.write_text(harness._toml(settings))
        log = open(data.parent / f"server-{port}.log", "ab")
        env = {k: v for k, v in os.environ.items() if not k.startswith("HUBSVC_")}
        proc = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "run.py"),
                "--config",
                str(config),
                "--port",
                str(port),
                "--data-dir",
                str(data),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            env={**env, "PYTHONPATH": str(ROOT)},
        )
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise RuntimeError((data.parent / f"server-{port}.log").read_text()[-3000:])
            try:
                with urllib.request.urlopen(url + "/health", timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        started.append((proc, url))
    return started


def post_issue(url: str, token: str, title: str) -> float:
    """Open an issue; the time it committed, about (see the module's docstring)."""
    host = url.removeprefix("http://")
    conn = http.client.HTTPConnection(host, timeout=30)
    body = json.dumps({"title": title})
    conn.request(
        "POST",
        "/api/repositories/wsowner/live/issues",
        body,
        {"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    resp = conn.getresponse()
    resp.read()
    done = time.perf_counter()
    assert resp.status == 201, resp.status
    waited = FANOUT.search(resp.getheader("Server-Timing") or "")
    conn.close()
    return done - (float(waited.group(1)) / 1000 if waited else 0.0)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


async def run_once(args: argparse.Namespace, processes: int, bare: str = "") -> dict:
    """One run: `processes` hubsvc processes, or the bare hub when `bare` (a sample) is set."""
    tmp = Path(tempfile.mkdtemp(prefix="bench-ws-cluster-"))
    prefix = "bench-" + uuid.uuid4().hex[:8]
    settings = {
        "rate_limit": {"enabled": False},
        "security": {"bcrypt_rounds": 4},
        "websocket": {"max_per_ip": args.clients + 100},
        "ssh": {"port": 0},  # off, so runs side by side never meet on 2222
    }
    if processes > 1:
        settings["redis"] = {"url": args.redis, "prefix": prefix}
    servers = [start_bare(tmp)] if bare else start(tmp / "data", settings, processes)
    urls = [url for _, url in servers]
    try:
        if bare:
            owner, users = "", ["-"] * 4
        else:
            owner = harness.sign_up(urls[0], "wsowner")
            users = [harness.sign_up(urls[0], f"wsuser{n}") for n in range(4)]
            harness.expect(
                *harness.request_json(
                    urls[0] + "/api/repositories", "POST", {"name": "live"}, harness.bearer(owner)
                ),
                201,
            )
        sample: list[str] = []
        arrived: dict[str, list[tuple[float, int]]] = {}
        everyone = asyncio.Event()
        sockets = []
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector) as session:

            async def client(n: int) -> None:
                where = n % processes
                ws = await session.ws_connect(
                    urls[where].replace("http", "ws") + f"/ws?token={users[n % 4]}"
                )
                sockets.append(ws)
                await ws.send_json(
                    {"type": "subscribe", "repository": {"owner": "wsowner", "name": "live"}}
                )
                async for msg in ws:
                    data = json.loads(msg.data)
                    if data["type"] == "subscribed":
                        subscribed.append(n)
                        if len(subscribed) == args.clients:
                            everyone.set()
                    elif data["type"] == "notification":
                        sample[:] = sample or [msg.data]
                        title = data["notification"]["data"]["issue"]["title"]
                        got = arrived.setdefault(title, [])
                        got.append((time.perf_counter(), where))
                        if len(got) == args.clients:
                            complete[title].set()

            subscribed: list[int] = []
            complete: dict[str, asyncio.Event] = {}
            tasks = [asyncio.create_task(client(n)) for n in range(args.clients)]
            await asyncio.wait_for(everyone.wait(), 120)
            latencies, per_process = [], [[] for _ in range(processes)]
            loop = asyncio.get_running_loop()
            cpu = 0.0
            for n in range(args.events + 3):  # the first three warm up
                if n == 3:
                    cpu = -sum(cpu_seconds(proc.pid) for proc, _ in servers)
                title = f"bench {n}"
                complete[title] = asyncio.Event()
                if bare:
                    t0 = await loop.run_in_executor(None, publish_bare, urls[0], bare, title)
                else:
                    t0 = await loop.run_in_executor(None, post_issue, urls[0], owner, title)
                await asyncio.wait_for(complete[title].wait(), 30)
                if n >= 3:
                    times = arrived[title]
                    latencies.append(max(t for t, _ in times) - t0)
                    for where in range(processes):
                        per_process[where].append(max(t for t, w in times if w == where) - t0)
                await asyncio.sleep(args.gap)
            cpu += sum(cpu_seconds(proc.pid) for proc, _ in servers)
            for ws in sockets:
                await ws.close()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return {
            "all": latencies,
            "per_process": per_process,
            "cpu_ms": cpu / args.events * 1000,
            "sample": sample[0],
        }
    finally:
        for proc, _ in servers:
            proc.terminate()
        for proc, _ in servers:
            proc.wait(20)
        if processes > 1:
            import redis

            r = redis.Redis.from_url(args.redis)
            for key in r.scan_iter(match=prefix + "*"):
                r.delete(key)
            r.close()
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--events", type=int, default=50)
    parser.add_argument("--gap", type=float, default=0.05)
    parser.add_argument(
        "--redis", default=os.environ.get("HUBSVC_TEST_REDIS_URL") or "redis://127.0.0.1:6379/0"
    )
    args = parser.parse_args(argv)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, 3 * args.clients + 200))
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    print(f"{args.clients} clients, {args.events} events, load {os.getloadavg()[0]:.2f}")
    results = {}
    for processes in (1, 2, 0):  # 0: the bare aiohttp hub, one process
        bare = results[1]["sample"] if processes == 0 else ""
        result = asyncio.run(run_once(args, processes or 1, bare))
        results[processes] = result
        ms = [v * 1000 for v in result["all"]]
        name = "bare aiohttp" if processes == 0 else f"{processes} process"
        line = (
            f"{name}{'es' if processes > 1 else ''}: last-client latency "
            f"p50 {pct(ms, 50):.1f} ms, p99 {pct(ms, 99):.1f} ms; server CPU per event "
            f"{result['cpu_ms']:.1f} ms"
        )
        if processes > 1:
            parts = [
                f"process {chr(65 + w)} p99 {pct([v * 1000 for v in vals], 99):.1f} ms"
                for w, vals in enumerate(result["per_process"])
            ]
            line += " (" + ", ".join(parts) + ")"
        print(line, flush=True)
    one, two = (pct(results[n]["all"], 99) for n in (1, 2))
    print(
        f"p99 two/one: {two / one:.2f}; target p99 ≤ 150 ms with two: "
        f"{'met' if two <= 0.150 else 'NOT met'}"
    )
    ratio = results[2]["cpu_ms"] / results[0]["cpu_ms"]
    print(
        f"server CPU per event, two processes together ÷ bare aiohttp: {ratio:.2f} (one "
        f"process: {results[1]['cpu_ms'] / results[0]['cpu_ms']:.2f}); target ≤ "
        f"{CPU_TARGET_RATIO:g}: {'met' if ratio <= CPU_TARGET_RATIO else 'NOT met'}"
    )
    return 0 if two <= 0.150 and ratio <= CPU_TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
