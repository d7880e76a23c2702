"""The pre-receive hook and the server's FIFOs when something fails: the push is refused, nothing waits."""

from __future__ import annotations

import asyncio
import os
import socket

from .test_push_decisions import UPDATE, _hook


async def test_a_hook_whose_cat_fails_refuses_the_push(tmp_path):
    """git's updates lost on the way (cat failing): the server must not judge an empty push."""
    from hubsvc.git.hook_fifos import HookFifos

    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "cat").write_text("#!/bin/sh\nexit 1\n")
    (bin_ / "cat").chmod(0o755)
    server = HookFifos(tmp_path / "run")
    await server.start()

    async def protect(updates, quarantine):
        return ["push refused: main is protected"] if updates else []

    try:
        with server.push(protect) as env:
            code, _ = await _hook({**env, "PATH": f"{bin_}:{os.environ['PATH']}"}, UPDATE)
        assert code == 1
    finally:
        await server.stop()


async def test_a_decide_cancelled_from_within_still_refuses(tmp_path):
    """A CancelledError out of decide (not the push's end): the hook reads no answer and refuses."""
    from hubsvc.git.hook_fifos import HookFifos

    server = HookFifos(tmp_path / "run")
    await server.start()

    async def decide(updates, quarantine):
        inner = asyncio.ensure_future(asyncio.sleep(3600))
        asyncio.get_running_loop().call_soon(inner.cancel)
        return await inner

    try:
        with server.push(decide) as env:
            assert (await _hook(env, UPDATE))[0] == 1
    finally:
        await server.stop()


async def test_a_start_keeps_the_folders_of_another_host(tmp_path):
    """A data folder shared over NFS: another host's pids are not this host's to judge."""
    from hubsvc.git.hook_fifos import HookFifos

    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    other = run / f"push-{2**22 + 7}-not-{socket.gethostname()}-xyz"  # no such pid here
    other.mkdir()
    server = HookFifos(run)
    await server.start()
    try:
        assert other.exists()
    finally:
        await server.stop()
