"""A full disk under the data folder two processes share: writes refused, reads served.

A real small filesystem (a 6 MB tmpfs, root only; skipped with one line otherwise) holds
the data folder; on SQLite the database is on it too, on PostgreSQL only the
repositories. Process A takes the writes, process B the reads, while the disk is full;
then space comes back and everything is checked: no half-written ref, no lock or push
file left, git fsck clean, no acknowledged row lost, writes work again.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from .gitcli import ENV
from .server import ServerProcess, seed_owner
from .servers import fresh_postgres_database, postgres_server, redis_server
from .test_faults import FULL, _fill

API = "/api/repositories/owner/proj"


def _git(*args: str, cwd: Path | None = None, check: bool = True) -> tuple[int, str, str]:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env={**os.environ, **ENV}, capture_output=True, text=True
    )
    assert not check or done.returncode == 0, done.stderr
    return done.returncode, done.stdout, done.stderr


def _commit(work: Path, name: str, size: int) -> None:
    (work / name).write_bytes(os.urandom(size))
    _git("add", "-A", cwd=work)
    _git("commit", "-qm", name, cwd=work)


@pytest.mark.parametrize("engine", ["sqlite", "postgres"])
def test_a_full_disk_refuses_writes_on_one_process_while_another_serves_reads(
    engine, small_disk, tmp_path
):
    redis = redis_server()
    databases = fresh_postgres_database(postgres_server()) if engine == "postgres" else None
    settings: dict[str, dict] = {
        "redis": {"url": redis, "prefix": f"full-{engine}-{os.getpid()}-{tmp_path.name}"}
    }
    if databases is not None:
        settings["database"] = {"url": next(databases)}
    data = small_disk / "data"
    writer, reader = ServerProcess(data, settings), ServerProcess(data, settings)
    for n, server in enumerate((writer, reader)):
        server.log_path = tmp_path / f"server-{n}.log"  # off the small disk
    writer.start()
    try:
        reader.start()
        headers, url = seed_owner(writer)
        read_url = url.replace(writer.url.split("//")[1], reader.url.split("//")[1])
        work = tmp_path / "w"
        _git("init", "-q", "-b", "main", str(work))
        _commit(work, "a.bin", 1000)
        _git("push", "-q", url, "main", cwd=work)
        tip = _git("rev-parse", "main", cwd=work)[1].strip()
        acked = 0
        assert writer.request("POST", API + "/issues", {"title": "before"}, headers)[0] == 201
        acked += 1

        filler = _fill(small_disk)
        statuses: list[int] = []
        # Small writes until the database (SQLite: on this disk) has no page left.
        for n in range(50):
            status, body = writer.request("POST", API + "/issues", {"title": f"t{n}"}, headers)
            statuses.append(status)
            if status == 201:
                acked += 1
            else:
                assert status == 507 and body == FULL, (status, body)
                break
        create = writer.request("POST", "/api/repositories", {"name": "more"}, headers)
        _commit(work, "b.bin", 200_000)
        push = _git("push", url, "main", cwd=work, check=False)
        # B keeps serving reads meanwhile: the API and a clone.
        reads = [
            reader.request("GET", API, headers=headers)[0],
            reader.request("GET", API + "/issues?state=all", headers=headers)[0],
            reader.request("GET", API + "/commits", headers=headers)[0],
        ]
        clone = _git("clone", "-q", read_url, str(tmp_path / "c"), check=False)
        health = reader.request("GET", "/health")
        git_lines = [
            line for line in push[2].splitlines() if line.startswith(("remote:", "error:"))
        ]
        print(
            f"\n{engine}: disk full; A: {statuses.count(201)} writes then"
            f" {[s for s in statuses if s != 201]}, create repository {create[0]} {create[1]},"
            f" push exit {push[0]} with {git_lines[:2]};"
            f" B: reads {reads}, clone exit {clone[0]}, /health {health[0]}"
            f" {health[1].get('status')} disk {health[1].get('disk')}"
        )
        if engine == "sqlite":
            assert statuses[-1] == 507
        assert create[0] == 507 and create[1] == FULL
        assert push[0] != 0 and git_lines, push[2]
        assert "RPC failed" not in push[2] and "HTTP 50" not in push[2], push[2]
        assert reads == [200, 200, 200] and clone[0] == 0, clone[2]

        filler.unlink()
        (small_disk / "crumbs").unlink()
        # Nothing half-written: the ref as it was, no lock, push or creation left behind.
        bare = next((data / "repositories").glob("*/*.git"))
        assert _git("ls-remote", read_url, "refs/heads/main")[1].split()[0] == tip
        # git's lock files (a ref, packed-refs, config); hubsvc-*.lock are the service's
        # own flock files, there for good.
        locks = [
            p for p in (data / "repositories").rglob("*.lock") if not p.name.startswith("hubsvc-")
        ]
        assert not locks
        assert not list((data / "tmp").iterdir())
        assert [p.name for p in (data / "repositories").glob("*/*.git")] == [bare.name]
        fsck = _git("--git-dir", str(bare), "fsck", "--full", "--no-dangling")
        assert fsck[0] == 0, fsck[2]
        if engine == "sqlite":
            db = sqlite3.connect(f"file:{data / 'hubsvc.db'}?mode=ro", uri=True)
            assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
            db.close()
        # Every acknowledged issue is there (numbered 1..acked), and no other.
        for number in (1, acked):
            assert reader.request("GET", f"{API}/issues/{number}", headers=headers)[0] == 200
        assert reader.request("GET", f"{API}/issues/{acked + 1}", headers=headers)[0] == 404
        assert reader.request("GET", "/api/repositories/owner/more", headers=headers)[0] == 404
        # With room again, both write.
        assert writer.request("POST", "/api/repositories", {"name": "more"}, headers)[0] == 201
        assert reader.request("POST", API + "/issues", {"title": "after"}, headers)[0] == 201
        _git("push", "-q", url, "main", cwd=work)
        # The inbox's writes for the issues acknowledged as the disk filled were held,
        # not skipped: each author ends up subscribed to their issue (CI once saw one
        # skipped, with a traceback).
        unsubscribed = _authors_unsubscribed(reader, headers, acked)
        assert not unsubscribed, unsubscribed
        print(
            f"after freeing space: {acked} acknowledged issues all there, main was not moved,"
            " fsck clean, every author subscribed, the create and the push then succeed"
        )
    finally:
        for server in (reader, writer):
            if server.proc is not None and server.proc.poll() is None:
                server.stop()
        if databases is not None:
            next(databases, None)
    assert "Traceback" not in writer.logs() + reader.logs()


def _authors_unsubscribed(server: ServerProcess, headers: dict, acked: int) -> list[int]:
    """The acknowledged issues whose author is not subscribed within 30 s."""
    deadline = time.monotonic() + 30
    while True:
        missing = [
            number
            for number in range(1, acked + 1)
            if not server.request("GET", f"{API}/issues/{number}/subscription", headers=headers)[1][
                "subscription"
            ]["subscribed"]
        ]
        if not missing or time.monotonic() > deadline:
            return missing
        time.sleep(0.2)
