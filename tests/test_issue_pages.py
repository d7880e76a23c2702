"""List pages read from the store: paged ids first, then their rows; PostgreSQL's plans."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from hubsvc.store import Store

from .servers import fresh_postgres_database, postgres_server

SORTS = [
    {},
    {"direction": "asc"},
    {"sort": "comments"},
    {"sort": "comments", "direction": "asc"},
    {"sort": "updated"},
    {"sort": "updated", "direction": "asc"},
]


async def seeded(store: Store) -> int:
    """A repository with 8 issues (one closed) and 4 pull requests (one closed, one merged)."""
    people = [
        await store.users.create(
            username=f"u{i}", email=f"u{i}@example.com", name=f"U {i}", password_hash="x"
        )
        for i in range(3)
    ]
    repo = await store.repos.create(
        owner_id=people[0]["id"],
        name="proj",
        description="",
        visibility="public",
        default_branch="main",
    )
    for n in range(12):
        pull = n % 5 == 4 or n in (2, 6)
        made = await store.issues.create(
            repo_id=repo["id"],
            author_id=people[n % 3]["id"],
            title=f"item {n}",
            body="",
            labels=["bug"] if n % 2 else [],
            assignee_ids=[people[1]["id"]] if n % 3 == 0 else [],
            pull={"head_repo_id": repo["id"], "head": f"t{n}", "base": "main"} if pull else None,
        )
        for _ in range(n % 4):
            await store.issues.add_comment(made["id"], people[2]["id"], "c")
        if n in (2, 3):  # a pull request closed unmerged, an issue closed
            await store.issues.update(made["id"], {"state": "closed"})
        if n == 6:
            assert await store.merges.claim(made["id"], repo["id"], people[0]["id"], "merge", None)
            await store.merges.finish(
                made["id"], people[0]["id"], "c" * 40, "d" * 40, "e" * 40, "main"
            )
    return repo["id"]


async def test_pages_put_together_are_the_whole_list(tmp_path, database_url):
    store = Store(tmp_path / "hubsvc.db", url=database_url)
    await store.open()
    try:
        repo = await seeded(store)
        for is_pull, states in (
            (False, ("open", "closed", "all")),
            (True, ("open", "closed", "merged", "all")),
        ):
            for state in states:
                for filters in [*SORTS, {"labels": ["bug"]}, {"assignee": "u1"}]:
                    whole, more = await store.issues.page(repo, is_pull, state, 100, 0, filters)
                    assert not more
                    assert whole or "labels" in filters or "assignee" in filters, (state, filters)
                    paged, offset = [], 0
                    while True:
                        rows, more = await store.issues.page(
                            repo, is_pull, state, 2, offset, filters
                        )
                        paged += rows
                        offset += 2
                        if not more:
                            break
                    # the same rows, whole (assignees, labels, pull fields), in the same order
                    assert paged == whole, (is_pull, state, filters)
                    assert len({row["id"] for row in paged}) == len(paged)
    finally:
        await store.close()


@pytest.fixture
def pg_url() -> Iterator[str]:
    yield from fresh_postgres_database(postgres_server())


async def test_postgres_reads_keep_one_generic_plan(tmp_path, pg_url):
    """A read statement prepared on a pooled connection is planned once, not per call."""
    store = Store(tmp_path / "unused.db", url=pg_url)
    await store.open()
    try:
        repo = await seeded(store)

        def reads(conn):
            for offset in (0, 2, 4, 0):
                store.issues.page.sync(store.issues, conn, repo, False, "all", 2, offset)
            plans = conn.execute(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
                " WHERE statement LIKE ?",
                ("WITH page AS MATERIALIZED%",),
            ).fetchall()
            return plans, conn.execute("SHOW jit").fetchone()[0]

        # Prepared on its second call; without force_generic_plan its first five
        # executions would each be planned again with their values (custom plans). JIT
        # is off: a generic plan's estimates for a big table made it compile every call.
        assert await store.db.read(reads) == ([(3, 0)], "off")
    finally:
        await store.close()
