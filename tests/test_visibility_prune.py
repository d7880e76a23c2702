"""Making a repository public holds off pushes on every process while it is pruned."""

from __future__ import annotations

import asyncio
import base64

import aiohttp
import pytest

from .gitcli import git
from .server import ServerProcess, start_several, stop_all

PASSWORD = "12345678"


@pytest.fixture(params=["sqlite", "postgres"])
def database(request) -> dict:
    """Server settings for one SQLite file in the data folder, or one PostgreSQL database."""
    if request.param == "postgres":
        return {"database": {"url": request.getfixturevalue("postgres_url")}}
    return {}


def _url(server: ServerProcess) -> str:
    return server.url.replace("http://", f"http://owner:{PASSWORD}@") + "/owner/proj.git"


async def test_a_push_under_way_on_another_process_holds_off_the_prune(
    tmp_path, redis_url, database
):
    a, b = await asyncio.to_thread(start_several, tmp_path / "data", 2, redis_url, database)
    try:
        status, body = await asyncio.to_thread(
            a.request,
            "POST",
            "/auth/sign-up",
            {"email": "o@example.com", "username": "owner", "password": PASSWORD, "name": "O"},
        )
        assert status == 201, body
        headers = {"Authorization": f"Bearer {body['token']}"}
        status, body = await asyncio.to_thread(
            a.request,
            "POST",
            "/api/repositories",
            {"name": "proj", "visibility": "private"},
            headers,
        )
        assert status == 201, body
        work = tmp_path / "work"
        await git("init", "-q", "-b", "main", str(work))
        await git("commit", "-q", "--allow-empty", "-m", "first", cwd=work)
        await git("push", "-q", _url(a), "main", cwd=work)

        # A push on B whose body is still arriving: git receive-pack has started, and the
        # objects it stores reach no ref until the body ends.
        more = asyncio.Event()

        async def body():
            yield b"00"
            await more.wait()
            yield b"00"  # a flush packet: no ref to update

        spool = tmp_path / "data" / "tmp"
        before = set(spool.glob("push-*"))
        basic = base64.b64encode(f"owner:{PASSWORD}".encode()).decode()
        async with aiohttp.ClientSession() as session:
            push = asyncio.ensure_future(
                session.post(
                    b.url + "/owner/proj.git/git-receive-pack",
                    data=body(),
                    headers={
                        "Authorization": f"Basic {basic}",
                        "Content-Type": "application/x-git-receive-pack-request",
                    },
                )
            )
            for _ in range(200):  # the push has begun once its spool file exists
                if set(spool.glob("push-*")) - before:
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("the push on B never started")

            public = asyncio.ensure_future(
                asyncio.to_thread(
                    a.request,
                    "PATCH",
                    "/api/repositories/owner/proj",
                    {"visibility": "public"},
                    headers,
                )
            )
            await asyncio.sleep(1.5)
            assert not public.done(), "the repository was pruned while B's push ran"
            more.set()
            async with await push as resp:
                assert resp.status == 200
                await resp.read()
            status, body = await asyncio.wait_for(public, 20)
            assert status == 200 and body["repo"]["visibility"] == "public", body
        # Pushes go on as before once the prune is over.
        await git("commit", "-q", "--allow-empty", "-m", "second", cwd=work)
        await git("push", "-q", _url(b), "main", cwd=work)
    finally:
        await asyncio.to_thread(stop_all, [a, b])
