"""Git's hooks run and ask the server: on README's install, and at the moment refs move."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from hubsvc.git.files import REPO_FILES
from hubsvc.keys import CONFIG

from .gitcli import ENV, git, remote
from .server import ROOT, ServerProcess, free_port
from .test_accounts import TOKENS, new_pat
from .test_repos import create

REPO = "/api/repositories/alice/proj"


def _git(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["git", *args],
        cwd=cwd,
        env={**os.environ, **ENV},
        capture_output=True,
        text=True,
        timeout=60,
    )


def _call(url: str, method: str, path: str, body=None, token: str | None = None):
    req = urllib.request.Request(
        url + path,
        data=json.dumps(body).encode() if body is not None else None,
        method=method,
        headers={
            "Content-Type": "application/json",
            **({"Authorization": f"Bearer {token}"} if token else {}),
        },
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if raw else {}
    except urllib.error.HTTPError as err:
        raw = err.read()
        return err.code, json.loads(raw) if raw else {}


def test_readmes_first_command_runs_the_hooks(tmp_path):
    """`python run.py` in a folder of its own keeps the data in ./data; git still runs the
    hooks: a protected branch refuses a direct push, and a push becomes an event."""
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    (checkout / "run.py").symlink_to(ROOT / "run.py")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUBSVC_")}
    # README's command as written; only what a test must change comes from the
    # environment (a free port, fast password hashing, no rate limit).
    env.update(
        PYTHONPATH=str(ROOT),
        HUBSVC_SERVER_PORT=str(port),
        HUBSVC_SECURITY_BCRYPT_ROUNDS="4",
        HUBSVC_RATE_LIMIT_ENABLED="false",
    )
    log = open(tmp_path / "server.log", "wb")
    proc = subprocess.Popen(
        [sys.executable, "run.py"],
        cwd=checkout,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, (tmp_path / "server.log").read_text()
            try:
                with urllib.request.urlopen(url + "/health", timeout=1):
                    break
            except OSError:
                assert time.monotonic() < deadline, (tmp_path / "server.log").read_text()
                time.sleep(0.05)
        assert (checkout / "data" / "hubsvc.db").is_file()  # ./data, relative to where it ran

        status, body = _call(
            url,
            "POST",
            "/auth/sign-up",
            {"email": "o@example.com", "username": "owner", "password": "12345678", "name": "O"},
        )
        assert status == 201, body
        token = body["token"]
        assert _call(url, "POST", "/api/repositories", {"name": "proj"}, token)[0] == 201
        remote = url.replace("http://", "http://owner:12345678@") + "/owner/proj.git"
        work = tmp_path / "work"
        assert _git("clone", "-q", remote, str(work), cwd=tmp_path).returncode == 0
        _git("commit", "-q", "--allow-empty", "-m", "first", cwd=work)
        pushed = _git("push", "-q", "origin", "HEAD:main", cwd=work)
        assert pushed.returncode == 0, pushed.stderr
        rule = {
            "requiredPullRequestReviews": {"requiredApprovingReviewCount": 1},
            "enforceAdmins": True,
        }
        status, body = _call(
            url, "PUT", "/api/repositories/owner/proj/branches/main/protection", rule, token
        )
        assert status == 200, body

        _git("commit", "-q", "--allow-empty", "-m", "direct", cwd=work)
        refused = _git("push", "origin", "HEAD:main", cwd=work)
        assert refused.returncode != 0, refused.stderr
        assert "main is protected: changes must go through a pull request" in refused.stderr

        pushed = _git("push", "-q", "origin", "HEAD:topic", cwd=work)
        assert pushed.returncode == 0, pushed.stderr
        status, body = _call(url, "GET", "/api/repositories/owner/proj/events", token=token)
        assert status == 200, body
        refs = [e["data"]["ref"] for e in body["events"] if e["type"] == "push"]
        assert refs == ["refs/heads/main", "refs/heads/topic"], body
    finally:
        proc.terminate()
        proc.wait(20)
        log.close()


def test_a_server_whose_hooks_cannot_run_does_not_start(tmp_path):
    data = tmp_path / "data"
    ServerProcess(data).start().stop()
    (data / "git-hooks" / "pre-receive").chmod(0o644)  # as on a noexec mount
    server = ServerProcess(data)
    with pytest.raises(RuntimeError, match="server exited"):
        server.start()
    assert server.proc is not None and server.proc.wait(10) == 2
    assert "pre-receive is missing or not executable" in server.logs()


class HeldPush:
    """A proxy in front of the test server that holds a push's body until released.

    The POST's head goes through (the server checks the push and starts git); the body
    waits for release(), as a slow upload would, while the test changes what held.
    """

    def __init__(self, port: int) -> None:
        self.port = port
        self.head_through = asyncio.Event()
        self.release = asyncio.Event()
        self.server: asyncio.Server | None = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        return f"127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def stop(self) -> None:
        assert self.server is not None
        self.server.close()

    async def _handle(self, reader, writer) -> None:
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.port)
        down = asyncio.ensure_future(self._copy(up_reader, writer))
        await self._copy(reader, up_writer, hold=True)
        await down

    async def _copy(self, reader, writer, hold: bool = False) -> None:
        seen = b""
        try:
            while data := await reader.read(65536):
                if hold and not self.release.is_set():
                    seen += data
                    end = seen.find(b"\r\n\r\n")
                    if seen.startswith(b"POST ") and b"/git-receive-pack " in seen and end >= 0:
                        cut = len(data) - (len(seen) - end - 4)
                        writer.write(data[:cut])
                        await writer.drain()
                        self.head_through.set()
                        await self.release.wait()
                        data = data[cut:]
                    elif end >= 0:
                        seen = b""  # another request on this connection
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()


async def _held_push(client, work: Path, url: str, change) -> tuple[int, str]:
    """Push work's main through a held proxy; change() runs while the body is held."""
    from hubsvc.git.hook_fifos import HOOK_FIFOS

    proxy = HeldPush(client.server.port)
    address = await proxy.start()
    host = f"{client.server.host}:{client.server.port}"
    push = asyncio.ensure_future(
        git("push", url.replace(host, address), "HEAD:main", cwd=work, check=False)
    )
    try:
        await asyncio.wait_for(proxy.head_through.wait(), 30)
        # The server has checked the push and made its hook's folder.
        while not client.app[HOOK_FIFOS].waiting:
            await asyncio.sleep(0.01)
        await change()
        proxy.release.set()
        code, _, err = await asyncio.wait_for(push, 60)
    finally:
        proxy.release.set()
        await proxy.stop()
    return code, err


async def _writer_clone(client, alice, bob, tmp_path) -> Path:
    await create(client, alice, "proj", autoInit=True)
    resp = await client.put(
        REPO + "/collaborators/bob", json={"permission": "write"}, headers=alice.headers
    )
    assert resp.status in (200, 201, 204), await resp.text()
    work = tmp_path / "bob"
    await git("clone", "-q", remote(client, bob, "alice", "proj"), str(work))
    await git("commit", "-q", "--allow-empty", "-m", "slow", cwd=work)
    return work


async def _main(client, alice) -> str:
    branches = await (await client.get(REPO + "/branches", headers=alice.headers)).json()
    return next(b["commit"]["oid"] for b in branches["branches"] if b["name"] == "main")


async def test_a_token_deleted_while_its_push_uploads_lands_nothing(client, alice, bob, tmp_path):
    work = await _writer_clone(client, alice, bob, tmp_path)
    before = await _main(client, alice)
    pat = await new_pat(client, bob, "ci", scopes=["repo:write"])

    async def delete_token() -> None:
        resp = await client.delete(f"{TOKENS}/{pat['token']['id']}", headers=bob.headers)
        assert resp.status == 204

    url = remote(client, bob, "alice", "proj", pat["secret"])
    code, err = await _held_push(client, work, url, delete_token)
    assert code != 0 and "remote: push refused: this personal access token no longer" in err, err
    assert await _main(client, alice) == before


async def test_a_collaborator_removed_while_pushing_lands_nothing(client, alice, bob, tmp_path):
    work = await _writer_clone(client, alice, bob, tmp_path)
    before = await _main(client, alice)

    async def remove_bob() -> None:
        resp = await client.delete(REPO + "/collaborators/bob", headers=alice.headers)
        assert resp.status == 204, await resp.text()

    code, err = await _held_push(client, work, remote(client, bob, "alice", "proj"), remove_bob)
    assert code != 0 and "remote: push refused: bob has no write access to alice/proj" in err, err
    assert await _main(client, alice) == before


async def test_a_rule_set_while_a_push_uploads_applies_to_it(client, alice, bob, tmp_path):
    work = await _writer_clone(client, alice, bob, tmp_path)
    before = await _main(client, alice)

    async def protect_main() -> None:
        rule = {"requiredPullRequestReviews": {"requiredApprovingReviewCount": 1}}
        resp = await client.put(
            REPO + "/branches/main/protection", json=rule, headers=alice.headers
        )
        assert resp.status == 200, await resp.text()

    code, err = await _held_push(client, work, remote(client, bob, "alice", "proj"), protect_main)
    assert code != 0 and "remote: main is protected: changes must go through a pull" in err, err
    assert await _main(client, alice) == before


def _alive(pid: int) -> bool:
    """Whether pid runs (a zombie waiting for its reaper has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


async def test_a_push_past_its_timeout_ends_with_its_hooks(client, alice, tmp_path):
    """receive-pack killed at git.timeout_seconds takes its hook and the hook's child along."""
    await create(client, alice, "proj", autoInit=True)
    work = tmp_path / "alice"
    await git("clone", "-q", remote(client, alice, "alice", "proj"), str(work))
    await git("commit", "-q", "--allow-empty", "-m", "stuck", cwd=work)
    pids = tmp_path / "hook.pids"
    hook = client.app[REPO_FILES].hooks / "pre-receive"
    original = hook.read_text()
    # A hook that hangs (as one waiting on a stuck disk would), with a child of its own.
    hook.write_text(f"#!/bin/sh\nsleep 300 &\necho $$ $! > {pids}\nwait\n")
    client.app[CONFIG]["git"]["timeout_seconds"] = 2
    try:
        code, _, err = await git(
            "push", remote(client, alice, "alice", "proj"), "HEAD:main", cwd=work, check=False
        )
    finally:
        hook.write_text(original)
    assert code != 0, err
    hung = [int(pid) for pid in pids.read_text().split()]
    deadline = asyncio.get_running_loop().time() + 10
    while any(_alive(pid) for pid in hung):
        assert asyncio.get_running_loop().time() < deadline, f"{hung} outlived their push"
        await asyncio.sleep(0.05)


async def test_git_prints_why_a_read_only_token_may_not_push(client, alice, tmp_path):
    """The refusal at info/refs is text/plain, which git prints as `remote: <reason>`."""
    await create(client, alice, "proj", visibility="private", autoInit=True)
    secret = (await new_pat(client, alice, "ci", scopes=["repo:read"]))["secret"]
    work = tmp_path / "work"
    await git("clone", "-q", remote(client, alice, "alice", "proj", secret), str(work))
    await git("commit", "-q", "--allow-empty", "-m", "sneaky", cwd=work)
    code, _, err = await git("push", "origin", "main", cwd=work, check=False)
    assert code != 0, err
    assert "remote: this personal access token lacks the repo:write scope" in err, err


async def test_an_account_disabled_while_pushing_lands_nothing(client, alice, bob, tmp_path):
    work = await _writer_clone(client, alice, bob, tmp_path)
    before = await _main(client, alice)

    async def disable_bob() -> None:  # alice, the first account, is an administrator
        resp = await client.patch(
            "/api/admin/users/bob", json={"disabled": True}, headers=alice.headers
        )
        assert resp.status == 200, await resp.text()

    code, err = await _held_push(client, work, remote(client, bob, "alice", "proj"), disable_bob)
    assert code != 0 and "remote: push refused: this account is disabled" in err, err
    assert await _main(client, alice) == before
