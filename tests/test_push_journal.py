"""A push that lands while the server dies is recorded at the next start."""

from __future__ import annotations

import asyncio
import os
import signal
import time

from hubsvc.app import create_app
from hubsvc.git.files import REPO_FILES
from hubsvc.keys import STORE
from hubsvc.services.pushes import clean_quarantines

from .conftest import make_config, sign_up
from .gitcli import git, remote
from .server import ServerProcess, seed_owner
from .test_repos import create


async def test_a_push_left_in_flight_is_reconciled_at_start(aiohttp_client, tmp_path):
    config = make_config(tmp_path)
    client = await aiohttp_client(create_app(config))
    alice = await sign_up(client, "alice")
    repo = await create(client, alice, "proj")
    work = tmp_path / "w"
    await git("init", "-q", "-b", "main", str(work))
    await git("commit", "-q", "--allow-empty", "-m", "one", cwd=work)
    await git("push", "-q", remote(client, alice, "alice", "proj"), "main", cwd=work)
    app = client.app
    files, store = app[REPO_FILES], app[STORE]
    # What a kill mid-push leaves: the push journalled, then git moves the ref, and the
    # server never records it.
    refs = await files.run(int(repo["id"]), lambda g: g.head_oids())
    await store.repos.push_started(int(repo["id"]), alice.id, refs)
    for n in range(3):
        await git("commit", "-q", "--allow-empty", "-m", f"late {n}", cwd=work)
    await git(
        "push", "-q", str(files.path(int(repo["id"]))), "main", "main:refs/heads/side", cwd=work
    )
    await client.close()

    restarted = await aiohttp_client(create_app(config))
    resp = await restarted.get("/api/repositories/alice/proj/events")
    pushes = [e for e in (await resp.json())["events"] if e["type"] == "push"]
    assert [(p["data"]["ref"], p["data"]["totalCommits"]) for p in pushes] == [
        ("refs/heads/main", 1),
        ("refs/heads/main", 3),
        ("refs/heads/side", 3),
    ]
    assert pushes[1]["actor"]["username"] == "alice"
    assert pushes[2]["data"]["created"] is True
    assert await restarted.app[STORE].repos.pushes_in_flight() == []


async def test_a_live_push_after_a_dead_one_leaves_the_dead_one_to_record(aiohttp_client, tmp_path):
    # A push journalled by a process that died moved main; before the start that
    # reconciles it, a live push of another branch is recorded. It must move the refs
    # seen by its own update only, so the dead push's main still shows and is recorded.
    config = make_config(tmp_path)
    client = await aiohttp_client(create_app(config))
    alice = await sign_up(client, "alice")
    repo = await create(client, alice, "proj")
    url = remote(client, alice, "alice", "proj")
    work = tmp_path / "w"
    await git("init", "-q", "-b", "main", str(work))
    await git("commit", "-q", "--allow-empty", "-m", "one", cwd=work)
    await git("push", "-q", url, "main", cwd=work)
    files, store = client.app[REPO_FILES], client.app[STORE]
    refs = await files.run(int(repo["id"]), lambda g: g.head_oids())
    await store.repos.push_started(int(repo["id"]), alice.id, refs)  # its process dies
    await git("commit", "-q", "--allow-empty", "-m", "dead", cwd=work)
    await git("push", "-q", str(files.path(int(repo["id"]))), "main", cwd=work)
    await git("checkout", "-q", "-b", "topic", cwd=work)
    await git("commit", "-q", "--allow-empty", "-m", "live", cwd=work)
    await git("push", "-q", url, "topic", cwd=work)  # recorded by the server, live
    await client.close()

    restarted = await aiohttp_client(create_app(config))
    resp = await restarted.get("/api/repositories/alice/proj/events")
    pushes = [e for e in (await resp.json())["events"] if e["type"] == "push"]
    assert sorted((p["data"]["ref"], p["data"]["totalCommits"]) for p in pushes) == [
        ("refs/heads/main", 1),
        ("refs/heads/main", 1),
        ("refs/heads/topic", 1),
    ]
    assert await restarted.app[STORE].repos.pushes_in_flight() == []


def test_abandoned_quarantines_are_removed(tmp_path):
    objects = tmp_path / "000" / "1.git" / "objects"
    old, fresh = objects / "tmp_objdir-incoming-old", objects / "tmp_objdir-incoming-new"
    for folder in (old, fresh):
        (folder / "pack").mkdir(parents=True)
        (folder / "pack" / "x.pack").write_bytes(b"x" * 100)
    past = time.time() - 7200
    os.utime(old, (past, past))
    assert clean_quarantines(tmp_path) == 1
    assert not old.exists() and fresh.exists()


async def test_sigkill_during_pushes_loses_no_push_event(tmp_path):
    server = ServerProcess(tmp_path / "data")
    await asyncio.to_thread(server.start)
    headers, url = await asyncio.to_thread(seed_owner, server)
    work = tmp_path / "w"
    await git("init", "-q", "-b", "main", str(work))
    script = "".join(
        f"commit refs/heads/main\ncommitter T <t@example.com> {1700000000 + n} +0000\n"
        f"data <<EOT\nc{n}\nEOT\nM 100644 inline f{n % 50}.txt\ndata 4\n{n:03d}\n\n"
        for n in range(300)
    )
    await git("fast-import", "--quiet", cwd=work, stdin=script.encode())
    bare = next((tmp_path / "data" / "repositories").glob("*/*.git"))
    push = asyncio.ensure_future(git("push", url, "main", cwd=work, check=False))
    # Kill the server the moment the branch exists on disk: git has applied the push.
    for _ in range(20000):
        code, _, _ = await git(
            "--git-dir", str(bare), "rev-parse", "--verify", "-q", "refs/heads/main", check=False
        )
        if code == 0:
            break
    server.proc.send_signal(signal.SIGKILL)
    await push
    await asyncio.to_thread(server.stop, signal.SIGKILL)
    restarted = ServerProcess(tmp_path / "data", server.settings)
    await asyncio.to_thread(restarted.start)
    try:
        status, feed = await asyncio.to_thread(
            restarted.request, "GET", "/api/repositories/owner/proj/events"
        )
    finally:
        await asyncio.to_thread(restarted.stop)
    pushes = [e for e in feed["events"] if e["type"] == "push"]
    assert len(pushes) == 1 and pushes[0]["data"]["totalCommits"] == 300


async def test_a_head_lock_left_by_a_killed_process_does_not_block_head_for_good(
    aiohttp_client, tmp_path
):
    """A process SIGKILLed while it set HEAD (a first push's default branch) left HEAD.lock:
    the recovery of its push set HEAD again and failed on that lock at every try. A lock
    older than any writer holds one is removed; a fresh one is still respected."""
    client = await aiohttp_client(create_app(make_config(tmp_path)))
    alice = await sign_up(client, "alice")
    repo_id = int((await create(client, alice, "proj"))["id"])
    files = client.app[REPO_FILES]
    lock = files.path(repo_id) / "HEAD.lock"
    lock.write_text("ref: refs/heads/half\n")
    try:
        await files.run(repo_id, lambda g: g.set_default_branch("dev"))
        fresh_refused = False
    except Exception:
        fresh_refused = True
    assert fresh_refused  # a live writer's lock: not taken from it
    past = time.time() - 60  # STALE_LOCK_SECONDS is 2
    os.utime(lock, (past, past))
    await files.run(repo_id, lambda g: g.set_default_branch("dev"))
    assert await files.run(repo_id, lambda g: g.default_branch()) == "dev"
    assert not lock.exists()
    await files.run(repo_id, lambda g: g.set_default_branch("dev"))  # already: no lock taken
