"""A git answer that fails after it began ends as git's own error, never as a broken transfer."""

from __future__ import annotations

import asyncio
import os


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
    from .conftest import sign_up
    from .gitcli import remote
    from .test_repos import create
    from hubsvc.repofiles import REPO_FILES

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
    code, _, err = await git("clone", remote(client, alice, "alice", "proj"),
                             str(tmp_path / "c"), check=False)
    assert code != 0
    assert blob in err or "unable to read" in err or "remote error" in err, err
    assert "chunked" not in err, err
