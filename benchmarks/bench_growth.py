"""Growth: each hot figure at 1×, 10× and 100× the data, and its ratio to the 1× figure.

    python benchmarks/bench_growth.py [--scales 1,10,100 --rounds 3 --requests 40
                                       --issues 30 --repos 10 --sockets 100,1000,10000
                                       --events 10 --socket-rounds 1 --parts data,sockets
                                       --postgres postgresql://…/postgres]

About 2 minutes for the data on SQLite, 6 more with --postgres (seeding through the
API is most of it), 3.5 for the sockets.

Data (one server per scale and engine, all started first, then timed in the same
rounds, the order of the scales rotating every round): at scale k the owner `grow`
has one public repository `grow/tracker` with `--issues` × k issues (titles and bodies
from bench_issues.TextGen, so the search word `error` is in about a third of them),
and the user `many` owns `--repos` × k repositories. Everything is seeded through the
API (aiohttp, 8 requests in flight; a repository is one POST and a `git init`), then
the server is left to go quiet (harness.wait_quiet) before timing. Per figure and
round: `--requests` sequential requests on one kept-alive connection after 10 to warm
up (harness.latency); printed, the median of the rounds' medians in ms, and the
server's CPU per request in µs (utime + stime over every round's requests ÷ their
count: a clock tick is 10 ms, so one round's would be too coarse):

    issues, first page      GET …/issues?limit=30&since=<t>   (t differs per request)
    issues, last page       GET …/issues?limit=30&offset=<n−30>&since=<t>
    issues, 304             GET …/issues?limit=30 with If-None-Match: <its ETag>
    issue search            GET /api/search?q=error&type=issues&limit=<l>&offset=<o>
                            (ranks every hit, then pages)
    repository list         GET /api/users/many/repositories?limit=30 (first page)
    repository              GET /api/repositories/many/r0000<i % 10>
    users/me                GET /api/users/me as `many`

The store keeps an issue page and a repository by name in memory for up to 2 s
(cached_until_write), and a search until the next write, so a URL asked again is not
the query. The issue pages and the search ask a URL not asked before in the run
(`since` is a moment before every issue, so the page holds the same rows; the search
varies limit and offset): the cost of a cache miss. The repository list's query is not kept, so its URL repeats. The repository
cycles over ten names (the 1× user has ten), users/me and the 304 are as clients send
them: mostly the cache, alike at every scale.

Sockets (SQLite, one process, bench_ws_cluster.run_once): `--sockets` subscribed
WebSocket clients held by this process; `--events` issue POSTs, each timed from the
commit to the last socket's receipt; the server's CPU per event. The client side is
one Python loop, so at 10,000 sockets the receipt time is partly this process reading
10,000 frames. Sizes above what RLIMIT_NOFILE allows are skipped, and said so.

Printed per row: the figure at each scale, then the ratio of each to the 1× figure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import resource
import shlex
import sys
import time
import urllib.request
from collections.abc import Iterator
from types import SimpleNamespace
from urllib.parse import quote

import harness
from bench_issues import TextGen, run_jobs
from bench_ws_cluster import run_once as fanout_run

OWNER = "grow"
MANY = "many"
QUERY = "error"
SINCE = "2000-01-01T00:00:{:02d}.{:06d}Z"  # before every issue: the page is unchanged
CONCURRENCY = 8


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scales", default="1,10,100", help="multipliers of the 1× data")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=40, help="timed requests per figure")
    parser.add_argument("--issues", type=int, default=30, help="issues in the repository at 1×")
    parser.add_argument("--repos", type=int, default=10, help="repositories of the user at 1×")
    parser.add_argument("--sockets", default="100,1000,10000", help="socket counts")
    parser.add_argument("--events", type=int, default=10, help="issue POSTs per socket run")
    parser.add_argument("--socket-rounds", type=int, default=1)
    parser.add_argument("--postgres", metavar="URL", help="also on PostgreSQL (a server URL)")
    parser.add_argument("--parts", default="data,sockets", help="data, sockets or both")
    parser.add_argument("--seed", type=int, default=34)
    return parser.parse_args(argv)


# --- seeding -------------------------------------------------------------------------


def seed(server: harness.Server, issues: int, repos: int, seed: int) -> dict:
    """The owner, its repository and issues; `many` and its repositories; the facts."""
    url = server.url
    started = time.perf_counter()
    owner = harness.sign_up(url, OWNER)
    many = harness.sign_up(url, MANY)
    harness.expect(
        *harness.request_json(
            url + "/api/repositories", "POST", {"name": "tracker"}, harness.bearer(owner)
        ),
        201,
    )
    text = TextGen(seed)
    base = f"{url}/api/repositories/{OWNER}/tracker/issues"
    jobs = [
        ("POST", base, {"title": text.title(), "body": text.body()}, owner) for _ in range(issues)
    ]
    jobs += [
        (
            "POST",
            url + "/api/repositories",
            {"name": f"r{n:05d}", "description": text.title()},
            many,
        )
        for n in range(repos)
    ]
    busy = [0]
    asyncio.run(run_jobs(jobs, CONCURRENCY, busy))
    seconds = time.perf_counter() - started
    quiet = harness.wait_quiet(server.pid)
    return {"owner": owner, "many": many, "seconds": seconds, "quiet": quiet, "busy": busy[0]}


# --- timing --------------------------------------------------------------------------


def since(i: int) -> str:
    """The i-th distinct `since` value, URL-quoted: a different cache key, the same page."""
    return quote(SINCE.format(i // 1_000_000 % 60, i % 1_000_000))


def targets(url: str, facts: dict, issues: int, n: int, rounds: int) -> dict[str, tuple]:
    """Figure name → (URLs, headers, expected statuses); a list of URLs holds every
    round's, warm-up and timed, none asked twice."""
    base = f"{url}/api/repositories/{OWNER}/tracker/issues?limit=30"
    last = max(0, issues - 30)
    me = harness.bearer(facts["many"])
    with urllib.request.urlopen(base, timeout=30) as resp:
        etag = resp.headers["ETag"]
    if not etag:
        raise RuntimeError(f"{base} answered without an ETag")
    count = (n + 10) * rounds  # latency()'s warm-up is 10 requests
    return {
        "issues, first page": ([f"{base}&since={since(i)}" for i in range(count)], {}, (200,)),
        "issues, last page": (
            [f"{base}&offset={last}&since={since(i)}" for i in range(count)],
            {},
            (200,),
        ),
        "issues, 304": (base, {"If-None-Match": etag}, (304,)),
        "issue search": (
            [
                # The search cache has no time limit: each (limit, offset) once in the run.
                f"{url}/api/search?q={QUERY}&type=issues&limit={1 + i % 50}&offset={i // 50}"
                for i in range(count)
            ],
            {},
            (200,),
        ),
        "repository list": (
            f"{url}/api/users/{MANY}/repositories?limit=30",  # not cached in the store
            me,
            (200,),
        ),
        "repository": (
            # The same ten at every scale: the 1× user has no more, and a name asked
            # again within 2 s is the store's cache at every scale alike.
            [f"{url}/api/repositories/{MANY}/r{i % 10:05d}" for i in range(count)],
            me,
            (200,),
        ),
        "users/me": (f"{url}/api/users/me", me, (200,)),
    }


def time_figure(pid: int, urls, headers, statuses, n: int) -> tuple[float, float]:
    """(median ms, server CPU seconds) of n sequential requests (after 10 to warm up)."""
    before = harness.cpu_seconds(pid)
    got = harness.latency(urls, n, headers, expect_status=statuses)
    return got.median_ms, harness.cpu_seconds(pid) - before


def print_table(title: str, labels: list[str], rows: dict[str, list[str | None]], ratios) -> None:
    """One row per figure: the value at each scale, then each ÷ the first."""
    width = max(len(name) for name in rows) + 2
    head = "".join(f"{label:>12}" for label in labels)
    ratio_head = "".join(f"{'÷' + labels[0]:>8}" for _ in labels[1:])
    print(f"\n## {title}")
    print(f"{'':{width}}{head}{ratio_head}")
    for name, cells in rows.items():
        line = f"{name:{width}}" + "".join(f"{c or '-':>12}" for c in cells)
        line += "".join(f"{r:>8}" for r in ratios[name])
        print(line, flush=True)


def ratio_cells(values: list[float | None]) -> list[str]:
    first = values[0]
    return [f"{v / first:.2f}" if (v is not None and first) else "-" for v in values[1:]]


def run_data(args: argparse.Namespace, engine: str, database_url: str | None) -> None:
    """Seed a server per scale on one engine, time every figure in rotating rounds."""
    scales = [int(s) for s in args.scales.split(",")]
    with contextlib.ExitStack() as stack:
        servers = []
        for k in scales:
            url = None
            if database_url:
                url = stack.enter_context(harness.postgres_database(database_url))
            settings = {"database": {"url": url}} if url else {}
            server = stack.enter_context(harness.Server(settings, name=f"growth-{k}x"))
            issues, repos = args.issues * k, args.repos * k
            facts = seed(server, issues, repos, args.seed)
            print(
                f"# {engine} {k}×: {issues} issues, {repos} repositories seeded in "
                f"{facts['seconds']:.0f} s through the API ({facts['busy']} answers 503"
                f" tried again), quiet after {facts['quiet']:.0f} s",
                flush=True,
            )
            figures = targets(server.url, facts, issues, args.requests, args.rounds)
            servers.append((k, server, figures))
        ms: dict[str, dict[int, list[float]]] = {}
        cpu: dict[str, dict[int, float]] = {}  # summed over the rounds: a tick is 10 ms
        for round_no in range(args.rounds):
            turn = round_no % len(servers)
            for k, server, figures in servers[turn:] + servers[:turn]:
                for name, (urls, headers, statuses) in figures.items():
                    if isinstance(urls, list):  # this round's share
                        share = len(urls) // args.rounds
                        urls = urls[round_no * share : (round_no + 1) * share]
                    median_ms, used = time_figure(
                        server.pid, urls, headers, statuses, args.requests
                    )
                    ms.setdefault(name, {}).setdefault(k, []).append(median_ms)
                    per = cpu.setdefault(name, {})
                    per[k] = per.get(k, 0.0) + used
            print(
                f"#   {engine} round {round_no + 1} done, load {os.getloadavg()[0]:.1f}", flush=True
            )
    labels = [f"{k}×" for k in scales]
    asked = args.rounds * (args.requests + 10)
    tables = (
        ("latency, median of the rounds' medians, ms", ms, lambda v: harness.median(v), 2),
        (
            f"server CPU per request over all {asked} requests, µs",
            cpu,
            lambda v: v / asked * 1e6,
            0,
        ),
    )
    for title, table, figure, digits in tables:
        rows, ratios = {}, {}
        for name, by_scale in table.items():
            values = [figure(by_scale[k]) for k in scales]
            rows[name] = [f"{v:.{digits}f}" for v in values]
            ratios[name] = ratio_cells(values)
        scope = f"1× = {args.issues} issues, {args.repos} repositories"
        print_table(f"{engine}: {title} ({scope})", labels, rows, ratios)


# --- sockets -------------------------------------------------------------------------


def nofile_allows(sockets: int) -> bool:
    """Raise the soft RLIMIT_NOFILE as far as the hard one; whether it fits `sockets`."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, 2 * sockets + 500))
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return sockets + 500 <= want  # the clients' side; each server inherits the same


def run_sockets(args: argparse.Namespace) -> None:
    """Issue POST → last socket's receipt, and server CPU per event, per socket count."""
    sizes = [int(s) for s in args.sockets.split(",") if s]
    last: dict[int, list[float]] = {}
    per_event: dict[int, list[float]] = {}
    for round_no in range(args.socket_rounds):
        for size in sizes if round_no % 2 == 0 else sizes[::-1]:
            if not nofile_allows(size):
                print(
                    f"# {size} sockets skipped: RLIMIT_NOFILE {resource.getrlimit(resource.RLIMIT_NOFILE)}"
                )
                continue
            options = SimpleNamespace(clients=size, events=args.events, gap=0.05, redis="")
            started = time.perf_counter()
            result = asyncio.run(fanout_run(options, 1))
            last.setdefault(size, []).append(harness.median(result["all"]) * 1000)
            per_event.setdefault(size, []).append(result["cpu_ms"])
            print(
                f"#   {size} sockets: last receipt median {last[size][-1]:.1f} ms, "
                f"CPU/event {result['cpu_ms']:.1f} ms ({time.perf_counter() - started:.0f} s)",
                flush=True,
            )
    sizes = [s for s in sizes if s in last]
    if not sizes:
        return
    labels = [f"{s:,}" for s in sizes]
    rows, ratios = {}, {}
    for name, table in (("POST → last receipt, ms", last), ("server CPU per event, ms", per_event)):
        values = [harness.median(table[s]) for s in sizes]
        rows[name] = [f"{v:.1f}" for v in values]
        ratios[name] = ratio_cells(values)
    print_table("sqlite: WebSocket sockets (one process)", labels, rows, ratios)


@contextlib.contextmanager
def timed(label: str) -> Iterator[None]:
    started = time.perf_counter()
    yield
    print(f"# {label}: {time.perf_counter() - started:.0f} s", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(f"# command: {shlex.join([sys.executable, *sys.argv])}", flush=True)
    print(f"# {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f} at the start", flush=True)
    if "data" in args.parts:
        with timed("sqlite data"):
            run_data(args, "sqlite", None)
    if "data" in args.parts and args.postgres:
        with timed("postgresql data"):
            run_data(args, "postgresql", args.postgres)
    if "sockets" in args.parts and args.sockets:
        with timed("sockets"):
            run_sockets(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
