"""What browsing keeps between requests: history walks (git/walk.py) and object sizes,
against git itself."""

from __future__ import annotations

import os
import random
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from hubsvc.git import history, trees, walk
from hubsvc.git.objects import Kept
from hubsvc.git.repo import GitRepo
from hubsvc.git.walk import IN_PROCESS, WalkCache, Window

FIELDS = "%x00".join(("%H", "%P", "%an", "%ae", "%at", "%cn", "%ce", "%ct", "%B"))
BASE_DATE = 1_700_000_000


def git(git_dir: Path, *args: str, stdin: bytes | None = None) -> bytes:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, EMAIL="me@example.com")
    return subprocess.run(
        ["git", f"--git-dir={git_dir}", *args],
        input=stdin,
        env=env,
        capture_output=True,
        check=True,
    ).stdout


def git_log(git_dir: Path, rev: str, skip: int, count: int) -> list[dict]:
    """git log's page as the API's items, read field by field from git's own output."""
    out = git(git_dir, "log", "-z", f"--format={FIELDS}", f"--skip={skip}", f"-n{count}", rev)
    fields = out.split(b"\0")
    items = []
    for at in range(0, len(fields) - 1, 9):
        oid, parents, an, ae, adate, cn, ce, cdate, message = (
            f.decode("utf-8", "replace") for f in fields[at : at + 9]
        )

        def person(name: str, email: str, when: str) -> dict:
            date = datetime.fromtimestamp(int(when), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            return {"name": name, "email": email, "date": date}

        items.append(
            {
                "oid": oid,
                "message": message,
                "author": person(an, ae, adate),
                "committer": person(cn, ce, cdate),
                "parents": parents.split(),
                "timestamp": int(adate) * 1000,
            }
        )
    return items


def fast_import(git_dir: Path, commits: list[tuple[str, list[int], int]]) -> None:
    """Commits (branch, parent marks, committer date) written with git fast-import; mark = index + 1."""
    stream = []
    for mark, (branch, parents, date) in enumerate(commits, 1):
        message = f"commit {mark}\n".encode()
        stream.append(f"commit refs/heads/{branch}\nmark :{mark}\n".encode())
        stream.append(f"author A U Thor <a@example.com> {date - 7} +0100\n".encode())
        stream.append(f"committer C O Mitter <c@example.com> {date} -0500\n".encode())
        stream.append(b"data %d\n%s" % (len(message), message))
        if parents:
            stream.append(f"from :{parents[0]}\n".encode())
        else:
            stream.append(b"deleteall\n")
        stream += [f"merge :{p}\n".encode() for p in parents[1:]]
        stream.append(f"M 644 inline f{mark % 7}\ndata 2\n{mark % 10}\n\n".encode())
    git(git_dir, "fast-import", "--quiet", "--force", stdin=b"".join(stream))


def tangled_history(count: int, seed: int) -> list[tuple[str, list[int], int]]:
    """Branches forking and merging (octopus too), second roots, equal dates, clocks gone back."""
    rng = random.Random(seed)
    commits: list[tuple[str, list[int], int]] = []
    tips: dict[str, int] = {}
    date = BASE_DATE
    for _ in range(count):
        date += rng.choice((0, 0, 1, 60, 3600, -7200))  # ties and skew are the hard cases
        branch = rng.choice(["main", "main", "main", "a", "b", "c"])
        if branch not in tips or rng.random() < 0.05:
            parents = [] if not tips or rng.random() < 0.2 else [rng.choice(list(tips.values()))]
        else:
            parents = [tips[branch]]
            others = [t for name, t in tips.items() if name != branch and t not in parents]
            if others and rng.random() < 0.3:
                parents += rng.sample(others, min(len(others), rng.choice((1, 1, 2))))
        commits.append((branch, parents, date))
        tips[branch] = len(commits)
    # Everything ends on main, so main's walk meets every kind of fork and merge.
    commits.append(("main", [tips["main"]] + [t for n, t in tips.items() if n != "main"], date))
    return commits


@pytest.fixture(scope="module")
def tangled(tmp_path_factory):
    git_dir = tmp_path_factory.mktemp("walk") / "tangled.git"
    GitRepo.init_bare(git_dir, "main").close()
    fast_import(git_dir, tangled_history(600, seed=7))
    return git_dir


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch):
    """Each test starts with nothing kept."""
    cache = WalkCache()
    monkeypatch.setattr(history, "WALKS", cache)
    monkeypatch.setattr(history, "ITEMS", Kept(1 << 11))
    return cache


PAGES = [(0, 1), (0, 30), (1, 30), (30, 30), (IN_PROCESS - 31, 30), (IN_PROCESS - 5, 30)]
PAGES += [(IN_PROCESS, 30), (250, 100), (400, 30), (590, 30), (650, 30), (0, 700), (3, 0)]


@pytest.mark.parametrize("graph", [False, True], ids=["objects", "commit-graph"])
def test_pages_match_git_log_through_merges_ties_and_skew(tangled, tmp_path, graph):
    git_dir = tangled
    if graph:
        git_dir = tmp_path / "graph.git"
        git(tangled, "clone", "--bare", "--quiet", str(tangled), str(git_dir))
        git(git_dir, "commit-graph", "write", "--reachable")
    merges = git(git_dir, "rev-list", "--min-parents=3", "main").split()
    assert merges, "the history must hold an octopus merge"
    with GitRepo(git_dir) as repo:
        for rev in ("main", "a", "b", "c"):
            for skip, limit in PAGES:
                expected = git_log(git_dir, rev, skip, limit + 1)
                items, more = repo.commits(rev, limit, skip)
                assert items == expected[:limit], (rev, skip, limit)
                assert more == (len(expected) > limit), (rev, skip, limit)
        # The same pages again, now from the kept walks, deepest first.
        for skip, limit in reversed(PAGES):
            expected = git_log(git_dir, "main", skip, limit + 1)
            assert repo.commits("main", limit, skip) == (expected[:limit], len(expected) > limit)


def test_walks_are_kept_and_a_new_commit_is_seen(tangled, tmp_path, fresh_cache):
    git_dir = tmp_path / "r.git"
    git(tangled, "clone", "--bare", "--quiet", str(tangled), str(git_dir))
    with GitRepo(git_dir) as repo:
        tip = git(git_dir, "rev-parse", "main").decode().strip()
        assert repo.commits("main", 30, 300)[0] == git_log(git_dir, "main", 300, 30)
        kept = fresh_cache.get(str(git_dir), tip.encode())
        expected = git(git_dir, "rev-list", "--skip=300", "-n31", "main").split()
        assert kept == Window(300, b"".join(expected), False)  # git log's page starts it
        # The next pages grow that window (by its length at least): no process for 330.
        assert repo.commits("main", 30, 330)[0] == git_log(git_dir, "main", 330, 30)
        grown = fresh_cache.get(str(git_dir), tip.encode())
        assert grown is not None and grown.first == 300 and grown.end >= 361
        assert grown.oids == b"".join(
            git(git_dir, "rev-list", "--skip=300", f"-n{grown.end - 300}", "main").split()
        )
        assert repo.commits("main", 30, 331)[0] == git_log(git_dir, "main", 331, 30)
        assert fresh_cache.get(str(git_dir), tip.encode()) == grown
        # Within the first IN_PROCESS commits the walk is dulwich's and starts at 0.
        repo.commits("main", 10, 5)
        assert fresh_cache.get(str(git_dir), tip.encode()).first == 0
        # Past the end of history: an empty page, kept as such.
        assert repo.commits("main", 30, 5000) == ([], False)
        # Another writer (a push, here git itself) moves main on: the page starts anew.
        tree = git(git_dir, "rev-parse", "main^{tree}").decode().strip()
        new = git(git_dir, "commit-tree", tree, "-p", tip, "-m", "pushed later").decode().strip()
        git(git_dir, "update-ref", "refs/heads/main", new)
        first, _ = repo.commits("main", 2, 0)
        assert [c["oid"] for c in first] == [new, tip]
        assert repo.commits("main", 30, 300)[0] == git_log(git_dir, "main", 300, 30)


@pytest.mark.parametrize(
    "name, header, message",
    [
        (
            "latin-1 with its encoding header",
            b"encoding ISO-8859-1\n",
            "caf\u00e9\n".encode("latin-1"),
        ),
        ("no newline at the end", b"", b"subject only"),
        ("empty message", b"", b""),
        ("an extra header", b"x-custom some value\n", b"body\n\nmore\n"),
    ],
)
def test_odd_commits_read_as_git_log_shows_them(tmp_path, name, header, message):
    git_dir = tmp_path / "odd.git"
    GitRepo.init_bare(git_dir, "main").close()
    tree = git(git_dir, "mktree", stdin=b"").decode().strip()
    parent = None
    idents = [b"Plain Name <p@example.com>", b"  Spaced   Name  <s@x.org>", b"Zo\xeb <z@x.org>"]
    idents += [b"Two <a@x.org> <b@x.org>"]
    for n, ident in enumerate(idents):
        raw = b"tree " + tree.encode() + b"\n"
        raw += b"parent " + parent.encode() + b"\n" if parent else b""
        raw += b"author " + ident + b" %d +0000\n" % (BASE_DATE + n)
        raw += b"committer " + ident + b" %d +0000\n" % (BASE_DATE + n)
        raw += header + b"\n" + message
        parent = git(git_dir, "hash-object", "-t", "commit", "-w", "--stdin", stdin=raw)
        parent = parent.decode().strip()
    git(git_dir, "update-ref", "refs/heads/main", parent)
    with GitRepo(git_dir) as repo:
        assert repo.commits("main", 9, 0) == (git_log(git_dir, "main", 0, 9), False), name
        for item in repo.commits("main", 9, 0)[0]:  # the diff describes a commit alike
            assert repo.diff(item["oid"])["commit"] == item
        assert repo.commits(parent, 1, 0) == (git_log(git_dir, parent, 0, 1), True), name


def test_a_date_or_e_mail_git_cannot_read_answers_instead_of_failing(tmp_path):
    """git log prints no date for these; the page shows the epoch, not a 500."""
    git_dir = tmp_path / "crafted.git"
    GitRepo.init_bare(git_dir, "main").close()
    tree = git(git_dir, "mktree", stdin=b"").decode().strip()
    parent = None
    for ident in (b"Neg <n@x.org> -5 +0000", b"No Mail 1700000000 +0000"):
        raw = b"tree " + tree.encode() + b"\n"
        raw += b"parent " + parent.encode() + b"\n" if parent else b""
        raw += b"author " + ident + b"\ncommitter " + ident + b"\n\ncrafted\n"
        hashed = git(
            git_dir, "hash-object", "--literally", "-t", "commit", "-w", "--stdin", stdin=raw
        )
        parent = hashed.decode().strip()
    git(git_dir, "update-ref", "refs/heads/main", parent)
    with GitRepo(git_dir) as repo:
        items, more = repo.commits("main", 9, 0)
        for item in items:
            assert repo.diff(item["oid"])["commit"]["oid"] == item["oid"]
    assert [c["oid"] for c in items] == git(git_dir, "rev-list", "main").decode().split()
    assert not more and all(isinstance(c["timestamp"], int) for c in items)


def test_a_date_git_would_not_keep_is_left_to_git(tmp_path, fresh_cache):
    git_dir = tmp_path / "future.git"
    GitRepo.init_bare(git_dir, "main").close()
    # Past 2**34 seconds the commit-graph keeps the date cut short: git log answers.
    fast_import(git_dir, [("main", [], BASE_DATE), ("main", [1], 1 << 34)])
    with GitRepo(git_dir) as repo:
        assert repo.commits("main", 5, 0) == (git_log(git_dir, "main", 0, 5), False)
    assert not fresh_cache._walks


def test_cache_budget_drops_the_least_recently_used():
    cache = WalkCache(budget=100 + 3 * walk.ENTRY_BYTES)  # three entries, 100 bytes of oids
    cache.put("r", b"a", Window(0, b"x" * 40, False))
    cache.put("r", b"a", Window(7, b"x" * 20, True))  # one window a walk: the last put
    assert cache.get("r", b"a") == Window(7, b"x" * 20, True)
    cache.put("r", b"b", Window(0, b"y" * 40, True))
    cache.get("r", b"a")  # a is now the most recently used
    cache.put("r", b"c", Window(0, b"z" * 40, True))  # 100 bytes: still all three
    cache.put("r", b"d", Window(0, b"w" * 40, True))  # b goes
    assert cache.get("r", b"b") is None and cache.get("r", b"a") is not None
    cache.put("s", b"a", Window(0, b"v" * 40, True))
    cache.forget("r")
    assert cache.get("r", b"a") is None and cache.get("r", b"c") is None
    assert cache.get("s", b"a") == Window(0, b"v" * 40, True)
    assert walk.WALKS.budget == walk.CACHE_BYTES
    # Empty windows (a page past the end of history) cost their entry: still bounded.
    empties = WalkCache(budget=10 * walk.ENTRY_BYTES)
    for n in range(1000):
        empties.put("r", b"%d" % n, Window(5000, b"", True))
    assert len(empties._walks) == 10
    window = Window(10, b"a" * 40 + b"b" * 40, False)
    assert window.end == 12 and window.page(11, 12) == b"b" * 40
    assert window.covers(10, 12) and not window.covers(9, 11) and not window.covers(11, 13)
    assert Window(10, b"", True).covers(50, 80)  # past the end of history: an empty page


def test_prune_forgets_the_walks(tangled, tmp_path, fresh_cache):
    git_dir = tmp_path / "p.git"
    git(tangled, "clone", "--bare", "--quiet", str(tangled), str(git_dir))
    with GitRepo(git_dir) as repo:
        repo.commits("main", 30, 200)
        assert fresh_cache._walks
        repo.prune_unreachable()
        assert not fresh_cache._walks
        assert repo.commits("main", 30, 200)[0] == git_log(git_dir, "main", 200, 30)


def test_sizes_are_kept_and_a_listing_still_matches_ls_tree(tangled, tmp_path, monkeypatch):
    sizes: Kept[bytes, int] = Kept(4)
    monkeypatch.setattr(trees, "SIZES", sizes)
    git_dir = tmp_path / "s.git"
    git(tangled, "clone", "--bare", "--quiet", str(tangled), str(git_dir))
    listed = git(git_dir, "ls-tree", "-l", "main").decode().splitlines()
    expected = {line.split("\t")[1]: int(line.split()[3]) for line in listed}
    assert len(expected) == 7
    with GitRepo(git_dir) as repo:
        for _ in range(2):  # the second listing reads sizes kept by the first
            entries = repo.tree("main", "")
            assert {e["name"]: e["size"] for e in entries} == expected
            assert len(sizes._kept) <= sizes.most
    sizes.put(b"x" * 20, 1)
    assert sizes.get(b"x" * 20) == 1
    for n in range(sizes.most):
        sizes.put(bytes([n]) * 20, n)
    assert sizes.get(b"x" * 20) is None and len(sizes._kept) <= sizes.most


def test_items_are_kept_unless_huge(tmp_path, monkeypatch):
    items: Kept[bytes, dict] = Kept(1 << 11)
    monkeypatch.setattr(history, "ITEMS", items)
    git_dir = tmp_path / "items.git"
    GitRepo.init_bare(git_dir, "main").close()
    fast_import(git_dir, [("main", [], BASE_DATE), ("main", [1], BASE_DATE + 1)])
    tree = git(git_dir, "rev-parse", "main^{tree}").decode().strip()
    tip = git(git_dir, "rev-parse", "main").decode().strip()
    huge = git(git_dir, "commit-tree", tree, "-p", tip, "-m", "x" * 3000).decode().strip()
    git(git_dir, "update-ref", "refs/heads/main", huge)
    with GitRepo(git_dir) as repo:
        for _ in range(2):
            # The first read walks in-process; the second reads items through the window.
            assert repo.commits(huge, 3, 0) == (git_log(git_dir, huge, 0, 3), False)
        assert items.get(tip.encode()) == git_log(git_dir, tip, 0, 1)[0]
        assert items.get(huge.encode()) is None  # 3,000 bytes of message: read each time


def test_a_crafted_octopus_is_left_to_git_and_not_kept(tmp_path, fresh_cache, monkeypatch):
    """Thousands of parents would cost a read each in-process and fill the item cache."""
    monkeypatch.setattr(history, "ITEMS", Kept(1 << 11))
    git_dir = tmp_path / "octopus.git"
    GitRepo.init_bare(git_dir, "main").close()
    roots = [(f"r{n}", [], BASE_DATE + n) for n in range(60)]
    fast_import(git_dir, [*roots, ("main", list(range(1, 61)), BASE_DATE + 100)])
    tip = git(git_dir, "rev-parse", "main").decode().strip()
    with GitRepo(git_dir) as repo:
        assert repo.commits("main", 30, 0) == (git_log(git_dir, "main", 0, 30), True)
    assert not fresh_cache._walks  # git answered: no in-process walk was kept
    assert history.ITEMS.get(tip.encode()) is None  # 60 parents: too big an item to keep


def test_a_push_of_many_refs_walks_few_tips_once(tangled, fresh_cache):
    tips = git(tangled, "rev-parse", "main", "a", "b", "c").decode().split()
    with GitRepo(tangled) as repo:
        repo.keep_history([tips[0]] * 1000 + tips)  # a push of 1,000 refs to one commit
    kept = [t for t in tips if fresh_cache.get(str(tangled), t.encode()) is not None]
    assert kept == tips[: history.KEEP_TIPS]
    window = fresh_cache.get(str(tangled), tips[0].encode())
    assert window.oids == git(tangled, "rev-list", "main").replace(b"\n", b"")
