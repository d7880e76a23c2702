"""run.py copy-database: a SQLite install moved into PostgreSQL keeps every row and works on."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from .server import ROOT, ServerProcess, seed_owner
from .servers import fresh_postgres_database, postgres_server
from .test_admin import MARK_IN_CREATION, git


def cli(data_dir, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "run.py"), "--data-dir", str(data_dir), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def _state(server: ServerProcess, headers: dict) -> dict:
    """What a client sees of the install: repositories, issues, comments, stars, events."""
    seen = {
        "repo": server.request("GET", "/api/repositories/owner/proj", headers=headers)[1],
        "issues": server.request(
            "GET", "/api/repositories/owner/proj/issues?state=all", headers=headers
        )[1],
        "comments": server.request(
            "GET", "/api/repositories/owner/proj/issues/1/comments", headers=headers
        )[1],
        "feed": server.request("GET", "/api/events?limit=100", headers=headers)[1],
        "me": server.request("GET", "/api/users/me", headers=headers)[1],
    }
    # Links name a server's own address, which differs from one start to the next.
    return json.loads(re.sub(r"http://127\.0\.0\.1:\d+", "http://hubsvc", json.dumps(seen)))


def test_copy_database_moves_every_row_and_the_service_works_on_postgres(tmp_path, postgres_url):
    data = tmp_path / "data"
    with ServerProcess(data) as server:
        headers, remote = seed_owner(server)
        work = tmp_path / "work"
        git("init", "-q", "-b", "main", str(work))
        for n in range(3):
            (work / f"f{n}.txt").write_text(f"{n}\n")
            git("add", ".", cwd=work)
            git("commit", "-qm", f"c{n}", cwd=work)
        git("push", "-q", remote, "main", cwd=work)
        for n in range(3):
            status, _ = server.request(
                "POST",
                "/api/repositories/owner/proj/issues",
                {"title": f"issue {n}", "body": "words", "labels": ["bug"]},
                headers,
            )
            assert status == 201
        server.request(
            "POST", "/api/repositories/owner/proj/issues/1/comments", {"body": "hi"}, headers
        )
        server.request("POST", "/api/repositories/owner/proj/star", headers=headers)
        server.request("POST", "/api/repositories", {"name": "secret", "private": True}, headers)
        server.request("DELETE", "/api/repositories/owner/secret", headers=headers)
        before = _state(server, headers)

    # The server is stopped; a copy into a database that is not empty is refused.
    done = cli(data, "copy-database", "--to", postgres_url)
    assert done.returncode == 0, done.stderr
    assert "copied" in done.stdout
    again = cli(data, "copy-database", "--to", postgres_url)
    assert again.returncode == 1 and "not empty" in again.stderr

    config = tmp_path / "pg.toml"
    config.write_text(f'[database]\nurl = "{postgres_url}"\n')
    checked = cli(data, "--config", str(config), "check")
    assert checked.returncode == 0, checked.stderr
    assert "ok: database" in checked.stdout

    with ServerProcess(data, {"database": {"url": postgres_url}}) as server:
        assert _state(server, headers) == before  # the same session token works, too
        # New rows take ids past the copied ones: nothing collides, events go on in order.
        status, issue = server.request(
            "POST", "/api/repositories/owner/proj/issues", {"title": "after the move"}, headers
        )
        assert status == 201 and issue["issue"]["number"] == 4
        feed = server.request("GET", "/api/events?limit=100", headers=headers)[1]
        ids = [int(e["id"]) for e in feed["events"]]
        assert max(ids) > max(int(e["id"]) for e in before["feed"]["events"])
        status, found = server.request("GET", "/api/search?type=issues&q=after", headers=headers)
        assert status == 200, found
        assert [i["title"] for i in found["results"]] == ["after the move"]
        # The repositories stay where they were: the moved install serves them.
        remote = server.url.replace("http://", "http://owner:12345678@") + "/owner/proj.git"
        git("clone", "-q", remote, str(tmp_path / "clone"))
        assert (tmp_path / "clone" / "f2.txt").read_text() == "2\n"


def test_backup_and_restore_on_postgres_with_pg_dump(tmp_path, postgres_url):
    data = tmp_path / "data"
    settings = {"database": {"url": postgres_url}}
    with ServerProcess(data, settings) as server:
        headers, remote = seed_owner(server)
        work = tmp_path / "work"
        git("init", "-q", "-b", "main", str(work))
        (work / "a.txt").write_text("a\n")
        git("add", ".", cwd=work)
        git("commit", "-qm", "a", cwd=work)
        git("push", "-q", remote, "main", cwd=work)
        server.request("POST", "/api/repositories/owner/proj/issues", {"title": "kept"}, headers)
        config = tmp_path / "pg.toml"
        config.write_text(f'[database]\nurl = "{postgres_url}"\n')
        done = cli(data, "--config", str(config), "backup", str(tmp_path / "backup"))
        assert done.returncode == 0, done.stderr
        assert "pg_dump" in done.stdout
        before = _state(server, headers)
    manifest = json.loads((tmp_path / "backup" / "manifest.json").read_text())
    assert manifest["database"]["engine"] == "postgresql" and manifest["repositories"] == 1

    for target in fresh_postgres_database(postgres_server(), migrated=False):
        # A SQLite configuration refuses a PostgreSQL backup, saying what to set.
        refused = cli(tmp_path / "elsewhere", "restore", str(tmp_path / "backup"))
        assert refused.returncode == 1 and "[database] url" in refused.stderr
        other = tmp_path / "other.toml"
        other.write_text(f'[database]\nurl = "{target}"\n')
        restored = cli(
            tmp_path / "restored", "--config", str(other), "restore", str(tmp_path / "backup")
        )
        assert restored.returncode == 0, restored.stderr
        with ServerProcess(tmp_path / "restored", {"database": {"url": target}}) as server:
            assert _state(server, headers) == before
            remote = server.url.replace("http://", "http://owner:12345678@") + "/owner/proj.git"
            git("clone", "-q", remote, str(tmp_path / "clone"))
            assert (tmp_path / "clone" / "a.txt").read_text() == "a\n"


def test_a_postgres_restore_undoes_a_create_that_had_not_answered_at_the_dump(
    tmp_path, postgres_url
):
    import psycopg

    data = tmp_path / "data"
    config = tmp_path / "pg.toml"
    config.write_text(f'[database]\nurl = "{postgres_url}"\n')
    with ServerProcess(data, {"database": {"url": postgres_url}}) as server:
        headers, _ = seed_owner(server)
        assert server.request("POST", "/api/repositories", {"name": "pending"}, headers)[0] == 201
        with psycopg.connect(postgres_url, autocommit=True) as pg:
            assert pg.execute(MARK_IN_CREATION).rowcount == 1
        done = cli(data, "--config", str(config), "backup", str(tmp_path / "backup"))
        assert done.returncode == 0, done.stderr
    # Read in pg_dump's own (exported) snapshot: the create is left out of the count
    # and named for restore to undo, and its folder is not in the backup.
    manifest = json.loads((tmp_path / "backup" / "manifest.json").read_text())
    assert manifest["repositories"] == 1 and len(manifest["leftOut"]) == 1, manifest
    assert len(list((tmp_path / "backup" / "repositories").glob("*/*.git"))) == 1
    for target in fresh_postgres_database(postgres_server(), migrated=False):
        other = tmp_path / "other.toml"
        other.write_text(f'[database]\nurl = "{target}"\n')
        restored = cli(
            tmp_path / "restored", "--config", str(other), "restore", str(tmp_path / "backup")
        )
        assert restored.returncode == 0, restored.stderr
        assert "1 repositories" in restored.stdout, restored.stdout
        assert len(list((tmp_path / "restored" / "repositories").glob("*/*.git"))) == 1
        with ServerProcess(tmp_path / "restored", {"database": {"url": target}}) as server:
            status, body = server.request("GET", "/api/users/owner/repositories", headers=headers)
            assert [r["name"] for r in body["repositories"]] == ["proj"]
            assert (
                server.request("POST", "/api/repositories", {"name": "pending"}, headers)[0] == 201
            )
