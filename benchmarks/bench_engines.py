"""The store's hot paths on SQLite and PostgreSQL, measured in the same run.

    python benchmarks/bench_engines.py --database postgresql://postgres@127.0.0.1/postgres
                                       [--issues 3000 --pulls 300 --requests 300 --rounds 5
                                        --concurrency 8]

Opens two stores (hubsvc.store.Store), one on a fresh SQLite file, one on a fresh
PostgreSQL database made on that server (dropped at the end). SQLite is seeded through
the store's own write methods, `--concurrency` writes in flight: accounts, one
repository, `--issues` issues (labels, assignees, reactions on a third) and `--pulls`
pull requests (review requests on half), prose from bench_issues.TextGen. PostgreSQL
gets the same rows copied from that file (`hubsvc copy-database`'s copy_rows: COPY,
seconds for 10,000 issues, where its serializable creates took 616 s);
`--seed-through-store` seeds it through the store as well (and times that).

Then, in `--rounds` interleaved rounds (the engines alternate which goes first), it
times `--requests` sequential calls per path, each past every cache:

- the issue and pull request list pages (IssueStore.page, 30 rows, a random offset);
- issue, pull request and user search (SearchStore, its cache emptied first);
- one issue by number (IssueStore.get);
- a write: an issue's title changed (IssueStore.update, with its events);

Both databases are analyzed after the seeding (`--no-analyze`: not), as a running
server's are: PostgreSQL's autovacuum within about a minute, SQLite's PRAGMA optimize.

It prints, for each path, the SQLite median, the PostgreSQL median and their ratio,
and the seeding time of each. No HTTP: the request path above the store is the same
on both engines (bench_issues.py measures it whole).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for hubsvc

import harness
from bench_issues import LABELS, TextGen

from hubsvc.errors import DatabaseBusy
from hubsvc.store import Store
from hubsvc.store.engines.copy import copy_rows
from hubsvc.store.engines.postgres import apply_migrations, connect
from hubsvc.store.engines.sqlite import open_file

Path_ = Callable[[Store, random.Random], Awaitable[object]]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", required=True, help="postgresql:// URL of a server")
    parser.add_argument("--issues", type=int, default=3000)
    parser.add_argument("--pulls", type=int, default=300)
    parser.add_argument("--requests", type=int, default=300, help="per path, over all rounds")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=8, help="writes in flight (seeding)")
    parser.add_argument("--query", default="error")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--seed-through-store",
        action="store_true",
        help="seed PostgreSQL through the store's writes too, not by copying SQLite's rows",
    )
    parser.add_argument(
        "--no-analyze",
        dest="analyze",
        action="store_false",
        help="read PostgreSQL's fresh tables without the planner's statistics",
    )
    return parser.parse_args(argv)


busy = [0]  # writes answered "database busy" and tried again
BUSY_RETRIES = 10


async def in_flight(jobs: list[Callable[[], Awaitable[object]]], concurrency: int) -> None:
    left = iter(jobs)

    async def worker() -> None:
        for job in left:
            for attempt in range(BUSY_RETRIES):  # as a client told 503 busy would
                try:
                    await job()
                    break
                except DatabaseBusy:
                    busy[0] += 1
                    await asyncio.sleep(0.05 * (attempt + 1))
            else:
                await job()

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def seed(store: Store, args: argparse.Namespace) -> dict[str, float]:
    """The same accounts, repository, issues and pull requests on either engine."""
    rng, text = random.Random(args.seed), TextGen(args.seed)
    times: dict[str, float] = {}
    start = time.perf_counter()
    users = []
    for i in range(9):
        users.append(
            await store.users.create(
                username=f"dev{i}", email=f"dev{i}@example.com", name=f"Dev {i}", password_hash="x"
            )
        )
    owner = users[0]
    repo = await store.repos.create(
        owner_id=owner["id"],
        name="tracker",
        description="",
        visibility="public",
        default_branch="main",
    )
    times["accounts and repository"] = time.perf_counter() - start

    made: list[dict] = []

    def create(pull: int | None) -> Callable[[], Awaitable[object]]:
        title, body = text.title(), text.body()
        labels = rng.sample(LABELS, rng.randint(0, 3))
        assignees = [u["id"] for u in rng.sample(users[1:], rng.choice([0, 0, 1, 2]))]
        author = rng.choice(users)["id"]
        spec = None
        if pull is not None:
            spec = {"head_repo_id": repo["id"], "head": f"topic-{pull}", "base": "main"}

        async def job() -> None:
            made.append(
                await store.issues.create(
                    repo_id=repo["id"],
                    author_id=author,
                    title=title,
                    body=body,
                    labels=labels,
                    assignee_ids=assignees,
                    pull=spec,
                )
            )

        return job

    jobs = [create(None) for _ in range(args.issues)] + [create(i) for i in range(args.pulls)]
    rng.shuffle(jobs)
    start = time.perf_counter()
    await in_flight(jobs, args.concurrency)
    times["issues and pull requests created"] = time.perf_counter() - start
    made.sort(key=lambda m: m["number"])  # the same extras on both engines

    extra: list[Callable[[], Awaitable[object]]] = []
    for issue in made:
        if rng.random() < 0.33:
            who, kind = rng.choice(users)["id"], rng.choice(["+1", "heart", "eyes"])
            extra.append(lambda i=issue["id"], w=who, k=kind: store.reactions.add(i, 0, w, k))
        if issue["is_pull"] and rng.random() < 0.5:
            who = rng.choice(users[1:])["id"]
            extra.append(
                lambda i=issue["id"], w=who: store.reviews.request(i, [w], [], owner["id"])
            )
    start = time.perf_counter()
    await in_flight(extra, args.concurrency)
    times["reactions and review requests"] = time.perf_counter() - start
    store._bench = {"repo": repo["id"], "numbers": [m["number"] for m in made], "ids": made}  # type: ignore[attr-defined]
    return times


def paths(args: argparse.Namespace) -> dict[str, Path_]:
    def page(is_pull: bool, total: int) -> Path_:
        async def run(store: Store, rng: random.Random) -> object:
            offset = rng.randrange(0, max(1, total - 30))
            repo = store._bench["repo"]  # type: ignore[attr-defined]
            return await store.issues.page(repo, is_pull, "all", 30, offset)

        return run

    def search(kind: str) -> Path_:
        async def run(store: Store, rng: random.Random) -> object:
            store.search._cache.clear()
            if kind == "users":
                return await store.search.users("dev", 20, 0)
            return await store.search.issues(args.query, 0, kind == "pulls", 20, 0)

        return run

    async def get(store: Store, rng: random.Random) -> object:
        number = rng.choice(store._bench["numbers"])  # type: ignore[attr-defined]
        repo = store._bench["repo"]  # type: ignore[attr-defined]
        return await store.issues.get(repo, number, False) or await store.issues.get(
            repo, number, True
        )

    async def update(store: Store, rng: random.Random) -> object:
        issue = rng.choice(store._bench["ids"])  # type: ignore[attr-defined]
        return await store.issues.update(issue["id"], {"title": f"renamed {rng.random()}"})

    return {
        "issue list page (30, random offset)": page(False, args.issues),
        "pull request list page (30, random offset)": page(True, args.pulls),
        f"issue search '{args.query}' (uncached)": search("issues"),
        f"pull request search '{args.query}' (uncached)": search("pulls"),
        "user search 'dev' (uncached)": search("users"),
        "one issue by number": get,
        "a write: an issue's title": update,
    }


async def run(args: argparse.Namespace, url: str) -> int:
    with tempfile.TemporaryDirectory(prefix="bench-engines-") as tmp:
        stores = {
            "sqlite": Store(Path(tmp) / "hubsvc.db"),
            "postgresql": Store(Path(tmp) / "unused.db", url=url),
        }
        try:
            return await measure(args, stores)
        finally:
            for store in stores.values():
                await store.close()


async def measure(args: argparse.Namespace, stores: dict[str, Store]) -> int:
    seeding: dict[str, dict[str, float]] = {}
    for engine, store in stores.items():
        if engine == "postgresql" and not args.seed_through_store:
            seeding[engine] = copied(stores["sqlite"], store)
            await store.open()
            store._bench = stores["sqlite"]._bench  # type: ignore[attr-defined]
        else:
            await store.open()
            busy[0] = 0
            seeding[engine] = await seed(store, args)
        for name, seconds in seeding[engine].items():
            print(f"# {engine} seeding: {name}: {seconds:.2f} s", flush=True)
        print(f"# {engine} seeding: {busy[0]} writes busy and tried again", flush=True)
        if args.analyze:
            # The statistics a running server has: PostgreSQL's autovacuum analyzes within
            # a minute or so of the seeding (50 rows + 10% of a table changed), SQLite's
            # PRAGMA optimize at upkeep and at close. Done here, so no round of reads runs
            # before it and some after.
            # VACUUM too: autovacuum's insert threshold (1,000 rows + 20%) would have
            # marked the copied pages all-visible, which index-only scans need.
            if engine == "postgresql":
                with connect(store.db.url) as conn:
                    conn.execute("VACUUM ANALYZE")
            else:
                await store.db.write(lambda conn: conn.execute("ANALYZE"))
            print(f"# {engine}: (VACUUM) ANALYZE after seeding", flush=True)
    timed = paths(args)
    samples: dict[tuple[str, str], list[float]] = {}
    # CPU per call: this process (the store, the driver, SQLite itself) and, for
    # PostgreSQL, its server processes serving this database (their /proc times).
    cpu: dict[tuple[str, str], list[tuple[float, float, int]]] = {}
    per_round = max(1, args.requests // args.rounds)
    for round_no in range(args.rounds):
        order = list(stores) if round_no % 2 == 0 else list(reversed(stores))
        for name, fn in timed.items():
            for engine in order:
                store, rng = stores[engine], random.Random(round_no)
                for _ in range(3):  # unmeasured
                    await fn(store, rng)
                got = []
                backends = server_cpu(store) if engine == "postgresql" else 0.0
                mine = time.process_time()
                for _ in range(per_round):
                    start = time.perf_counter()
                    await fn(store, rng)
                    got.append((time.perf_counter() - start) * 1000)
                mine = time.process_time() - mine
                backends = (server_cpu(store) - backends) if engine == "postgresql" else 0.0
                samples.setdefault((name, engine), []).extend(got)
                cpu.setdefault((name, engine), []).append((mine, backends, per_round))
        print(f"# round {round_no + 1} done", flush=True)
    print()
    print(f"{'path':<48} {'sqlite ms':>10} {'postgresql ms':>14} {'ratio':>7}  (wall, medians)")
    for name in timed:
        lite = statistics.median(samples[(name, "sqlite")])
        pg = statistics.median(samples[(name, "postgresql")])
        print(f"{name:<48} {lite:>10.3f} {pg:>14.3f} {pg / lite:>7.2f}")
    print()
    print(
        f"{'CPU ms per call (all rounds)':<48} {'sqlite':>10} {'pg: client':>11}"
        f" {'+ server':>9} {'= total':>8} {'ratio':>7}"
    )
    for name in timed:
        lite = per_call(cpu[(name, "sqlite")], 0)
        client = per_call(cpu[(name, "postgresql")], 0)
        server = per_call(cpu[(name, "postgresql")], 1)
        print(
            f"{name:<48} {lite:>10.3f} {client:>11.3f} {server:>9.3f} {client + server:>8.3f}"
            f" {(client + server) / lite:>7.2f}"
        )
    for engine, phases in seeding.items():
        for phase, seconds in phases.items():
            print(f"seeding {engine}: {phase:<40} {seconds:>9.2f}s")
    return 0


def copied(source: Store, target: Store) -> dict[str, float]:
    """SQLite's seeded rows copied into target's empty PostgreSQL database."""
    start = time.perf_counter()
    lite = open_file(Path(source.db.path), read_only=True)
    try:
        with connect(target.db.url) as pg:
            apply_migrations(pg)
            counts = copy_rows(lite, pg)
    finally:
        lite.close()
    print(f"# postgresql seeding: copied {sum(counts.values())} rows from SQLite", flush=True)
    return {"rows copied from SQLite": time.perf_counter() - start}


def server_cpu(store: Store) -> float:
    """CPU seconds so far of the PostgreSQL server processes serving store's connections."""
    name = store.db.url.rsplit("/", 1)[1]
    with connect(store.db.url) as conn:
        pids = [
            row[0]
            for row in conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()"
                " AND backend_type = 'client backend'",  # not autovacuum's workers
                (name,),
            )
        ]
    total = 0.0
    for pid in pids:
        try:
            total += harness.cpu_seconds(pid)
        except OSError:  # ended meanwhile
            pass
    return total


def per_call(runs: list[tuple[float, float, int]], which: int) -> float:
    """CPU ms per call over runs of (this process's seconds, the server's, calls)."""
    return sum(run[which] for run in runs) / max(1, sum(run[2] for run in runs)) * 1000


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(f"# command: {shlex.join([sys.executable, *sys.argv])}", flush=True)
    with open("/proc/loadavg") as fh:
        print(f"# load average at start: {' '.join(fh.read().split()[:3])}", flush=True)
    with harness.postgres_database(args.database) as url:
        code = asyncio.run(run(args, url))
    with open("/proc/loadavg") as fh:
        print(f"# load average at end: {' '.join(fh.read().split()[:3])}", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
