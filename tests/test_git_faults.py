"""A git answer that fails after it began ends as git's own error, never as a broken transfer."""

from __future__ import annotations

import asyncio
import os
import sqlite3
from pathlib import Path

from .gitcli import git
from .server import ServerProcess, seed_owner


async def test_a_push_that_fills_the_disk_fails_as_a_git_error(small_disk, tmp_path):
    server = ServerProcess(small_disk / "data")
    server.log_path = tmp_path / "server.log"
    await asyncio.to_thread(server.start)
    try:
        headers, url = await asyncio.to_thread(seed_owner, server)
        work = tmp_path / "w"
        await git("init", "-q", "-b", "main", str(work))
        (work / "big.bin").write_bytes(os.urandom(9 * 1024 * 1024))
        await git("add", "-A", cwd=work)
        await git("commit", "-qm", "too big for the disk", cwd=work)
        code, _, err = await git("push", url, "main", cwd=work, check=False)
        assert code != 0
        assert "No space left on device" in err or "the server failed" in err, err
        assert "chunked" not in err and "Everything up-to-date" not in err, err
        # Nothing moved, and the server goes on answering.
        code, out, _ = await git("ls-remote", url, check=False)
        assert code == 0 and "refs/heads/main" not in out
    finally:
        await asyncio.to_thread(server.stop)
    assert "Traceback" not in server.logs()


async def test_a_clone_that_fails_midway_says_why(client, tmp_path):
    from hubsvc.git.files import REPO_FILES

    from .conftest import sign_up
    from .gitcli import remote
    from .test_repos import create

    alice = await sign_up(client, "alice")
    repo = await create(client, alice, "proj")
    work = tmp_path / "w"
    await git("init", "-q", "-b", "main", str(work))
    (work / "a.txt").write_text("a\n")
    (work / "b.txt").write_text("b\n")
    await git("add", "-A", cwd=work)
    await git("commit", "-qm", "one", cwd=work)
    await git("push", "-q", remote(client, alice, "alice", "proj"), "main", cwd=work)
    # A damaged object store: upload-pack starts answering, then cannot read a blob.
    blob = (await git("rev-parse", "HEAD:b.txt", cwd=work))[1].strip()
    bare = client.app[REPO_FILES].path(int(repo["id"]))
    (bare / "objects" / blob[:2] / blob[2:]).unlink()
    code, _, err = await git(
        "clone", remote(client, alice, "alice", "proj"), str(tmp_path / "c"), check=False
    )
    assert code != 0
    assert blob in err or "unable to read" in err or "remote error" in err, err
    assert "chunked" not in err, err


async def _pushed_once(server: ServerProcess, tmp_path) -> tuple[dict, str, Path, str]:
    """The owner's repository with main pushed, and a local commit on top not yet pushed."""
    headers, url = await asyncio.to_thread(seed_owner, server)
    work = tmp_path / "w"
    await git("init", "-q", "-b", "main", str(work))
    (work / "a.txt").write_text("a\n")
    await git("add", "-A", cwd=work)
    await git("commit", "-qm", "one", cwd=work)
    await git("push", "-q", url, "main", cwd=work)
    before = (await git("ls-remote", url, cwd=work))[1]
    (work / "b.txt").write_text("b\n")
    await git("add", "-A", cwd=work)
    await git("commit", "-qm", "two", cwd=work)
    return headers, url, work, before


def _refused_by_the_server(code: int, err: str, reason: str) -> None:
    """git printed the server's reason as its own `remote:` line and failed."""
    assert code != 0, err
    assert any(line.startswith("remote:") and reason in line for line in err.splitlines()), err
    assert "RPC failed" not in err and "HTTP 50" not in err, err
    assert "Everything up-to-date" not in err, err


async def _nothing_moved(server: ServerProcess, url: str, work: Path, before: str) -> None:
    """The refs are as they were, no push file stayed behind, and the push now lands."""
    assert (await git("ls-remote", url, cwd=work))[1] == before
    assert not list((server.data_dir / "tmp").iterdir())
    await git("push", "-q", url, "main", cwd=work)


async def test_a_push_onto_a_full_disk_prints_the_servers_reason(small_disk, tmp_path):
    from .test_faults import _fill

    server = ServerProcess(small_disk / "data")
    server.log_path = tmp_path / "server.log"
    await asyncio.to_thread(server.start)
    try:
        headers, url, work, before = await _pushed_once(server, tmp_path)
        filler = _fill(small_disk)
        # Small writes until the database has no page left, as the push journal's is.
        for n in range(200):
            status, _ = await asyncio.to_thread(
                server.request,
                "POST",
                "/api/repositories/owner/proj/issues",
                {"title": f"t{n}"},
                headers,
            )
            if status != 201:
                break
        assert status == 507
        code, _, err = await git("push", url, "main", cwd=work, check=False)
        _refused_by_the_server(code, err, "the server's disk is full")
        filler.unlink()  # with room again, the push lands
        (small_disk / "crumbs").unlink()
        await _nothing_moved(server, url, work, before)
    finally:
        await asyncio.to_thread(server.stop)
    assert "Traceback" not in server.logs()


async def test_a_push_into_a_locked_database_prints_the_servers_reason(tmp_path):
    server = ServerProcess(tmp_path / "data", {"database": {"write_timeout_ms": 300}})
    await asyncio.to_thread(server.start)
    try:
        _, url, work, before = await _pushed_once(server, tmp_path)
        holder = sqlite3.connect(tmp_path / "data" / "hubsvc.db", isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
        try:
            code, _, err = await git("push", url, "main", cwd=work, check=False)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        _refused_by_the_server(code, err, "the database is busy, try again")
        await _nothing_moved(server, url, work, before)
    finally:
        await asyncio.to_thread(server.stop)
    assert "Traceback" not in server.logs()
