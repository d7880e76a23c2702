"""Three processes behind one address, as a team runs them: PostgreSQL, Redis, a proxy.

Every request goes through a round-robin proxy on a new connection, so consecutive
requests (and a git push's several requests) land on different processes. What the
issue asks of several processes is checked here through that one address: numbers,
merges, stars, a push and a clone, and a WebSocket hearing what the others did.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import aiohttp
import pytest

from .proxy import RoundRobinProxy
from .server import ROOT, ServerProcess, start_several, stop_all
from .test_admin import git
from .test_cluster import PASSWORD, call, next_of, sign_up, socket, subscribe


@pytest.fixture
async def behind_one_address(tmp_path, redis_url, postgres_url):
    servers = await asyncio.to_thread(
        start_several, tmp_path / "data", 3, redis_url, {"database": {"url": postgres_url}}
    )
    proxy = RoundRobinProxy([s.port for s in servers]).start()
    # A new connection per request: each goes to the next process.
    connector = aiohttp.TCPConnector(force_close=True)
    async with aiohttp.ClientSession(connector=connector) as session:
        yield servers, proxy, session
    proxy.stop()
    await asyncio.to_thread(stop_all, servers)


async def test_three_processes_behind_one_address_behave_as_one(behind_one_address, tmp_path):
    servers, proxy, session = behind_one_address
    token = await sign_up(session, proxy, "owner")
    others = [await sign_up(session, proxy, f"user{n}") for n in range(3)]
    status, me = await call(session, proxy, "GET", "/api/users/me", token=token)
    assert status == 200 and me["user"]["isAdmin"] is True  # the first account, once
    assert (await call(session, proxy, "POST", "/api/repositories", {"name": "proj"}, token))[
        0
    ] == 201

    # A push and a clone through the proxy: git's requests land on different processes.
    remote = proxy.url.replace("http://", f"http://owner:{PASSWORD}@") + "/owner/proj.git"
    work = tmp_path / "work"
    git("init", "-q", "-b", "main", str(work))
    (work / "a.txt").write_text("one\n")
    git("add", ".", cwd=work)
    git("commit", "-qm", "one", cwd=work)
    git("push", "-q", remote, "main", cwd=work)
    git("checkout", "-q", "-b", "topic", cwd=work)
    (work / "b.txt").write_text("two\n")
    git("add", ".", cwd=work)
    git("commit", "-qm", "two", cwd=work)
    git("push", "-q", remote, "topic", cwd=work)
    git("clone", "-q", remote, str(tmp_path / "clone"))
    assert (tmp_path / "clone" / "a.txt").read_text() == "one\n"

    # A socket on whichever process it landed on hears issues opened through the others.
    ws = await socket(session, proxy, token)
    await subscribe(ws, "owner", "proj")
    issues = "/api/repositories/owner/proj/issues"
    answers = await asyncio.gather(
        *(
            call(session, proxy, "POST", issues, {"title": f"t{n}"}, (token, *others)[n % 4])
            for n in range(12)
        )
    )
    assert [status for status, _ in answers] == [201] * 12
    assert sorted(body["issue"]["number"] for _, body in answers) == list(range(1, 13))
    heard = [
        (await next_of(ws, "notification"))["notification"]["data"]["issue"]["number"]
        for _ in range(12)
    ]
    assert sorted(heard) == list(range(1, 13))
    await ws.close()

    # Stars from three processes at once: the count is exact.
    star = "/api/repositories/owner/proj/star"
    await asyncio.gather(*(call(session, proxy, "POST", star, token=t) for t in others * 2))
    status, repo = await call(session, proxy, "GET", "/api/repositories/owner/proj")
    assert repo["repo"]["starCount"] == 3

    # Two merges of one pull request, on two processes: one merge and one 409.
    status, pull = await call(
        session,
        proxy,
        "POST",
        "/api/repositories/owner/proj/pulls",
        {"title": "topic", "head": "topic", "base": "main"},
        token,
    )
    assert status == 201, pull
    number = pull["pullRequest"]["number"]
    assert number == 13  # issues and pull requests share the numbers
    merge = f"/api/repositories/owner/proj/pulls/{number}/merge"
    deadline = time.monotonic() + 10
    while True:  # mergeability is computed after the pull request opens
        status, got = await call(
            session, proxy, "GET", f"/api/repositories/owner/proj/pulls/{number}"
        )
        if got["pullRequest"].get("mergeable") is not None or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.1)
    answers = await asyncio.gather(
        call(session, proxy, "POST", merge, {"method": "merge"}, token),
        call(session, proxy, "POST", merge, {"method": "merge"}, token),
    )
    assert sorted(status for status, _ in answers) == [200, 409], answers
    log = git("ls-remote", remote, "refs/heads/main")
    assert log.split()[0] == next(b for s, b in answers if s == 200)["pullRequest"]["mergeCommit"]

    # Every process took requests.
    assert set(proxy.handed) == {s.port for s in servers}


def test_three_processes_started_at_once_on_a_new_data_folder(tmp_path, redis_url):
    # The start race: migrations, the secret key and the git hooks are made once, whole.
    settings = {"redis": {"url": redis_url[0], "prefix": redis_url[1]}}
    servers = [ServerProcess(tmp_path / "data", settings) for _ in range(3)]
    procs = []
    try:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(3) as pool:
            procs = list(pool.map(lambda s: s.start(), servers))
        secret = (tmp_path / "data" / "secret_key").read_text()
        assert len(secret.strip()) > 40
        done = subprocess.run(
            [sys.executable, str(ROOT / "run.py"), "--data-dir", str(tmp_path / "data"), "check"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
    finally:
        stop_all(procs or servers)
