"""Two processes against one: requests per second of repository info, same data, same run.

    python benchmarks/bench_processes.py [--seconds 5 --rounds 3 --connections 32]
                                         [--redis redis://127.0.0.1:6379/0]

Starts two hubsvc processes on ONE data folder (one SQLite file) sharing a Redis
(`[redis] url`, a prefix of their own), signs up a user and creates a public repository,
then, in interleaved rounds, loads `GET /api/repositories/bench/proj` with wrk:

- one process: one wrk with `--connections` against process A (B idles);
- two processes: two wrk at once, half the connections each, one per process; their
  requests per second summed.

It prints both medians and two ÷ one. Needs wrk and a Redis server.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
import tempfile
import threading
import uuid
from pathlib import Path

import harness


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    harness.require_wrk()
    print(f"# command: {shlex.join([sys.executable, *sys.argv])}", flush=True)
    print(f"# {os.cpu_count()} CPUs; both servers and wrk share them", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-processes-") as tmp:
        data = Path(tmp) / "data"
        config = Path(tmp) / "config.toml"
        config.write_text(
            "[rate_limit]\nenabled = false\n[security]\nbcrypt_rounds = 4\n"
            f'[redis]\nurl = "{args.redis}"\nprefix = "bench-{uuid.uuid4().hex[:8]}"\n'
        )
        command = [sys.executable, str(harness.ROOT / "run.py"), "--config", str(config)]
        command += ["--data-dir", str(data)]
        with harness.Server(command=command, name="a") as a:
            token = harness.sign_up(a.url, "bench")
            harness.expect(
                *harness.request_json(
                    a.url + "/api/repositories", "POST", {"name": "proj"}, harness.bearer(token)
                ),
                201,
            )
            with harness.Server(command=command, name="b") as b:
                path = "/api/repositories/bench/proj"
                one: list[float] = []
                two: list[float] = []
                for round_no in range(args.rounds):
                    order = ["one", "two"] if round_no % 2 == 0 else ["two", "one"]
                    for kind in order:
                        if kind == "one":
                            got = harness.wrk(a.url + path, args.seconds, args.connections)
                            one.append(got.rps)
                            print(f"#   round {round_no + 1} one: {got.rps:,.0f} req/s", flush=True)
                        else:
                            results: list[float] = []

                            def load(url: str, into: list[float] = results) -> None:
                                got = harness.wrk(url + path, args.seconds, args.connections // 2)
                                into.append(got.rps)

                            threads = [threading.Thread(target=load, args=(s.url,)) for s in (a, b)]
                            for thread in threads:
                                thread.start()
                            for thread in threads:
                                thread.join()
                            two.append(sum(results))
                            print(
                                f"#   round {round_no + 1} two: {sum(results):,.0f} req/s"
                                f" ({' + '.join(f'{r:,.0f}' for r in results)})",
                                flush=True,
                            )
    print()
    base = statistics.median(one)
    harness.report("one process, GET repository", base, "req/s", digits=0, note="the denominator")
    harness.report(
        "two processes, GET repository",
        statistics.median(two),
        "req/s",
        base,
        "one process",
        digits=0,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
