"""Search benchmark: every search type at a team's real size, through the store.

    python benchmarks/bench_search.py [--users 10000 --repos 10000 --issues 100000
                                       --queries 40 --db PATH --keep]

Generates the data straight through the store's write connection (hubsvc.store, with
its migrations and FTS triggers; not through the API, so it takes a minute or two, not
hours), cached in `--db` (default: a file in the temp folder named after the sizes) so
a second run starts at once:

- `--users` users with word-like usernames and names;
- `--repos` repositories, a tenth of them private, each owned by a random user, with
  descriptions drawn from the bug-report vocabulary of bench_issues.py;
- `--issues` issues and pull requests (70 % issues, 30 % pulls) spread over the
  repositories with a skewed distribution (a few busy repositories hold many), titles
  and bodies from bench_issues.TextGen;
- one user, `member`, collaborator on 500 private repositories (and a few stars), so
  the visibility filter has real work to do for them.

Then it runs `--queries` searches per type (common words, rare words, two-word and
phrase queries, `owner/name` for repositories) for an anonymous caller and for
`member`, each with the search cache emptied first, and prints p50/p95 in ms per type
and caller. Target: p95 ≤ 200 ms for every type. Exit code 0 when met, 1 when not.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for hubsvc

from bench_issues import COMPONENTS, FEATURES, WORDS, TextGen

from hubsvc.store import Store

TARGET_P95_MS = 200.0
MEMBER_PRIVATE_REPOS = 500
SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "ne",
    "ru",
    "ta",
    "vo",
    "zi",
    "an",
    "el",
    "or",
    "us",
    "ber",
    "dan",
    "fin",
    "gar",
    "hol",
    "jen",
    "kor",
    "lin",
    "mar",
    "nor",
    "pet",
    "ros",
]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--repos", type=int, default=10_000)
    parser.add_argument(
        "--issues", type=int, default=100_000, help="issues and pull requests together (100000)"
    )
    parser.add_argument("--queries", type=int, default=40, help="searches per type and caller")
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--db", help="database file to build or reuse")
    return parser.parse_args(argv)


def _name(rng: random.Random) -> str:
    return "".join(rng.choice(SYLLABLES) for _ in range(rng.randint(2, 4)))


def generate(conn, users: int, repos: int, issues: int, seed: int) -> None:
    """Fill an empty database: users, repositories, collaborators, stars, issues, pulls."""
    rng = random.Random(seed)
    now = "2024-01-01T00:00:00Z"
    names = set()
    user_rows = [
        (
            "member",
            "member",
            "member@example.com",
            "member@example.com",
            "Member of many",
            "x",
            now,
            now,
        )
    ]
    while len(user_rows) < users:
        username = f"{_name(rng)}{rng.randint(0, 999)}"
        if username in names or username == "member":
            continue
        names.add(username)
        full = f"{_name(rng).title()} {_name(rng).title()}"
        user_rows.append(
            (
                username,
                username,
                f"{username}@example.com",
                f"{username}@example.com",
                full,
                "x",
                now,
                now,
            )
        )
    conn.executemany(
        "INSERT INTO users (username, username_key, email, email_key, name, password_hash,"
        " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        user_rows,
    )
    user_ids = [r[0] for r in conn.execute("SELECT id FROM users WHERE is_ghost = 0")]
    member = conn.execute("SELECT id FROM users WHERE username_key = 'member'").fetchone()[0]
    words = (
        WORDS
        + [c.split()[0].lower() for c in COMPONENTS]
        + [f.split()[-1].lower() for f in FEATURES]
    )
    repo_rows, taken = [], set()
    while len(repo_rows) < repos:
        owner = rng.choice(user_ids)
        name = "-".join(rng.sample(words, rng.randint(1, 3)))
        if (owner, name) in taken:
            continue
        taken.add((owner, name))
        description = " ".join(rng.choices(words, k=rng.randint(3, 12)))
        visibility = "private" if len(repo_rows) % 10 == 0 else "public"
        repo_rows.append((owner, name, name, description, visibility, now, now))
    conn.executemany(
        "INSERT INTO repositories (owner_id, name, name_key, description, visibility,"
        " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        repo_rows,
    )
    repo_ids = [r[0] for r in conn.execute("SELECT id FROM repositories ORDER BY id")]
    private = [
        r[0] for r in conn.execute("SELECT id FROM repositories WHERE visibility = 'private'")
    ]
    collaborators = {
        (repo, member) for repo in rng.sample(private, min(MEMBER_PRIVATE_REPOS, len(private)))
    }
    for repo in repo_ids:
        for _ in range(rng.randint(0, 3)):
            collaborators.add((repo, rng.choice(user_ids)))
    conn.executemany(
        "INSERT OR IGNORE INTO collaborators (repo_id, user_id, permission,"
        " created_at) VALUES (?, ?, 'write', ?)",
        [(repo, user, now) for repo, user in collaborators],
    )
    stars = {(rng.choice(repo_ids), rng.choice(user_ids)) for _ in range(repos * 3)}
    conn.executemany(
        "INSERT OR IGNORE INTO stars (repo_id, user_id, created_at) VALUES (?, ?, ?)",
        [(r, u, now) for r, u in stars],
    )
    # Skewed: a few busy repositories hold many of the issues.
    weights = [1 / (rank + 1) ** 0.8 for rank in range(len(repo_ids))]
    text = TextGen(seed)
    counters: dict[int, int] = {}
    batch = []
    for n in range(issues):
        repo = rng.choices(repo_ids, weights)[0]
        number = counters[repo] = counters.get(repo, 0) + 1
        is_pull = rng.random() < 0.3
        state = "closed" if rng.random() < 0.4 else "open"
        batch.append(
            (
                repo,
                number,
                int(is_pull),
                text.title(),
                text.body(),
                state,
                rng.choice(user_ids),
                now,
                now,
            )
        )
        if len(batch) == 5000 or n == issues - 1:
            conn.executemany(
                "INSERT INTO issues (repo_id, number, is_pull, title, body, state, author_id,"
                " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                batch,
            )
            batch = []
    conn.execute(
        "INSERT INTO pulls (issue_id, head_repo_id, head, base)"
        " SELECT id, repo_id, 'topic-' || number, 'main' FROM issues WHERE is_pull = 1"
    )
    conn.executemany(
        "UPDATE repositories SET next_number = ? WHERE id = ?",
        [(count + 1, repo) for repo, count in counters.items()],
    )


def queries(rng: random.Random, count: int, kind: str, repo_names: list[str]) -> list[str]:
    """A mix of common and rare single words, two words, a phrase and owner/name."""
    out = []
    for i in range(count):
        roll = i % 5
        if kind == "users":
            out.append(rng.choice(SYLLABLES) + (rng.choice(SYLLABLES) if roll % 2 else ""))
        elif kind == "repositories" and roll == 4:
            out.append(rng.choice(repo_names))
        elif roll == 0:
            out.append(rng.choice(WORDS[:20]))  # common
        elif roll == 1:
            out.append(rng.choice(WORDS[-40:]))  # rarer
        elif roll == 2:
            out.append(" ".join(rng.sample(WORDS, 2)))
        elif roll == 3:
            out.append(rng.choice(COMPONENTS).split()[0].lower())
        else:
            out.append(f'"{rng.choice(COMPONENTS).lower()}"')
    return out


async def run(args: argparse.Namespace) -> int:
    path = (
        Path(args.db)
        if args.db
        else Path(tempfile.gettempdir())
        / (f"hubsvc-bench-search-{args.users}-{args.repos}-{args.issues}-{args.seed}.db")
    )
    fresh = not path.exists()
    store = Store(path)
    await store.open()
    try:
        if fresh:
            started = time.perf_counter()
            await store.db.write(generate, args.users, args.repos, args.issues, args.seed)
            await store.db.write(lambda conn: conn.execute("PRAGMA optimize"))
            print(f"# generated {path} in {time.perf_counter() - started:.0f} s", flush=True)
        else:
            print(f"# reusing {path}", flush=True)
        counts = await store.db.read(
            lambda conn: conn.execute(
                "SELECT (SELECT COUNT(*) FROM users), (SELECT COUNT(*) FROM repositories),"
                " (SELECT COUNT(*) FROM repositories WHERE visibility = 'private'),"
                " (SELECT COUNT(*) FROM issues), (SELECT COUNT(*) FROM collaborators"
                "  WHERE user_id = (SELECT id FROM users WHERE username_key = 'member'))"
            ).fetchone()
        )
        print(
            f"# {counts[0]:,} users, {counts[1]:,} repositories ({counts[2]:,} private), "
            f"{counts[3]:,} issues and pull requests; member collaborates on {counts[4]}",
            flush=True,
        )
        member = (await store.users.by_username("member"))["id"]
        repo_names = await store.db.read(
            lambda conn: [
                f"{r[0]}/{r[1]}"
                for r in conn.execute(
                    "SELECT u.username, r.name FROM repositories r JOIN users u"
                    " ON u.id = r.owner_id ORDER BY r.id LIMIT 200"
                )
            ]
        )
        rng = random.Random(args.seed)
        search = store.search
        kinds = {
            "repositories": lambda q, v: search.repositories(q, v, 30, 0),
            "issues": lambda q, v: search.issues(q, v, False, 30, 0),
            "pulls": lambda q, v: search.issues(q, v, True, 30, 0),
            "users": lambda q, v: search.users(q, 30, 0),
        }
        met = True
        print()
        for kind, call in kinds.items():
            texts = queries(rng, args.queries, kind, repo_names)
            for caller, viewer in (("anonymous", 0), ("member", member)):
                times, hits = [], 0
                for text in texts:
                    store.db.generation += 1  # empties the search cache: every query is cold
                    started = time.perf_counter()
                    rows, _ = await call(text, viewer)
                    times.append((time.perf_counter() - started) * 1000)
                    hits += bool(rows)
                times.sort()
                p50 = statistics.median(times)
                p95 = times[max(0, round(len(times) * 0.95) - 1)]
                ok = p95 <= TARGET_P95_MS
                met = met and ok
                print(
                    f"search {kind} ({caller}): p50 {p50:.1f} ms, p95 {p95:.1f} ms, "
                    f"max {times[-1]:.1f} ms (target p95 ≤ {TARGET_P95_MS:g} ms: "
                    f"{'met' if ok else 'NOT MET'})  [{len(texts)} queries, {hits} with hits]",
                    flush=True,
                )
    finally:
        await store.close()
    return 0 if met else 1


def main(argv: list[str] | None = None) -> int:
    return asyncio.run(run(parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
