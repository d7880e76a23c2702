"""Two processes against one on the same machine: reads, pushes and WebSocket fan-out.

    python benchmarks/bench_processes.py [--seconds 5 --rounds 3 --connections 32
                                          --pushes 16 --push-threads 4
                                          --clients 1000 --events 20
                                          --parts reads,pushes,fanout
                                          --redis redis://127.0.0.1:6379/0]

Reads and pushes: two hubsvc processes on ONE data folder (one SQLite file) sharing a
Redis (`[redis] url`, a prefix of their own); the user `bench` signs up and creates the
public repository `proj` and `--pushes` repositories `p00`, `p01`, … Then, in
interleaved rounds (the order swapped every other round):

- reads: `GET /api/repositories/bench/proj` with wrk. One process: one wrk with
  `--connections` against process A (B idles). Two: two wrk at once, half the
  connections each, one per process; their requests per second summed.
- pushes: each of the `--pushes` local clones makes one small commit (one file of a
  few lines) and `git push`es it over smart HTTP to its own repository, `--push-threads`
  pushes in flight. One process: every push to A. Two: the repositories alternate
  between A and B. Pushes per second = pushes ÷ wall time of the batch (each push's
  answer; the upkeep after it, events and hooks, is not waited for).

Fan-out (bench_ws_cluster.run_once, fresh servers each run): `--clients` subscribed
sockets held by one process, against the same sockets spread over two processes
sharing Redis; `--events` issue POSTs to the first; per event the time from the commit
to the last socket's receipt, and the servers' CPU (all processes summed) per event.

It prints the medians and two ÷ one. Needs wrk, git and a Redis server.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shlex
import statistics
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import quote

import harness
from bench_git import client_env, run
from bench_ws_cluster import run_once as fanout_run

PASSWORD = "bench-password-1"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--pushes", type=int, default=16, help="pushes per batch (repositories)")
    parser.add_argument("--push-threads", type=int, default=4, help="pushes in flight")
    parser.add_argument("--clients", type=int, default=1000, help="sockets in the fan-out")
    parser.add_argument("--events", type=int, default=20, help="issue POSTs per fan-out run")
    parser.add_argument("--parts", default="reads,pushes,fanout")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    return parser.parse_args(argv)


def reads_two(servers: list[harness.Server], path: str, connections: int, seconds: float):
    """Two wrk at once, one per process; their req/s."""
    results: list[float] = []

    def load(url: str) -> None:
        results.append(harness.wrk(url + path, seconds, connections // 2).rps)

    threads = [threading.Thread(target=load, args=(s.url,)) for s in servers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


class Pushers:
    """One local clone per repository; push_all() commits once in each and pushes them."""

    def __init__(self, folder: Path, count: int) -> None:
        self.env = client_env(folder)
        self.clones = []
        for n in range(count):
            clone = folder / f"p{n:02d}"
            run(["git", "init", "-q", "-b", "main", str(clone)], self.env)
            for key, value in (("user.name", "Bench"), ("user.email", "bench@example.com")):
                run(["git", "config", key, value], self.env, clone)
            self.clones.append(clone)
        self.commits = 0

    def push_all(self, urls: list[str], threads: int) -> float:
        """Pushes per second of one batch; clone i goes to urls[i % len(urls)]."""
        self.commits += 1
        for clone in self.clones:  # the commits are made before the clock starts
            (clone / "notes.txt").write_text(f"change {self.commits}\n" * 5)
            run(["git", "add", "notes.txt"], self.env, clone)
            run(["git", "commit", "-q", "-m", f"change {self.commits}"], self.env, clone)

        def push(n: int) -> None:
            base = urls[n % len(urls)].replace("http://", f"http://bench:{quote(PASSWORD)}@")
            run(
                ["git", "push", "-q", f"{base}/bench/p{n:02d}.git", "main"],
                self.env,
                self.clones[n],
            )

        started = time.perf_counter()
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(push, range(len(self.clones))))
        return len(self.clones) / (time.perf_counter() - started)


def reads_and_pushes(args: argparse.Namespace, figures: dict[str, dict[str, list[float]]]) -> None:
    """Both on two processes over one data folder; rounds interleave one and two."""
    with tempfile.TemporaryDirectory(prefix="bench-processes-") as tmp:
        data = Path(tmp) / "data"
        config = Path(tmp) / "config.toml"
        config.write_text(
            "[rate_limit]\nenabled = false\n[security]\nbcrypt_rounds = 4\n[ssh]\nport = 0\n"
            f'[redis]\nurl = "{args.redis}"\nprefix = "bench-{uuid.uuid4().hex[:8]}"\n'
        )
        command = [sys.executable, str(harness.ROOT / "run.py"), "--config", str(config)]
        command += ["--data-dir", str(data)]
        with harness.Server(command=command, name="a") as a:
            token = harness.bearer(harness.sign_up(a.url, "bench", password=PASSWORD))
            names = ["proj"] + [f"p{n:02d}" for n in range(args.pushes)]
            for name in names:
                harness.expect(
                    *harness.request_json(
                        a.url + "/api/repositories", "POST", {"name": name}, token
                    ),
                    201,
                )
            pushers = Pushers(Path(tmp), args.pushes) if "pushes" in args.parts else None
            if pushers:
                pushers.push_all([a.url], args.push_threads)  # the first push of each: a warm-up
            with harness.Server(command=command, name="b") as b:
                path = "/api/repositories/bench/proj"
                for round_no in range(args.rounds):
                    for kind in ("one", "two") if round_no % 2 == 0 else ("two", "one"):
                        servers = [a] if kind == "one" else [a, b]
                        if "reads" in args.parts:
                            if kind == "one":
                                rps = [
                                    harness.wrk(a.url + path, args.seconds, args.connections).rps
                                ]
                            else:
                                rps = reads_two(servers, path, args.connections, args.seconds)
                            figures["GET repository, req/s"].setdefault(kind, []).append(sum(rps))
                        if pushers:
                            per_s = pushers.push_all([s.url for s in servers], args.push_threads)
                            figures["pushes/s"].setdefault(kind, []).append(per_s)
                    print(
                        f"#   round {round_no + 1}: "
                        + "; ".join(
                            f"{name} one {got['one'][-1]:,.1f}, two {got['two'][-1]:,.1f}"
                            for name, got in figures.items()
                            if got
                        ),
                        flush=True,
                    )


def fanout(args: argparse.Namespace, figures: dict[str, dict[str, list[float]]]) -> None:
    """Sockets on one process, against the same sockets over two sharing Redis."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 3 * args.clients + 200)), hard))
    options = SimpleNamespace(clients=args.clients, events=args.events, gap=0.05, redis=args.redis)
    for round_no in range(max(1, args.rounds - 1)):
        for kind in ("one", "two") if round_no % 2 == 0 else ("two", "one"):
            result = asyncio.run(fanout_run(options, 1 if kind == "one" else 2))
            figures["fan-out, POST → last receipt, ms"].setdefault(kind, []).append(
                statistics.median(result["all"]) * 1000
            )
            figures["fan-out, server CPU per event, ms"].setdefault(kind, []).append(
                result["cpu_ms"]
            )
            print(
                f"#   fan-out {kind}: last receipt median "
                f"{statistics.median(result['all']) * 1000:.1f} ms, CPU/event "
                f"{result['cpu_ms']:.1f} ms",
                flush=True,
            )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    harness.require_wrk()
    print(f"# command: {shlex.join([sys.executable, *sys.argv])}", flush=True)
    print(
        f"# {os.cpu_count()} CPUs, both servers and the clients share them; "
        f"load {os.getloadavg()[0]:.1f} at the start",
        flush=True,
    )
    figures: dict[str, dict[str, list[float]]] = {
        "GET repository, req/s": {},
        "pushes/s": {},
        "fan-out, POST → last receipt, ms": {},
        "fan-out, server CPU per event, ms": {},
    }
    if "reads" in args.parts or "pushes" in args.parts:
        reads_and_pushes(args, figures)
    if "fanout" in args.parts:
        fanout(args, figures)
    print(f"\n{'':36}{'one':>10}{'two':>10}{'two÷one':>9}")
    for name, got in figures.items():
        if got:
            one, two = statistics.median(got["one"]), statistics.median(got["two"])
            print(f"{name:36}{one:10,.1f}{two:10,.1f}{two / one:9.2f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
