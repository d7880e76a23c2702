"""Driver choice for PostgreSQL: the store's psycopg 3 engine against asyncpg, same queries.

    python benchmarks/bench_drivers.py --database postgresql://postgres@127.0.0.1/postgres
                                       [--requests 2000 --rounds 5 --concurrency 1,8]

Creates a fresh database on the server (dropped at the end), migrated by the store, with
one repository row, and times in interleaved rounds:

- a point read as the store runs it (PostgresDatabase.read: a hop to a store thread,
  a pooled psycopg connection, a read transaction), against asyncpg's pool fetchrow
  (no thread, the binary protocol) of the same SQL;
- a small write transaction (UPDATE … RETURNING) both ways: the store's
  SERIALIZABLE `write`, asyncpg's `transaction(isolation="serializable")`;

with 1 and 8 requests in flight. It prints each median latency per operation and the
store engine's ÷ asyncpg's (above 1: asyncpg is faster). Needs `pip install asyncpg`
(only for this benchmark) and the postgres extra.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

READ = "SELECT id, name, visibility, star_count FROM repositories WHERE id = ?"
WRITE = "UPDATE repositories SET star_count = star_count + 1 WHERE id = ? RETURNING star_count"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database", required=True, help="postgresql:// URL of a server")
    parser.add_argument("--requests", type=int, default=2000, help="per operation and round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", default="1,8", help="requests in flight (1,8)")
    return parser.parse_args(argv)


async def timed(fn, requests: int, concurrency: int) -> list[float]:
    """Latencies in ms of `requests` calls of fn, `concurrency` at a time."""
    samples: list[float] = []
    left = iter(range(requests))

    async def worker() -> None:
        for _ in left:
            start = time.perf_counter()
            await fn()
            samples.append((time.perf_counter() - start) * 1000)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return samples


async def run(args: argparse.Namespace, url: str) -> None:
    import asyncpg

    from hubsvc.store import Store

    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "unused.db", url=url, pool_size=8)
        await store.open()
        await store.db.write(
            lambda c: c.execute(
                "INSERT INTO repositories (id, owner_id, name, name_key, visibility,"
                " created_at, updated_at) VALUES (1, 1, 'r', 'r', 'public', 'x', 'x')"
            )
        )
        pool = await asyncpg.create_pool(url, min_size=8, max_size=8)
        read_pg = READ.replace("?", "$1")
        write_pg = WRITE.replace("?", "$1")

        async def store_read() -> None:
            await store.db.read(lambda c: c.execute(READ, (1,)).fetchone())

        async def store_write() -> None:
            await store.db.write(lambda c: c.execute(WRITE, (1,)).fetchone())

        async def apg_read() -> None:
            async with pool.acquire() as conn:
                await conn.fetchrow(read_pg, 1)

        async def apg_write() -> None:
            async with pool.acquire() as conn:
                while True:  # retried on conflict, as the store's writes are
                    try:
                        async with conn.transaction(isolation="serializable"):
                            await conn.fetchrow(write_pg, 1)
                        return
                    except asyncpg.SerializationError:
                        continue

        cases = {
            "read": (store_read, apg_read),
            "write": (store_write, apg_write),
        }
        levels = [int(n) for n in args.concurrency.split(",")]
        results: dict[tuple[str, int, str], list[float]] = {}
        for round_no in range(args.rounds):
            for op, (ours, theirs) in cases.items():
                for level in levels:
                    pair = [("psycopg", ours), ("asyncpg", theirs)]
                    if round_no % 2:
                        pair.reverse()
                    for name, fn in pair:
                        got = await timed(fn, args.requests, level)
                        results.setdefault((op, level, name), []).extend(got)
                        print(
                            f"#   round {round_no + 1} {op} x{level} {name}:"
                            f" median {statistics.median(got):.3f} ms",
                            flush=True,
                        )
        await pool.close()
        await store.close()
    print()
    for op in cases:
        for level in levels:
            ours = statistics.median(results[(op, level, "psycopg")])
            theirs = statistics.median(results[(op, level, "asyncpg")])
            print(
                f"{op} with {level} in flight: store engine (psycopg 3) {ours:.3f} ms,"
                f" asyncpg {theirs:.3f} ms (ratio {ours / theirs:.2f} vs asyncpg)"
            )


def main(argv: list[str] | None = None) -> int:
    import psycopg

    args = parse_args(argv)
    name = "hubsvc_bench_" + uuid.uuid4().hex[:12]
    parts = urlsplit(args.database)
    url = urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, ""))
    print(f"# command: {' '.join(sys.argv)}", flush=True)
    with psycopg.connect(args.database, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        asyncio.run(run(args, url))
    finally:
        with psycopg.connect(args.database, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    return 0


if __name__ == "__main__":
    sys.exit(main())
