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
            for is_pull in (False, True):
                for offset in (0, 2, 4, 0):
                    store.issues.page.sync(store.issues, conn, repo, is_pull, "all", 2, offset)
            plans = conn.execute(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements"
                " WHERE statement LIKE ?",
                ("WITH page AS MATERIALIZED%",),
            ).fetchall()
            return plans, conn.execute("SHOW jit").fetchone()[0]

        # Prepared on its second call (each kind's page text is the same at every
        # offset); without force_generic_plan its first five executions would each be
        # planned again with their values (custom plans). JIT is off: a generic plan's
        # estimates for a big table made it compile every call.
        assert await store.db.read(reads) == ([(3, 0), (3, 0)], "off")
    finally:
        await store.close()


async def test_postgres_rows_name_their_columns_once_per_statement(tmp_path, pg_url, monkeypatch):
    """psycopg builds a Column per column on each `description`: a page's 86 columns
    cost ~0.1 ms a call, so rows learn their columns' names once per statement shape."""
    import psycopg

    store = Store(tmp_path / "unused.db", url=pg_url)
    await store.open()
    try:
        repo = await seeded(store)
        first, _ = await store.issues.page(repo, False, "all", 30, 0)
        made = [0]
        init = psycopg.Column.__init__

        def counting(self, *args, **kwargs):
            made[0] += 1
            init(self, *args, **kwargs)

        monkeypatch.setattr(psycopg.Column, "__init__", counting)
        for _ in range(3):
            again, _ = await store.issues.page(repo, False, "all", 30, 0)
            assert again == first
        none = await store.db.read(lambda conn: conn.execute("SET jit = off").fetchall())
        assert made[0] == 0 and none == []
    finally:
        await store.close()


async def test_a_row_brings_what_hangs_on_it_in_one_statement(tmp_path, database_url):
    """Labels (in the issue's order, its objects' case; a name SQL cannot lower-case
    itself), reactions, assignees and review requests (people and teams) come along with
    the row, and a list page, one issue and a search hit agree."""
    store = Store(tmp_path / "hubsvc.db", url=database_url)
    await store.open()
    try:
        people = [
            await store.users.create(
                username=f"p{i}", email=f"p{i}@example.com", name=f"P {i}", password_hash="x"
            )
            for i in range(4)
        ]
        org = await store.orgs.create(people[0]["id"], "crew", "")
        repo = await store.repos.create(
            owner_id=org,
            name="proj",
            description="",
            visibility="public",
            default_branch="main",
            admin_id=people[0]["id"],
        )
        await store.labels.create(repo["id"], "Zeta", "00ff00", "the last letter")
        teams = [await store.orgs.create_team(org, name, "", "write") for name in ("web", "Core")]
        made = []
        for n, pull in enumerate((False, True, False)):
            made.append(
                await store.issues.create(
                    repo_id=repo["id"],
                    author_id=people[n]["id"],
                    title=f"crash number {n}",
                    body="",
                    labels=[["zeta", "Ärger", "bug"], ["bug", "zeta"], []][n],
                    assignee_ids=[people[3]["id"], people[1]["id"]] if n != 2 else [],
                    pull={"head_repo_id": repo["id"], "head": "t", "base": "main"}
                    if pull
                    else None,
                )
            )
        for issue in made[:2]:
            for who, kind in ((0, "heart"), (1, "+1"), (2, "+1")):
                await store.reactions.add(issue["id"], 0, people[who]["id"], kind)
        pull = made[1]
        await store.reviews.request(pull["id"], [people[3]["id"]], [], people[0]["id"])
        await store.reviews.request(
            pull["id"], [people[2]["id"]], [t["id"] for t in teams], people[0]["id"]
        )

        one = await store.issues.get(repo["id"], made[0]["number"], False)
        assert [o["name"] for o in one["label_objects"]] == ["Zeta", "Ärger", "bug"]
        zeta = await store.labels.get(repo["id"], "zeta")
        assert one["label_objects"][0] == {
            k: zeta[k] for k in ("id", "repo_id", "name", "name_key", "color", "description")
        }
        assert [o["id"] for o in one["label_objects"]] == [
            (await store.labels.get(repo["id"], name))["id"] for name in ("zeta", "ärger", "bug")
        ]
        assert one["reaction_counts"] == {"+1": 2, "heart": 1}
        assert [a["username"] for a in one["assignees"]] == ["p3", "p1"]
        assert "requested_reviewers" not in one
        got = await store.issues.get(repo["id"], pull["number"], True)
        # By when they were asked (to the second), then by name.
        assert [r["username"] for r in got["requested_reviewers"]] == ["p2", "p3"]
        assert [(t["name"], t["org"]) for t in got["requested_teams"]] == [
            ("Core", "crew"),
            ("web", "crew"),
        ]
        bare = await store.issues.get(repo["id"], made[2]["number"], False)
        assert (bare["labels"], bare["label_objects"], bare["reaction_counts"]) == ([], [], {})

        assert [o["name"] for o in got["label_objects"]] == ["bug", "Zeta"]

        class Counted:
            """A connection that counts the statements sent through it."""

            def __init__(self, conn):
                self.conn, self.sent = conn, 0

            def execute(self, *args):
                self.sent += 1
                return self.conn.execute(*args)

        def statements(conn):
            counted = Counted(conn)
            store.issues.page.sync(store.issues, counted, repo["id"], True, "all", 30, 0)
            store.issues.get.sync(store.issues, counted, repo["id"], pull["number"], True)
            return counted.sent

        # One statement each for a page and one pull request (ASCII label names).
        assert await store.db.read(statements) == 2

        # The same rows, however they are read.
        for is_pull, numbers in ((False, [made[2]["number"], made[0]["number"]]), (True, [2])):
            rows, _ = await store.issues.page(repo["id"], is_pull, "all", 30, 0)
            each = [await store.issues.get(repo["id"], n, is_pull) for n in numbers]
            assert rows == each
            store.search._cache.clear()
            hits, _ = await store.search.issues("crash", people[0]["id"], is_pull, 20, 0)
            for hit in hits:
                assert (hit.pop("repo_owner"), hit.pop("repo_name")) == ("crew", "proj")
            assert sorted(hits, key=lambda h: h["number"]) == sorted(
                each, key=lambda h: h["number"]
            )
        # And as a write returns them.
        changed = await store.issues.update(made[0]["id"], {"title": "crash number zero"})
        assert changed == {**one, "title": "crash number zero", "updated_at": changed["updated_at"]}
    finally:
        await store.close()


async def _people(store: Store, *names: str) -> list[dict]:
    """The users "owner" and names, in that order."""
    return [
        await store.users.create(
            username=name, email=f"{name}@example.com", name=name, password_hash="x"
        )
        for name in ("owner", *names)
    ]


async def _project(store: Store, owner: dict) -> dict:
    """owner's public repository "proj"."""
    return await store.repos.create(
        owner_id=owner["id"],
        name="proj",
        description="",
        visibility="public",
        default_branch="main",
    )


async def _pull(store: Store, repo: dict, author: dict, head: dict, n: int) -> dict:
    """Pull request "change n" by author into repo's main, from branch tn of head."""
    return await store.issues.create(
        repo_id=repo["id"],
        author_id=author["id"],
        title=f"change {n}",
        body="",
        labels=[],
        assignee_ids=[],
        pull={"head_repo_id": head["id"], "head": f"t{n}", "base": "main"},
    )


async def test_a_pull_page_tells_who_may_write_the_head(tmp_path, database_url):
    """author_writes_head, looked up once per (head repository, author) on a pull page,
    is what one pull request read alone says: owner and writer yes, reader and outsider
    no, an outsider's own fork yes."""
    store = Store(tmp_path / "hubsvc.db", url=database_url)
    await store.open()
    try:
        owner, writer, reader, outsider = await _people(store, "writer", "reader", "outsider")
        repo = await _project(store, owner)
        fork = await store.repos.create(
            owner_id=outsider["id"],
            name="proj",
            description="",
            visibility="public",
            default_branch="main",
            parent_id=repo["id"],
        )
        await store.repos.set_collaborator(repo["id"], writer["id"], "write")
        await store.repos.set_collaborator(repo["id"], reader["id"], "read")
        cases = [
            (owner, repo, 1),
            (writer, repo, 1),
            (reader, repo, 0),
            (outsider, repo, 0),
            (outsider, fork, 1),
            (writer, fork, 0),
            (owner, repo, 1),  # a second pull request of the same (head, author)
        ]
        for n, (author, head, _) in enumerate(cases):
            await _pull(store, repo, author, head, n)
        rows, _ = await store.issues.page(repo["id"], True, "all", 30, 0, {"direction": "asc"})
        assert [row["author_writes_head"] for row in rows] == [case[2] for case in cases]
        for row in rows:
            alone = await store.issues.get(repo["id"], row["number"], True)
            assert alone == row
    finally:
        await store.close()


async def test_a_pull_page_checks_access_twice_not_per_check(tmp_path, database_url):
    """A pull page's statement holds two access checks (the author on the head; the
    reviewers, for both review counts), where it held one per column (three), and
    its checks say what each pull request's row read by itself says: writers' latest
    verdicts counted, approvals of the head commit only, the head's combined status."""
    store = Store(tmp_path / "hubsvc.db", url=database_url)
    await store.open()
    try:
        owner, writer, reader, other = await _people(store, "writer", "reader", "other")
        repo = await _project(store, owner)
        await store.repos.set_collaborator(repo["id"], writer["id"], "write")
        await store.repos.set_collaborator(repo["id"], reader["id"], "read")
        head, old = "H", "b" * 40  # H: the pull request's own head commit
        # (author, reviews (who, state, commit), statuses (context, state))
        cases = [
            (writer, [(owner, "APPROVED", head), (writer, "APPROVED", head)], [("ci", "success")]),
            (other, [(owner, "APPROVED", old), (reader, "APPROVED", head)], []),
            (reader, [(owner, "CHANGES_REQUESTED", head), (owner, "APPROVED", head)], []),
            (owner, [(owner, "APPROVED", head), (owner, "COMMENTED", head)], [("ci", "pending")]),
            (other, [(writer, "CHANGES_REQUESTED", head), (other, "CHANGES_REQUESTED", head)], []),
            (writer, [], [("ci", "failure"), ("ci", "success"), ("lint", "error")]),
            (owner, [(writer, "APPROVED", head)], None),  # no head commit checked yet
        ]
        for n, (author, reviews, statuses) in enumerate(cases):
            tip = f"{n + 1:040x}"
            made = await _pull(store, repo, author, repo, n)
            if statuses is not None:
                await store.issues.set_mergeable(made["id"], tip, "c" * 40, True)
            for who, state, commit in reviews:
                commit = tip if commit == head else commit
                await store.reviews.add(made["id"], who["id"], state, "", commit, [])
            for context, state in statuses or []:
                await store.statuses.add(repo["id"], tip, state, context, None, None, owner["id"])
        sent: list = []
        rows, _ = await store.db.read(
            lambda conn: store.issues.page.sync(
                store.issues, Recording(conn, sent), repo["id"], True, "all", 30, 0
            )
        )
        assert len(sent) == 1 and sent[0][0].count("FROM org_members gom") == 2, sent
        # open_pulls_touching reads the same columns with a correlated subquery each.
        alone = {
            row["id"]: row for row in await store.issues.open_pulls_touching(repo["id"], "main")
        }
        checks = ("author_writes_head", "changes_requested", "approvals", "head_status")
        got = [tuple(row[k] for k in checks) for row in reversed(rows)]
        assert got == [tuple(alone[row["id"]][k] for k in checks) for row in reversed(rows)]
        assert got == [
            (1, 0, 2, "success"),
            (0, 0, 0, None),
            (0, 0, 1, None),
            (1, 0, 1, "pending"),
            (0, 1, 0, None),
            (1, 0, 0, "failure"),
            (1, 0, 0, None),
        ]
    finally:
        await store.close()


async def test_a_page_walks_its_index_alone(tmp_path, database_url):
    """A page of every state finds its ids in issues_walk alone (an index-only walk):
    with (repo_id, number) each skipped row's is_pull was read from the table."""
    store = Store(tmp_path / "hubsvc.db", url=database_url)
    await store.open()
    try:
        repo = await seeded(store)
        # A dozen rows: PostgreSQL would scan the table.
        found = await store.db.read(
            lambda conn: page_plan(store, conn, (repo, True, "all", 2, 2), True)
        )
        if store.db.dialect == "sqlite":
            assert "COVERING INDEX issues_walk" in found, found
        else:
            assert "Index Only Scan Backward using issues_walk" in found, found
    finally:
        await store.close()


async def test_postgres_search_parses_its_query_once(tmp_path, pg_url):
    """A prepared search's generic plan reads the query from an InitPlan, not by calling
    to_tsquery per hit (twice: the index recheck and ts_rank) as a bare parameter made it."""
    from hubsvc.store.access import VISIBLE

    store = Store(tmp_path / "unused.db", url=pg_url)
    await store.open()
    try:
        await seeded(store)
        statement = store.db.sql.issue_hits(VISIBLE, False) + " SELECT hit, score FROM page"

        def plan(conn):
            text = statement.replace(":q", "$1").replace(":viewer", "$2")
            text = text.replace(":limit", "$3").replace(":offset", "$4")
            conn.raw.execute(f"PREPARE hits(text, bigint, bigint, bigint) AS {text}")
            try:
                return "\n".join(
                    row[0]
                    for row in conn.raw.execute(
                        "EXPLAIN (VERBOSE) EXECUTE hits('item:*', 0, 20, 0)"
                    )
                )
            finally:
                conn.raw.execute("DEALLOCATE hits")

        found = await store.db.read(plan)
        rank = next(line for line in found.splitlines() if "Sort Key" in line)
        assert "to_tsquery" not in rank, found
    finally:
        await store.close()


async def test_an_issue_page_sets_up_no_pull_request_checks(tmp_path, database_url):
    """A page of issues is read without the pull request joins and their correlated
    checks (PostgreSQL set up every subplan on each execution, skipped or not), and its
    rows are still what one issue read alone gives, pull request columns included."""
    store = Store(tmp_path / "hubsvc.db", url=database_url)
    await store.open()
    try:
        repo = await seeded(store)
        found = await store.db.read(
            lambda conn: page_plan(store, conn, (repo, False, "all", 30, 0))
        )
        assert "CORRELATED" not in found and "SubPlan" not in found, found  # SQLite, PG
        rows, _ = await store.issues.page(repo, False, "all", 30, 0)
        assert rows and all(not row["is_pull"] for row in rows)
        for row in rows:
            assert row == await store.issues.get(repo, row["number"], False)
            assert (row["head"], row["author_writes_head"], row["head_status"]) == (None, 0, None)
    finally:
        await store.close()


class Recording:
    """A connection that notes each statement sent through it."""

    def __init__(self, conn, sent: list) -> None:
        self.conn, self.sent = conn, sent

    def execute(self, sql, params=None):
        self.sent.append((sql, params))
        return self.conn.execute(sql, params)

    def __getattr__(self, name):
        return getattr(self.conn, name)


def page_plan(store, conn, args: tuple, no_seqscan: bool = False) -> str:
    """The plan of the statement a page of issues (page's args) sends, as one line."""
    sent: list = []
    store.issues.page.sync(store.issues, Recording(conn, sent), *args)
    sql, params = sent[0]
    if store.db.dialect == "sqlite":
        return " ".join(row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params))
    if no_seqscan:
        conn.execute("SET enable_seqscan = off")
    try:
        return " ".join(row[0] for row in conn.execute("EXPLAIN " + sql, params))
    finally:
        if no_seqscan:
            conn.execute("RESET enable_seqscan")
