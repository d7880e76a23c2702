"""The pre-receive hook (sh) and the server's FIFOs: only a push the server runs is
answered, and when something fails the push is refused and nothing waits."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
from pathlib import Path

import pytest


async def _hook(env: dict[str, str], stdin: bytes) -> tuple[int, str]:
    """The pre-receive hook the server writes, run as git runs it: (exit code, output)."""
    from hubsvc.git.push_hooks import hooks_text

    proc = await asyncio.create_subprocess_exec(
        "sh",
        "-c",
        hooks_text()["pre-receive"],
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env={"PATH": os.environ["PATH"], **env},
    )
    out, _ = await asyncio.wait_for(proc.communicate(stdin), 30)
    return proc.returncode, out.decode()


UPDATE = f"{'1' * 40} {'2' * 40} refs/heads/main\n".encode()


async def test_the_hook_reaches_only_a_push_the_server_runs(tmp_path):
    """No folder, a folder of a push that ended, or another process's pid: refused."""
    from hubsvc.git.hook_fifos import HookFifos

    server = HookFifos(tmp_path / "run")
    await server.start()
    asked = []

    async def accept(updates, quarantine):
        asked.append((updates, quarantine))
        return []

    async def refuse(updates, quarantine):
        return ["error: not " + updates[0][2]]

    quarantine = {"GIT_QUARANTINE_PATH": "/q uar\tantine", "GIT_OBJECT_DIRECTORY": "/o"}
    try:
        with server.push(accept) as env:
            folder = Path(env["HUBSVC_HOOK_DIR"])
            assert oct(folder.stat().st_mode & 0o777) == "0o700"
            assert oct((folder / "ask").stat().st_mode & 0o777) == "0o600"
            code, said = await _hook({}, UPDATE)
            assert code == 1 and "did not come through the server" in said
            code, said = await _hook({**env, "HUBSVC_HOOK_PID": "999999999"}, UPDATE)
            assert code == 1 and "did not come through the server" in said
            assert asked == []
            assert await _hook({**env, **quarantine}, UPDATE) == (0, "")
            assert asked == [([("1" * 40, "2" * 40, "refs/heads/main")], quarantine)]
        assert not folder.exists()
        assert (await _hook(env, UPDATE))[0] == 1  # the push is over: its folder is gone
        with server.push(refuse) as env:
            assert await _hook(env, UPDATE) == (1, "error: not refs/heads/main\n")
        with server.push(accept) as env:
            assert await _hook(env, b"not an update\n") == (
                1,
                "hubsvc: malformed ref update from the hook\n",
            )
        assert server.waiting == 0 and list((tmp_path / "run").iterdir()) == []
    finally:
        await server.stop()


async def test_a_hook_left_waiting_by_a_dead_server_is_released_by_the_next_start(tmp_path):
    """A push folder of a process that died: its hook refuses, no process is left behind."""
    from hubsvc.git.hook_fifos import HookFifos, folder_prefix

    dead = subprocess.Popen(["true"])  # a pid that has just exited
    dead.wait()
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    # As a killed server leaves it: the FIFOs, nobody holding them open.
    folder = run / (folder_prefix().replace(f"-{os.getpid()}-", f"-{dead.pid}-", 1) + "left")
    folder.mkdir()
    os.mkfifo(folder / "ask")
    os.mkfifo(folder / "answer")
    proc = await asyncio.create_subprocess_exec(
        "sh",
        "-c",
        # The hook past its liveness check (the server died just after it): opening the
        # answer's end waits for a writer that will never come.
        f'exec 3<"{folder}/answer"; IFS= read -r verdict <&3; echo "[$verdict]"; exit 1',
        stdout=asyncio.subprocess.PIPE,
    )
    await asyncio.sleep(0.2)
    assert proc.returncode is None  # still waiting
    server = HookFifos(run)
    await server.start()
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), 10)
        assert (proc.returncode, out) == (1, b"[]\n")
        assert not folder.exists()
    finally:
        await server.stop()


async def test_a_start_keeps_the_push_folders_of_a_live_process(tmp_path):
    from hubsvc.git.hook_fifos import HookFifos

    first, second = HookFifos(tmp_path / "run"), HookFifos(tmp_path / "run")
    await first.start()

    async def accept(updates, quarantine):
        return []

    try:
        with first.push(accept) as env:
            await second.start()  # another process on the same data folder
            assert await _hook(env, UPDATE) == (0, "")
    finally:
        await first.stop()
        await second.stop()


async def test_a_long_question_is_refused_after_it_is_read(tmp_path, monkeypatch):
    from hubsvc.git import hook_fifos

    monkeypatch.setattr(hook_fifos, "QUESTION_BYTES", 300_000)
    server = hook_fifos.HookFifos(tmp_path / "run")
    await server.start()

    async def accept(updates, quarantine):
        return []

    try:
        with server.push(accept) as env:
            # More than a FIFO holds: the server reads on while the hook writes.
            code, said = await _hook(env, UPDATE * 4000)
            assert (code, said) == (1, "hubsvc: the hook's question is too long\n")
    finally:
        await server.stop()


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


async def test_a_data_folder_without_fifos_stops_the_start_with_a_clear_reason(
    tmp_path, monkeypatch
):
    """mkfifo refused (some network file systems): HooksUnusable, nothing left behind."""
    import errno

    from hubsvc.git import hook_fifos
    from hubsvc.git.push_hooks import install_hooks

    def no_fifos(path, mode=0o666):
        raise OSError(errno.EPERM, "Operation not permitted", str(path))

    hooks = install_hooks(tmp_path / "git-hooks")
    server = hook_fifos.HookFifos(tmp_path / "run")
    await server.start()
    monkeypatch.setattr(hook_fifos.os, "mkfifo", no_fifos)
    try:
        with pytest.raises(hook_fifos.HooksUnusable, match="Operation not permitted") as exc:
            await server.trial(hooks)
        assert "cannot make the folder its git hooks ask through" in str(exc.value)
        assert list((tmp_path / "run").iterdir()) == [] and server.waiting == 0
    finally:
        await server.stop()
