"""Foundation benchmark: throughput of `GET /api/users/me`, `GET /api/repositories/:owner/:name`
and `GET /health` against a hello-world aiohttp route, and the server's idle memory.

    python benchmarks/bench_foundation.py [--seconds 5 --rounds 3 --connections 32
                                           --threads 1 --pin --loop asyncio]

Starts hubsvc (`run.py`, rate limit off, bcrypt cost 4, access log on) and two
baselines (`benchmarks/hello.py` without any access log, the bare one the targets
are measured against, and with hubsvc's access log, shown beside it) as processes,
signs up one user and creates one repository,
reads hubsvc's idle RSS, then loads each route with wrk in interleaved rounds so the
shared machine's noise hits all of them alike, and prints the medians:

    bare GET /hello (no access log): ... req/s
    hello GET /hello (access log): ... req/s (ratio X vs bare)
    hubsvc GET /api/users/me (bearer): ... req/s (ratio X vs bare; target ≥ 0.4: met)
    hubsvc GET /api/repositories/:owner/:name (bearer): ... (ratio X vs bare; target ≥ 0.3)
    hubsvc GET /health: ... req/s (ratio X vs bare; target ≥ 0.5)
    hubsvc idle RSS: ... MiB

Exit code 0 when every target is met, 1 when one is not, 2 when wrk is missing.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time

import harness

# req/s ÷ the bare hello-world's req/s (no access log), as issue 14 measures them.
ME_TARGET = 0.4
REPO_TARGET = 0.3
HEALTH_TARGET = 0.5


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5, help="length of one wrk run (5)")
    parser.add_argument("--rounds", type=int, default=3, help="runs per route; medians quoted (3)")
    parser.add_argument("--connections", type=int, default=32, help="wrk -c (32)")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="wrk -t (1: on 2 cores more wrk threads starve the server)",
    )
    parser.add_argument("--warmup", type=float, default=1, help="unmeasured wrk run first (1 s)")
    parser.add_argument(
        "--loop",
        choices=("auto", "asyncio", "uvloop"),
        default="auto",
        help="event loop of every server ([server] event_loop; auto: uvloop where installed)",
    )
    parser.add_argument(
        "--pin", action="store_true", help="taskset the servers to CPU 0 and wrk to CPU 1"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        harness.require_wrk()
    except harness.ToolMissing as exc:
        print(f"bench_foundation: {exc}", file=sys.stderr)
        return 2
    server_cpus = wrk_cpus = None
    if args.pin:
        if (os.cpu_count() or 1) < 2:
            print("bench_foundation: --pin needs 2 CPUs", file=sys.stderr)
            return 2
        server_cpus, wrk_cpus = "0", "1"

    with (
        harness.Server.hello(cpus=server_cpus, access_log="off", loop=args.loop) as bare,
        harness.Server.hello(cpus=server_cpus, loop=args.loop) as hello,
        harness.Server({"server": {"event_loop": args.loop}}, cpus=server_cpus) as hub,
    ):
        token = harness.sign_up(hub.url, "bench")
        auth = harness.bearer(token)
        me = harness.expect(*harness.request_json(hub.url + "/api/users/me", headers=auth), 200)
        assert me["user"]["username"] == "bench", me
        harness.expect(
            *harness.request_json(
                hub.url + "/api/repositories",
                "POST",
                {"name": "tool", "description": "a tool"},
                headers=auth,
            ),
            201,
        )
        time.sleep(0.5)  # let start-up garbage settle before reading the idle figure
        idle_kib = harness.rss_kib(hub.pid)
        hello_idle_kib = harness.rss_kib(hello.pid)

        pids = [bare.pid, hello.pid, hub.pid, hub.pid, hub.pid]
        targets = {
            "bare GET /hello (no access log)": (bare.url + "/hello", None),
            "hello GET /hello (access log)": (hello.url + "/hello", None),
            "hubsvc GET /api/users/me (bearer)": (hub.url + "/api/users/me", auth),
            "hubsvc GET /api/repositories/:owner/:name (bearer)": (
                hub.url + "/api/repositories/bench/tool",
                auth,
            ),
            "hubsvc GET /health": (hub.url + "/health", None),
        }
        names = list(targets)
        example = harness.wrk_command(
            targets[names[2]][0],
            args.seconds,
            args.connections,
            args.threads,
            {"Authorization": "Bearer <token>"},
            wrk_cpus,
        )
        print(
            f"# {os.cpu_count()} CPUs; servers pinned to {server_cpus or 'any'}, wrk to "
            f"{wrk_cpus or 'any'}; event loop {args.loop}; {args.rounds} rounds × {args.seconds:g} s per route, "
            f"interleaved; medians quoted",
            flush=True,
        )
        print(f"# load: {shlex.join(example)}", flush=True)

        if args.warmup > 0:
            for url, headers in targets.values():
                harness.wrk(
                    url, args.warmup, args.connections, args.threads, headers, cpus=wrk_cpus
                )

        rps: dict[str, list[float]] = {name: [] for name in names}
        p50: dict[str, list[float]] = {name: [] for name in names}
        p99: dict[str, list[float]] = {name: [] for name in names}
        # The server's CPU per request: steadier than req/s when other jobs share the cores.
        cpu_us: dict[str, list[float]] = {name: [] for name in names}
        pid_of = dict(zip(names, pids, strict=True))
        with harness.PeakRss(hub.pid) as peak:
            for round_no in range(args.rounds):
                # Rotate the order so no route always runs first (or last) in a round.
                order = names[round_no % len(names) :] + names[: round_no % len(names)]
                for name in order:
                    url, headers = targets[name]
                    cpu_before = harness.cpu_seconds(pid_of[name])
                    result = harness.wrk(
                        url, args.seconds, args.connections, args.threads, headers, cpus=wrk_cpus
                    )
                    cpu_used = harness.cpu_seconds(pid_of[name]) - cpu_before
                    cpu_us[name].append(cpu_used / max(result.rps * args.seconds, 1) * 1e6)
                    rps[name].append(result.rps)
                    p50[name].append(result.p50_ms)
                    p99[name].append(result.p99_ms)
                    print(
                        f"#   round {round_no + 1} {name}: {result.rps:,.0f} req/s, "
                        f"p50 {result.p50_ms:.2f} ms, p99 {result.p99_ms:.2f} ms, "
                        f"server CPU {cpu_us[name][-1]:.0f} µs/request",
                        flush=True,
                    )

    base = harness.median(rps[names[0]])
    print()
    harness.report(
        names[0],
        base,
        "req/s",
        digits=0,
        note=f"rounds {harness.spread(rps[names[0]])}, p50 {harness.median(p50[names[0]]):.2f} ms",
    )
    harness.report(
        names[1],
        harness.median(rps[names[1]]),
        "req/s",
        base,
        "bare",
        digits=0,
        note=f"rounds {harness.spread(rps[names[1]])}",
    )
    met = True
    for name, target in zip(names[2:], (ME_TARGET, REPO_TARGET, HEALTH_TARGET)):
        value = harness.median(rps[name])
        met = met and value / base >= target
        harness.report(
            name,
            value,
            "req/s",
            base,
            "bare",
            target=target,
            digits=0,
            note=f"rounds {harness.spread(rps[name])}, "
            f"p50 {harness.median(p50[name]):.2f} ms, "
            f"p99 {harness.median(p99[name]):.2f} ms",
        )
    bare_cpu = harness.median(cpu_us[names[0]])
    for name in names[1:]:
        # bare's CPU per request ÷ this one's: the req/s ratio a server bound by its core gets.
        harness.report(
            f"{name} server CPU per request",
            harness.median(cpu_us[name]),
            "µs",
            bare_cpu,
            "bare",
            higher_is_better=False,
            digits=0,
            note=f"bare {bare_cpu:.0f} µs; bare ÷ this = {bare_cpu / harness.median(cpu_us[name]):.2f}",
        )
    harness.report(
        "hubsvc idle RSS",
        harness.mib(idle_kib),
        "MiB",
        harness.mib(hello_idle_kib),
        "hello",
        note="after start and sign-up, before load",
    )
    harness.report(
        "hubsvc peak RSS under load",
        harness.mib(peak.peak_kib),
        "MiB",
        harness.mib(idle_kib),
        "idle",
    )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
