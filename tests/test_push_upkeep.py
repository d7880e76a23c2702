"""A push seen from outside: the commit-graph written after its answer, its event, and
the pre-receive size check on a push big enough that git keeps it as a pack."""

from __future__ import annotations

import asyncio
import logging
import os
import struct
from pathlib import Path

from hubsvc.git.files import REPO_FILES
from hubsvc.git.push_checks import count_commits, parse_commands

from .conftest import sign_up
from .gitcli import git, remote
from .test_git_limits import limited_client, push_files
from .test_repos import create


def graph_commits(folder: Path) -> int:
    """How many commits objects/info/commit-graph holds (0 when there is none)."""
    try:
        data = (folder / "objects" / "info" / "commit-graph").read_bytes()
    except FileNotFoundError:
        return 0
    assert data[:4] == b"CGPH"
    for at in range(8, 8 + 12 * data[6], 12):  # the chunk table: id, offset
        chunk, offset = struct.unpack(">4sQ", data[at : at + 12])
        if chunk == b"OIDF":  # 256 fan-out counts; the last is the total
            return struct.unpack(">I", data[offset + 1020 : offset + 1024])[0]
    raise AssertionError("commit-graph without an OID fan-out chunk")


async def graph_reaches(folder: Path, commits: int, timeout: float = 10.0) -> int:
    """Wait until the commit-graph holds commits commits; how many it holds then."""
    deadline = asyncio.get_running_loop().time() + timeout
    while graph_commits(folder) < commits and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.02)
    return graph_commits(folder)


async def test_each_push_brings_its_event_and_then_the_commit_graph(
    client, events, alice, tmp_path
):
    repo = await create(client, alice, "demo")
    folder = client.app[REPO_FILES].path(int(repo["id"]))
    work = tmp_path / "w"
    await push_files(client, alice, work, "demo", {"a.txt": b"a\n"}, message="one")
    await push_files(client, alice, work, "demo", {"b.txt": b"b\n"}, message="two")
    assert await graph_reaches(folder, 2) == 2
    code, _, _ = await git(f"--git-dir={folder}", "commit-graph", "verify", check=False)
    assert code == 0
    # The event of each push, as before: the second brought one commit on top of the first.
    await events.wait_for(2)
    second = [e for e in events.of("push") if e.data["before"] != "0" * 40]
    assert [c["message"].strip() for c in second[0].data["commits"]] == ["two"]
    listed = await client.get("/api/repositories/alice/demo/events", headers=alice.headers)
    assert [e["type"] for e in (await listed.json())["events"]].count("push") == 2


async def test_a_packed_push_with_a_file_over_the_limit_is_refused_naming_it(
    aiohttp_client, tmp_path
):
    client = await limited_client(aiohttp_client, tmp_path, max_object_bytes=5000)
    alice = await sign_up(client, "alice")
    await create(client, alice, "demo")
    work = tmp_path / "w"
    # Over receive.unpackLimit (100 objects), so git keeps the push as a pack in its
    # quarantine rather than as loose objects; the big file, three copies of a small
    # one, goes in it as a delta, whose full size only the delta's own header gives.
    seed = os.urandom(4000)
    files = {f"docs/{n:03}.txt": f"page {n}\n".encode() for n in range(150)}
    files |= {"seed.txt": seed, "big/grown.txt": seed * 3}
    code, _, err = await push_files(client, alice, work, "demo", files, check=False)
    assert code != 0
    assert "remote: error: big/grown.txt is 0.0 MiB" in err and "pre-receive hook declined" in err
    branches = await (await client.get("/api/repositories/alice/demo/branches")).json()
    assert branches["branches"] == []  # no ref moved
    # Without it the same push goes through.
    await git("rm", "-q", "--cached", "big/grown.txt", cwd=work)
    await git("commit", "-q", "--amend", "-m", "files", cwd=work)
    await git("push", "-q", remote(client, alice, "alice", "demo"), "main", cwd=work)
    branches = await (await client.get("/api/repositories/alice/demo/branches")).json()
    assert [b["name"] for b in branches["branches"]] == ["main"]


async def test_a_file_over_the_limit_that_compresses_to_nothing_is_refused_all_the_same(
    aiohttp_client, tmp_path
):
    """The size checked is the file's, not what it takes in the pack: zeros, loose and packed."""
    client = await limited_client(aiohttp_client, tmp_path, max_object_bytes=5000)
    alice = await sign_up(client, "alice")
    await create(client, alice, "loose")
    await create(client, alice, "packed")
    zeros = bytes(200_000)  # a few hundred bytes deflated
    code, _, err = await push_files(
        client, alice, tmp_path / "loose", "loose", {"zeros.bin": zeros}, check=False
    )
    assert code != 0 and "remote: error: zeros.bin is 0.2 MiB" in err, err
    # Over receive.unpackLimit: kept as a pack, the file's entry a few hundred bytes.
    files = {f"docs/{n:03}.txt": f"page {n}\n".encode() for n in range(150)}
    code, _, err = await push_files(
        client, alice, tmp_path / "packed", "packed", {**files, "zeros.bin": zeros}, check=False
    )
    assert code != 0 and "remote: error: zeros.bin is 0.2 MiB" in err, err
    for name in ("loose", "packed"):
        branches = await (await client.get(f"/api/repositories/alice/{name}/branches")).json()
        assert branches["branches"] == []  # no ref moved


async def test_push_timing_is_logged_when_asked(client, alice, tmp_path, caplog):
    await create(client, alice, "demo")
    with caplog.at_level(logging.DEBUG, logger="hubsvc.push.timing"):
        await push_files(client, alice, tmp_path / "w", "demo", {"a.txt": b"a\n"})
        deadline = asyncio.get_running_loop().time() + 10
        while not caplog.records and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)
    line = caplog.records[0].getMessage()
    for phase in (
        "journal=",
        "git=",
        "transaction=",
        "answer=",
        "commit-graph=",
        "git.pre-receive=",
    ):
        assert phase in line


async def test_the_server_counts_what_each_branch_update_brings(tmp_path):
    work = tmp_path / "w"
    await git("init", "-q", "-b", "main", str(work))
    for n in range(3):
        await git("commit", "-q", "--allow-empty", "-m", f"main {n}", cwd=work)
    main = (await git("rev-parse", "main", cwd=work))[1].strip()
    await git("checkout", "-qb", "topic", cwd=work)
    await git("commit", "-q", "--allow-empty", "-m", "topic", cwd=work)
    topic = (await git("rev-parse", "topic", cwd=work))[1].strip()
    # Two more new branches, counted in the same walk as topic: one forks from topic's
    # parent with a merge of topic, one sits on a commit main already has.
    await git("checkout", "-qb", "side", "main", cwd=work)
    for n in range(2):
        await git("commit", "-q", "--allow-empty", "-m", f"side {n}", cwd=work)
    await git("merge", "-q", "--no-ff", "-m", "merge topic", "topic", cwd=work)
    side = (await git("rev-parse", "side", cwd=work))[1].strip()
    await git("checkout", "-q", "--detach", cwd=work)
    for branch in ("topic", "side"):  # as before the push
        await git("update-ref", "-d", f"refs/heads/{branch}", cwd=work)
    zero, first = "0" * 40, (await git("rev-parse", "main~2", cwd=work))[1].strip()
    updates = [
        (first, main, "refs/heads/main"),
        (zero, topic, "refs/heads/topic"),
        (zero, side, "refs/heads/side"),
        (zero, first, "refs/heads/old"),
        (zero, main, "refs/tags/v1"),
        (main, zero, "refs/heads/gone"),
    ]
    counts = await count_commits(work / ".git", {}, updates)
    # main moved two commits; the new topic brings the one commit no branch had, side
    # its two, the merge and topic's. old is on main already: left to the server.
    assert counts == {
        (first, main, "refs/heads/main"): 2,
        (zero, topic, "refs/heads/topic"): 1,
        (zero, side, "refs/heads/side"): 4,
    }


def test_the_commands_and_the_pack_size_are_read_from_the_start_of_a_push_body():
    zero, one, two = "0" * 40, "1" * 40, "2" * 40

    def pkt(text: bytes) -> bytes:
        return f"{len(text) + 4:04x}".encode() + text

    commands = pkt(f"{zero} {one} refs/heads/main\0report-status side-band-64k".encode())
    commands += pkt(f"{one} {two} refs/tags/v1\n".encode()) + b"0000"
    pack = b"PACK" + (2).to_bytes(4, "big") + (150).to_bytes(4, "big")
    assert parse_commands(commands + pack + b"x" * 50) == (
        [(zero, one, "refs/heads/main"), (one, two, "refs/tags/v1")],
        150,
    )
    assert parse_commands(commands) == (  # the pack's header not in yet
        [(zero, one, "refs/heads/main"), (one, two, "refs/tags/v1")],
        None,
    )
    assert parse_commands(commands[:50]) == (None, None)  # commands past the head
    certificate = pkt(b"push-cert\0report-status") + pkt(b"certificate version 0.1\n")
    assert parse_commands(certificate + b"0000" + pack) == (None, None)


async def test_a_packed_push_is_checked_while_git_walks_its_history(
    client, events, alice, tmp_path, caplog
):
    """Over receive.unpackLimit, the size check and the counts start once index-pack's
    pack lands, before receive-pack runs the hook; the hook only asks."""
    await create(client, alice, "early")
    files = {f"docs/{n:03}.txt": f"page {n}\n".encode() for n in range(150)}
    with caplog.at_level(logging.DEBUG, logger="hubsvc.push.timing"):
        await push_files(client, alice, tmp_path / "w", "early", files)
        deadline = asyncio.get_running_loop().time() + 10
        while not caplog.records and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)
    assert "early-checks=" in caplog.records[0].getMessage()
    await events.wait_for(1)
    assert [e.data["totalCommits"] for e in events.of("push")] == [1]


async def test_a_pushed_branch_is_walked_once_so_its_deep_pages_need_no_git_log(
    client, alice, tmp_path
):
    from hubsvc.git.repo import GitRepo
    from hubsvc.git.walk import WALKS

    from .test_git_browse_caches import fast_import, tangled_history
    from .test_git_browse_caches import git as git_in

    repo = await create(client, alice, "deep")
    folder = client.app[REPO_FILES].path(int(repo["id"]))
    local = tmp_path / "local.git"
    GitRepo.init_bare(local, "main").close()
    fast_import(local, tangled_history(400, seed=3))  # forks, octopus merges, clock skew
    url = remote(client, alice, "alice", "deep")
    await git(f"--git-dir={local}", "push", "-q", url, "refs/heads/*:refs/heads/*")
    tip = git_in(local, "rev-parse", "main").decode().strip()
    deadline = asyncio.get_running_loop().time() + 10
    while (window := WALKS.get(str(folder), tip.encode())) is None:
        assert asyncio.get_running_loop().time() < deadline, "the new tip was not walked"
        await asyncio.sleep(0.02)
    # The whole walk from position 0, in git's order, before anyone asked for a page.
    assert window.first == 0 and window.complete
    assert window.oids == git_in(local, "rev-list", "main").replace(b"\n", b"")
    resp = await client.get("/api/repositories/alice/deep/commits?branch=main&skip=300&limit=30")
    page = [c["oid"] for c in (await resp.json())["commits"]]
    assert (
        page == git_in(local, "log", "--skip=300", "-n30", "--format=%H", "main").decode().split()
    )
    assert page == [
        o.decode() for o in git_in(local, "rev-list", "--skip=300", "-n30", "main").split()
    ]


async def test_one_push_that_moves_a_branch_and_makes_another_lands_with_both_counts(
    client, events, alice, tmp_path
):
    """The hook's size check, the new branch's walk and the moved branch's count run one
    after another on pipes whose numbers are reused: each output read as its own."""
    await create(client, alice, "both")
    work = tmp_path / "w"
    await push_files(client, alice, work, "both", {"a.txt": b"a\n"}, message="one")
    await events.wait_for(1)
    for n in range(2):
        (work / f"m{n}.txt").write_text("m\n")
        await git("add", "-A", cwd=work)
        await git("commit", "-qm", f"main {n}", cwd=work)
    await git("checkout", "-qb", "feature", cwd=work)
    for n in range(3):
        (work / f"f{n}.txt").write_text(f"feature {n}\n")
        await git("add", "-A", cwd=work)
        await git("commit", "-qm", f"feature {n}", cwd=work)
    await git("push", "-q", remote(client, alice, "alice", "both"), "main", "feature", cwd=work)
    await events.wait_for(3)
    totals = {e.data["ref"]: e.data["totalCommits"] for e in events.of("push")[1:]}
    # feature brings what no branch had before the push: main's two new commits too.
    assert totals == {"refs/heads/main": 2, "refs/heads/feature": 5}, totals
