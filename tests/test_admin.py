"""The administration commands of run.py, each run as a real process next to a real server."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .gitcli import ENV as GIT_ENV
from .server import ROOT, ServerProcess

PASSWORD = "correct horse"


def cli(data_dir: Path, *args: str, password: str | None = None) -> subprocess.CompletedProcess:
    """python run.py --data-dir DATA COMMAND …, the password (if any) in HUBSVC_PASSWORD."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HUBSVC_")}
    env.update(HUBSVC_SECURITY_BCRYPT_ROUNDS="4", PYTHONPATH=str(ROOT))
    if password is not None:
        env["HUBSVC_PASSWORD"] = password
    return subprocess.run(
        [sys.executable, str(ROOT / "run.py"), "--data-dir", str(data_dir), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


def ok(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 0, done.stderr
    return done.stdout


def fails(done: subprocess.CompletedProcess, code: int = 1) -> str:
    """The one line a failed command printed on stderr."""
    assert done.returncode == code, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def sign_in(server: ServerProcess, username: str, password: str = PASSWORD) -> tuple[int, dict]:
    return server.request("POST", "/auth/sign-in", {"username": username, "password": password})


def me(server: ServerProcess, token: str) -> tuple[int, dict]:
    return server.request("GET", "/api/users/me", headers={"Authorization": f"Bearer {token}"})


def is_admin(server: ServerProcess, username: str, password: str = PASSWORD) -> bool:
    """Signs in afresh: a token's user is cached by the server for a few seconds."""
    status, body = sign_in(server, username, password)
    assert status == 200, body
    return me(server, body["token"])[1]["user"]["isAdmin"]


def git(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, **GIT_ENV},
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    assert done.returncode == 0, f"git {' '.join(args)}: {done.stderr}"
    return done.stdout


def remote(server: ServerProcess, owner: str, name: str, password: str = PASSWORD) -> str:
    secret = password.replace(" ", "%20")
    return f"http://{owner}:{secret}@127.0.0.1:{server.port}/{owner}/{name}.git"


def test_create_user_then_sign_in_with_the_admin_rules(tmp_path):
    data = tmp_path / "data"
    assert "administrator" in ok(
        cli(data, "create-user", "alice", "alice@example.com", password=PASSWORD)
    )  # the first account
    with ThreadPoolExecutor(2) as pool:
        bob = pool.submit(cli, data, "create-user", "bob", "bob@example.com", password=PASSWORD)
        carol = pool.submit(
            cli,
            data,
            "create-user",
            "carol",
            "carol@example.com",
            "--name",
            "Carol C",
            "--admin",
            password=PASSWORD,
        )
        assert "administrator" not in ok(bob.result())
        assert "administrator" in ok(carol.result())
    with ServerProcess(data) as server:
        assert [is_admin(server, n) for n in ("alice", "bob", "carol")] == [True, False, True]
        status, body = sign_in(server, "carol")
        assert body["user"]["name"] == "Carol C"
        # The sign-up rules of the API, each failure one line and exit code 1,
        # checked while the server runs on the same database.
        cases = [
            (("admin", "x@example.com"), PASSWORD, "username: is reserved"),
            (("dash-", "x@example.com"), PASSWORD, "username: must be 1-39"),
            (("dave", "not-an-email"), PASSWORD, "email:"),
            (("dave", "dave@example.com"), "short", "password: must be 8 to 72 bytes"),
            (("BOB", "other@example.com"), PASSWORD, "username is taken"),
            (("erin", "Bob@Example.com"), PASSWORD, "e-mail is already registered"),
        ]
        calls = [
            (1, message, ("create-user", *args), password) for args, password, message in cases
        ]
        calls += [
            # No password in the environment and no terminal to ask on: a usage error.
            (2, "HUBSVC_PASSWORD", ("create-user", "dave", "d@example.com"), None),
            (1, "no user named nobody", ("make-admin", "nobody"), None),
            (1, "no user named nobody", ("reset-password", "nobody"), PASSWORD),
            (2, "configuration error", ("--config", str(tmp_path / "none.toml"), "check"), None),
        ]
        # Independent processes, run side by side to keep the test quick.
        with ThreadPoolExecutor(4) as pool:
            results = list(pool.map(lambda c: cli(data, *c[2], password=c[3]), calls))
            unknown = pool.submit(cli, data, "no-such-command")
        for (code, message, _, _), done in zip(calls, results):
            assert message in fails(done, code)
        assert unknown.result().returncode == 2
        assert sign_in(server, "dave")[0] == 401


def test_reset_password_revokes_tokens_and_admin_flags_change(tmp_path):
    data = tmp_path / "data"
    ok(cli(data, "create-user", "alice", "alice@example.com", password=PASSWORD))
    ok(cli(data, "create-user", "bob", "bob@example.com", password=PASSWORD))
    with ServerProcess(data) as server:
        status, body = sign_in(server, "bob")
        old_token = body["token"]
        # Made with another sign-in's token: a token the server has seen stays in its
        # cache for up to 5 seconds, and these two must be unseen to show the revocation.
        maker = sign_in(server, "bob")[1]["token"]
        status, created = server.request(
            "POST", "/api/users/me/tokens", {"name": "ci"}, {"Authorization": f"Bearer {maker}"}
        )
        assert status == 201, created
        ok(cli(data, "reset-password", "bob", password="new password 2"))
        assert me(server, old_token)[0] == 401
        assert me(server, created["secret"])[0] == 401  # personal access tokens end too
        assert sign_in(server, "bob")[0] == 401
        assert sign_in(server, "bob", "new password 2")[0] == 200
        assert not is_admin(server, "bob", "new password 2")
        assert "now an administrator" in ok(cli(data, "make-admin", "bob"))
        assert is_admin(server, "bob", "new password 2")
        assert "no longer" in ok(cli(data, "revoke-admin", "bob"))
        assert not is_admin(server, "bob", "new password 2")
        # The last administrator stays one, and the ghost is nobody's to change.
        assert "last administrator" in fails(cli(data, "revoke-admin", "alice"))
        assert is_admin(server, "alice")
        assert "cannot be changed" in fails(cli(data, "make-admin", "ghost"))
        # A password that breaks the sign-up rules changes nothing.
        assert "password:" in fails(cli(data, "reset-password", "bob", password="x" * 73))
        assert sign_in(server, "bob", "new password 2")[0] == 200


OPS = {"security": {"admins": ["ops"]}}


def sign_up(server: ServerProcess, username: str) -> None:
    server.sign_up(username, PASSWORD)


def admin_api(server: ServerProcess, username: str) -> int:
    """The status of GET /api/admin/users for a fresh sign-in of username."""
    status, body = sign_in(server, username)
    assert status == 200, body
    return server.request(
        "GET", "/api/admin/users", headers={"Authorization": f"Bearer {body['token']}"}
    )[0]


def test_security_admins_skips_a_name_nobody_has_and_a_later_sign_up_gets_nothing(tmp_path):
    data = tmp_path / "data"
    with ServerProcess(data, OPS) as first:
        sign_up(first, "root")  # the first account: an administrator
        sign_up(first, "ops")
        assert admin_api(first, "ops") == 403
    # The restart finds an ops account now, but the name was applied when nobody held it.
    with ServerProcess(data, OPS) as server:
        assert admin_api(server, "ops") == 403
        assert admin_api(server, "root") == 200
    # The first start said so, and how to grant the account once it exists.
    assert "security.admins lists ops, but no account has that name" in first.logs()
    assert "make-admin ops" in first.logs()
    assert "security.admins" not in server.logs()  # nothing left to apply


def test_security_admins_grant_stays_with_the_account_not_the_name(tmp_path):
    data = tmp_path / "data"
    with ServerProcess(data) as server:
        sign_up(server, "root")
        sign_up(server, "ops")
    with ServerProcess(data, OPS) as server:
        assert admin_api(server, "ops") == 200  # it existed at the start that listed it
        status, body = sign_in(server, "root")
        status, _ = server.request(
            "DELETE", "/api/admin/users/ops", headers={"Authorization": f"Bearer {body['token']}"}
        )
        assert status == 204
        sign_up(server, "ops")  # someone else takes the deleted administrator's name
        assert admin_api(server, "ops") == 403
    with ServerProcess(data, OPS) as server:
        assert admin_api(server, "ops") == 403


def test_cli_grants_and_revokes_and_restarts_keep_it(tmp_path):
    data = tmp_path / "data"
    with ServerProcess(data, OPS) as server:
        sign_up(server, "root")
        sign_up(server, "ops")
        assert admin_api(server, "ops") == 403
        # The way to make a listed name's later account an administrator: by the account.
        assert "ops is now an administrator" in ok(cli(data, "make-admin", "ops"))
        assert admin_api(server, "ops") == 200
    with ServerProcess(data, OPS) as server:
        assert admin_api(server, "ops") == 200
        # A revocation holds even though security.admins still lists the name.
        assert "no longer" in ok(cli(data, "revoke-admin", "ops"))
        assert admin_api(server, "ops") == 403
    with ServerProcess(data, OPS) as server:
        assert admin_api(server, "ops") == 403


class Writer(threading.Thread):
    """Keeps the server busy: sign-ups, repositories, issues, and git pushes."""

    def __init__(self, server: ServerProcess, token: str, work: Path) -> None:
        super().__init__(daemon=True)
        self.server, self.work = server, work
        self.headers = {"Authorization": f"Bearer {token}"}
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.users: list[str] = []
        self.repos: list[str] = []
        self.issues: list[str] = []
        self.commits: list[str] = []
        self.deleted: list[str] = []
        self.error: BaseException | None = None

    def done(self) -> dict[str, list[str]]:
        """What was written so far (each item acknowledged by the server)."""
        with self.lock:
            return {
                "users": list(self.users),
                "repos": list(self.repos),
                "issues": list(self.issues),
                "commits": list(self.commits),
                "deleted": list(self.deleted),
            }

    def run(self) -> None:
        try:
            n = 0
            while not self.stop.is_set():
                n += 1
                self.step(n)
        except BaseException as exc:  # reported by the test
            self.error = exc

    def step(self, n: int) -> None:
        server = self.server
        status, _ = server.request(
            "POST",
            "/auth/sign-up",
            {
                "email": f"w{n}@example.com",
                "username": f"w{n}",
                "password": PASSWORD,
                "name": f"W {n}",
            },
        )
        assert status == 201
        status, _ = server.request(
            "POST", "/api/repositories", {"name": f"r{n}", "autoInit": n % 2 == 0}, self.headers
        )
        assert status == 201
        status, _ = server.request(
            "POST", "/api/repositories/alice/base/issues", {"title": f"issue {n}"}, self.headers
        )
        assert status == 201
        if n % 3 == 2:  # deletes race the backup too
            status, _ = server.request(
                "DELETE", f"/api/repositories/alice/r{n - 1}", None, self.headers
            )
            assert status == 204
            with self.lock:
                self.deleted.append(f"r{n - 1}")
        # Every third push brings more than receive.unpackLimit objects, so it lands as
        # a pack; the others land as loose objects.
        files = 120 if n % 3 == 0 else 1
        for i in range(files):
            (self.work / f"f{n}-{i}.txt").write_text(f"{n} {i}\n")
        git("add", "-A", cwd=self.work)
        git("commit", "-q", "-m", f"change {n}", cwd=self.work)
        git("push", "-q", "origin", "main", cwd=self.work)
        oid = git("rev-parse", "HEAD", cwd=self.work).strip()
        with self.lock:
            self.users.append(f"w{n}")
            self.repos.append(f"r{n}")
            self.issues.append(f"issue {n}")
            self.commits.append(oid)


ASSET = os.urandom(3000)


def _release_asset(server: ServerProcess, token: str, data: bytes) -> str:
    """A release of alice/base with one asset; the asset's download path."""
    auth = {"Authorization": f"Bearer {token}"}
    status, body = server.request(
        "POST", "/api/repositories/alice/base/releases", {"tagName": "v1"}, auth
    )
    assert status == 201, body
    req = urllib.request.Request(
        f"{server.url}/api/repositories/alice/base/releases/{body['release']['id']}/assets"
        "?name=a.bin",
        data=data,
        method="POST",
        headers={**auth, "Content-Type": "application/octet-stream"},
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        asset = json.loads(resp.read())["asset"]
    return f"/api/repositories/alice/base/releases/assets/{asset['id']}"


def test_backup_during_writes_restores_to_a_working_service(tmp_path):
    data, dest, restored = tmp_path / "data", tmp_path / "backup", tmp_path / "restored"
    server = ServerProcess(data).start()
    try:
        status, body = server.request(
            "POST",
            "/auth/sign-up",
            {
                "email": "alice@example.com",
                "username": "alice",
                "password": PASSWORD,
                "name": "Alice",
            },
        )
        assert status == 201
        status, _ = server.request(
            "POST",
            "/api/repositories",
            {"name": "base", "autoInit": True},
            {"Authorization": f"Bearer {body['token']}"},
        )
        assert status == 201
        asset_url = _release_asset(server, body["token"], ASSET)
        work = tmp_path / "work"
        git("clone", "-q", remote(server, "alice", "base"), str(work))
        writer = Writer(server, body["token"], work)
        writer.start()
        while len(writer.done()["commits"]) < 3 and writer.is_alive():
            time.sleep(0.05)
        before = writer.done()
        started = time.monotonic()
        backup = cli(data, "backup", str(dest))
        seconds = time.monotonic() - started
        during = len(writer.done()["commits"]) - len(before["commits"])
        # Let a few more writes land after the backup too, then stop writing.
        target = len(writer.done()["commits"]) + 2
        while len(writer.done()["commits"]) < target and writer.is_alive():
            time.sleep(0.05)
        writer.stop.set()
        writer.join(30)
        assert writer.error is None, writer.error
        print(ok(backup))
        print(f"backup took {seconds:.2f} s while {during} pushes landed")
        # A backup never goes into a folder that holds something, and a restore
        # never replaces the data of a running server, --force or not.
        assert "not empty" in fails(cli(data, "backup", str(dest)))
        assert "stop the server" in fails(cli(data, "restore", str(dest), "--force"))
    finally:
        server.stop()

    manifest = json.loads((dest / "manifest.json").read_text())
    assert manifest["schemaVersion"] >= 6 and manifest["repositories"] >= 4
    assert (dest / "secret_key").stat().st_mode & 0o777 == 0o600
    assert "restored the backup" in ok(cli(restored, "restore", str(dest)))
    assert "ok: database" in ok(cli(restored, "check"))
    assert (restored / "secret_key").read_text() == (data / "secret_key").read_text()

    with ServerProcess(restored) as copy:
        assert sign_in(copy, "alice")[0] == 200
        for user in before["users"]:
            assert sign_in(copy, user)[0] == 200
        status, body = copy.request("GET", "/api/users/alice/repositories?limit=100")
        names = {repo["name"] for repo in body["repositories"]}
        deleted = writer.done()["deleted"]
        assert status == 200 and {"base", *before["repos"]} - set(deleted) <= names
        assert not names & set(before["deleted"])
        assert len(names) == manifest["repositories"]
        status, body = copy.request("GET", "/api/repositories/alice/base/issues?limit=100")
        assert set(before["issues"]) <= {issue["title"] for issue in body["issues"]}
        status, body = copy.request("GET", "/api/repositories/alice/base/tree")
        assert status == 200 and any(f["name"] == "README.md" for f in body["files"])
        with urllib.request.urlopen(copy.url + asset_url, timeout=30) as resp:
            assert resp.read() == ASSET  # release assets are in the backup too
        for name in sorted(names):
            clone = tmp_path / "clones" / name
            git("clone", "-q", remote(copy, "alice", name), str(clone))
            git("fsck", "--strict", "--no-progress", cwd=clone)
        base = tmp_path / "clones" / "base"
        for oid in before["commits"]:  # every push acknowledged before the backup began
            git("merge-base", "--is-ancestor", oid, "HEAD", cwd=base)
        # The restored service takes writes again.
        (base / "after.txt").write_text("after the restore\n")
        git("add", "after.txt", cwd=base)
        git("commit", "-q", "-m", "after the restore", cwd=base)
        git("push", "-q", "origin", "main", cwd=base)

    # A restore over existing data needs --force and keeps the old data aside.
    assert "--force" in fails(cli(restored, "restore", str(dest)))
    assert "moved the data" in ok(cli(restored, "restore", str(dest), "--force"))
    assert len(list(restored.glob("pre-restore-*/repositories"))) == 1

    # A backup that does not match its manifest is refused before anything is touched.
    bad = tmp_path / "bad"
    shutil.copytree(dest, bad)
    (bad / "manifest.json").write_text(json.dumps({**manifest, "schemaVersion": 9999}))
    assert "upgrade hubsvc first" in fails(cli(tmp_path / "fresh", "restore", str(bad)))
    (bad / "manifest.json").write_text(json.dumps(manifest))
    with open(bad / "hubsvc.db", "ab") as fh:
        fh.write(b"\0")
    assert "checksum" in fails(cli(tmp_path / "fresh", "restore", str(bad)))
    (bad / "manifest.json").unlink()
    assert "no manifest.json" in fails(cli(tmp_path / "fresh", "restore", str(bad)))
    assert not (tmp_path / "fresh" / "hubsvc.db").exists()


# The mark RepoStore.create writes with a row until its folder is made and 201 is sent,
# set on a made repository by the live process: a create caught mid-way by the snapshot.
# (CI once saw the manifest count such a repository, which the restored service's
# recovery then removed.)
MARK_IN_CREATION = (
    "INSERT INTO repos_in_creation (repo_id, holder, started_at)"
    " SELECT r.id, (SELECT substr(name, 9) FROM leases WHERE name LIKE 'process:%'), 'x'"
    " FROM repositories r WHERE r.name = 'pending'"
)


def test_a_backup_leaves_out_a_create_that_had_not_answered_at_its_snapshot(tmp_path):
    data, dest, restored = tmp_path / "data", tmp_path / "backup", tmp_path / "restored"
    with ServerProcess(data) as server:
        status, body = server.request(
            "POST",
            "/auth/sign-up",
            {"email": "a@example.com", "username": "alice", "password": PASSWORD, "name": "A"},
        )
        auth = {"Authorization": f"Bearer {body['token']}"}
        for name in ("base", "pending"):
            assert server.request("POST", "/api/repositories", {"name": name}, auth)[0] == 201
        db = sqlite3.connect(data / "hubsvc.db", isolation_level=None)
        assert db.execute(MARK_IN_CREATION).rowcount == 1
        db.close()
        ok(cli(data, "backup", str(dest)))
    manifest = json.loads((dest / "manifest.json").read_text())
    assert manifest["repositories"] == 1
    ok(cli(restored, "restore", str(dest)))
    with ServerProcess(restored) as copy:
        status, body = copy.request("GET", "/api/users/alice/repositories", headers=auth)
        assert [r["name"] for r in body["repositories"]] == ["base"]
        # The name is free: a retry of that create makes it.
        assert copy.request("POST", "/api/repositories", {"name": "pending"}, auth)[0] == 201
    assert "Traceback" not in copy.logs()


def test_check_finds_a_corrupt_repository_a_missing_folder_and_an_orphan(tmp_path):
    data = tmp_path / "data"
    with ServerProcess(data) as server:
        status, body = server.request(
            "POST",
            "/auth/sign-up",
            {
                "email": "alice@example.com",
                "username": "alice",
                "password": PASSWORD,
                "name": "Alice",
            },
        )
        headers = {"Authorization": f"Bearer {body['token']}"}
        ids = []
        for name in ("one", "two", "three"):
            status, body = server.request(
                "POST", "/api/repositories", {"name": name, "autoInit": True}, headers
            )
            assert status == 201
            ids.append(int(body["repo"]["id"]))
        # check runs fine next to the server.
        assert "3 repositories" in ok(cli(data, "check"))
    repos = data / "repositories" / "000"
    loose = sorted(p for p in (repos / f"{ids[0]}.git" / "objects").glob("??/*"))
    loose[0].unlink()
    shutil.rmtree(repos / f"{ids[1]}.git")
    git("init", "-q", "--bare", str(repos / "999.git"))
    done = cli(data, "check")
    assert done.returncode == 1
    problems = done.stderr.strip().splitlines()
    assert len(problems) == 4, done.stderr
    assert any(f"repository {ids[0]} (alice/one): git fsck" in p for p in problems)
    assert any(f"repository {ids[1]} (alice/two): folder" in p and "missing" in p for p in problems)
    assert any("999.git has no repository row" in p for p in problems)
    assert "check found 3 problems" in problems[-1]


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_data_folder_and_secrets_are_private_and_check_warns_when_wider(tmp_path):
    data = tmp_path / "data"
    old = os.umask(0o022)  # the usual umask: 0755 folders, 0644 files unless set otherwise
    try:
        with ServerProcess(data) as server:
            status, _ = server.request(
                "POST",
                "/auth/sign-up",
                {
                    "email": "alice@example.com",
                    "username": "alice",
                    "password": PASSWORD,
                    "name": "Alice",
                },
            )
            assert status == 201
            assert _mode(data) == 0o700
            for name in ("hubsvc.db", "hubsvc.db-wal", "hubsvc.db-shm", "secret_key"):
                assert _mode(data / name) == 0o600, name
            assert ok(cli(data, "check"))
        backup = tmp_path / "backup"
        ok(cli(data, "backup", str(backup)))
        assert _mode(backup) == 0o700
        assert _mode(backup / "hubsvc.db") == _mode(backup / "secret_key") == 0o600
        # An install from before: world-readable. check warns (and still succeeds) ...
        os.chmod(data, 0o755)
        for name in ("hubsvc.db", "secret_key"):
            os.chmod(data / name, 0o644)
        done = cli(data, "check")
        assert done.returncode == 0, done.stderr
        warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
        # (check's own read opened the journal files, which take the database's mode.)
        assert {w.split()[1] for w in warnings} >= {
            str(data),
            str(data / "hubsvc.db"),
            str(data / "secret_key"),
        }, done.stderr
        assert any(f"{data} has mode 0755, wider than 0700" in w for w in warnings)
        assert any("secret_key has mode 0644, wider than 0600" in w for w in warnings)
        # ... and the next start fixes the modes.
        with ServerProcess(data):
            pass
        assert _mode(data) == 0o700
        assert _mode(data / "hubsvc.db") == _mode(data / "secret_key") == 0o600
        assert "warning" not in cli(data, "check").stderr
    finally:
        os.umask(old)
