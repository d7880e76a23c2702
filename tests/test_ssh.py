"""git over SSH through the stock OpenSSH client and stock git, against a real server process."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from .server import ServerProcess, free_port, several, stop_all
from .test_metrics import SECRET as METRICS_SECRET
from .test_metrics import scrape, value


@pytest.fixture(autouse=True)
def _openssh():
    """Skip with one line without the OpenSSH client, or fail where HUBSVC_TEST_SSH=1 (as
    .ci/run sets it) says it must be there."""
    if shutil.which("ssh") is None:
        if os.environ.get("HUBSVC_TEST_SSH") == "1":
            pytest.fail("HUBSVC_TEST_SSH=1 but the OpenSSH client (ssh) is not installed")
        pytest.skip("needs the OpenSSH client (ssh)")


TIMEOUT = 60
NO_SHELL = "You've successfully authenticated, but hubsvc does not provide shell access."


class Site:
    """One server with SSH on, and what a client needs to reach it."""

    def __init__(self, server: ServerProcess, port: int, root: Path) -> None:
        self.server, self.port, self.root = server, port, root
        self.known_hosts = root / "known_hosts"
        pub = subprocess.run(
            ["ssh-keygen", "-y", "-f", str(server.data_dir / "ssh" / "ssh_host_ed25519_key")],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        self.host_key = pub
        self.known_hosts.write_text(f"[127.0.0.1]:{port} {pub}\n")
        self.tokens: dict[str, str] = {}

    def api(self, method: str, path: str, body=None, user: str | None = None):
        headers = {"Authorization": f"Bearer {self.tokens[user]}"} if user else {}
        return self.server.request(method, path, body, headers)

    def sign_up(self, username: str) -> None:
        self.tokens[username] = self.server.sign_up(username, "12345678")["token"]

    def ssh_command(self, key: Path, *extra: str) -> str:
        return " ".join(
            [
                "ssh",
                "-i",
                str(key),
                "-F",
                "/dev/null",
                "-o",
                "IdentitiesOnly=yes",
                "-o",
                "BatchMode=yes",
                "-o",
                f"UserKnownHostsFile={self.known_hosts}",
                "-o",
                "StrictHostKeyChecking=yes",
                "-p",
                str(self.port),
                *extra,
            ]
        )

    def git(self, key: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
        env = {
            **os.environ,
            "GIT_SSH_COMMAND": self.ssh_command(key),
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@example.com",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@example.com",
        }
        return subprocess.run(
            ["git", *args],
            cwd=cwd or self.root,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )

    def ssh(self, key: Path, *args: str, opts: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
        return subprocess.run(
            [*self.ssh_command(key, *opts).split(), "git@127.0.0.1", *args],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            stdin=subprocess.DEVNULL,
        )

    def url(self, owner: str, name: str) -> str:
        return f"ssh://git@127.0.0.1:{self.port}/{owner}/{name}.git"


def keypair(root: Path, name: str) -> tuple[Path, str]:
    """A fresh Ed25519 key: its private file and its public line."""
    path = root / f"key-{name}"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(path)], check=True
    )
    return path, path.with_suffix(".pub").read_text().strip()


@contextlib.contextmanager
def open_site(root: Path, settings: dict | None = None) -> Iterator[Site]:
    """A server with SSH on a free port, alice (an administrator) with pub and priv."""
    port = free_port()
    merged = {**(settings or {})}
    merged["ssh"] = {"port": port, **merged.get("ssh", {})}
    with ServerProcess(root / "data", merged) as server:
        built = Site(server, port, root)
        for user in ("alice", "bob", "carol"):  # alice, the first, is an administrator
            built.sign_up(user)
        assert built.api("POST", "/api/repositories", {"name": "pub"}, "alice")[0] == 201
        body = {"name": "priv", "visibility": "private"}
        assert built.api("POST", "/api/repositories", body, "alice")[0] == 201
        yield built


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Iterator[Site]:
    with open_site(tmp_path_factory.mktemp("ssh"), {"metrics": {"token": METRICS_SECRET}}) as built:
        yield built


def hold(site: Site, key: Path, path: str = "alice/pub.git") -> subprocess.Popen:
    """An open session: upload-pack has advertised its refs and waits for the client."""
    held = subprocess.Popen(
        [*site.ssh_command(key).split(), "git@127.0.0.1", f"git-upload-pack '{path}'"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert held.stdout is not None
    assert held.stdout.read(4)  # the advertisement began
    return held


def release(held: subprocess.Popen) -> None:
    if held.poll() is None:
        held.kill()
    held.wait()
    for pipe in (held.stdin, held.stdout, held.stderr):
        assert pipe is not None
        pipe.close()


def register(
    site: Site, line: str, user: str, repo: str | None = None, read_only: bool = True
) -> int:
    """Register a public key line through the API: to user's account, or as a deploy key."""
    if repo is None:
        path, body = "/api/users/me/keys", {"title": "k", "key": line}
    else:
        path = f"/api/repositories/{repo}/keys"
        body = {"title": "k", "key": line, "readOnly": read_only}
    status, answer = site.api("POST", path, body, user)
    assert status == 201, answer
    return int(answer["key"]["id"])


def unregister(site: Site, key_id: int, user: str) -> None:
    status, body = site.api("DELETE", f"/api/users/me/keys/{key_id}", user=user)
    assert status == 204, body


def add_key(site: Site, user: str, name: str) -> tuple[Path, int]:
    path, line = keypair(site.root, name)
    return path, register(site, line, user=user)


def commit_and_push(site: Site, key: Path, work: Path, message: str, ref: str = "main"):
    site.git(key, "commit", "-q", "--allow-empty", "-m", message, cwd=work)
    return site.git(key, "push", "origin", f"HEAD:{ref}", cwd=work)


def test_meta_names_the_host_keys_and_repositories_their_ssh_url(site):
    status, body = site.api("GET", "/api/meta")
    assert status == 200, body
    blob = base64.b64decode(site.host_key.split()[1])
    expected = base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
    assert body["sshHostKeyFingerprints"]["SHA256_ED25519"] == expected
    assert set(body["sshHostKeyFingerprints"]) == {"SHA256_ED25519", "SHA256_RSA"}
    status, repo = site.api("GET", "/api/repositories/alice/pub")
    assert repo["repo"]["sshUrl"] == site.url("alice", "pub")
    # Made once, mode 0600.
    for name in ("ssh_host_ed25519_key", "ssh_host_rsa_key"):
        assert (site.server.data_dir / "ssh" / name).stat().st_mode & 0o777 == 0o600


def test_clone_and_push_public_and_private_over_both_url_forms(site, tmp_path):
    key, _ = add_key(site, "alice", "alice-laptop")
    work = tmp_path / "pub"
    cloned = site.git(key, "clone", "-q", site.url("alice", "pub"), str(work))
    assert cloned.returncode == 0, cloned.stderr
    pushed = commit_and_push(site, key, work, "first over ssh")
    assert pushed.returncode == 0, pushed.stderr
    # The push is recorded before git returns: its event is there at once.
    status, body = site.api("GET", "/api/repositories/alice/pub/events", user="alice")
    pushes = [e for e in body["events"] if e["type"] == "push"]
    assert pushes and pushes[0]["actor"]["username"] == "alice", body
    assert pushes[0]["data"]["ref"] == "refs/heads/main"
    status, keys = site.api("GET", "/api/users/me/keys", user="alice")
    assert keys["keys"][0]["lastUsedAt"] is not None, keys
    archive = site.git(
        key, "archive", "--format=tar", f"--remote={site.url('alice', 'pub')}", "main", cwd=work
    )
    assert archive.returncode == 0, archive.stderr

    # The scp-like form, with the port in an ssh config file as README shows.
    config = tmp_path / "ssh_config"
    config.write_text(f"Host hubsvc\n  HostName 127.0.0.1\n  Port {site.port}\n  User git\n")
    env = {
        **os.environ,
        "GIT_SSH_COMMAND": site.ssh_command(key)
        .replace("-F /dev/null", f"-F {config}")
        .replace(f" -p {site.port}", ""),
    }
    priv = tmp_path / "priv"
    cloned = subprocess.run(
        ["git", "clone", "-q", "hubsvc:alice/priv.git", str(priv)],
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert cloned.returncode == 0, cloned.stderr
    site.git(key, "commit", "-q", "--allow-empty", "-m", "private over ssh", cwd=priv)
    pushed = subprocess.run(
        ["git", "push", "origin", "HEAD:main"],
        cwd=priv,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert pushed.returncode == 0, pushed.stderr
    again = site.git(key, "clone", "-q", site.url("alice", "priv"), str(tmp_path / "again"))
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "again" / ".git").is_dir()


def test_git_over_ssh_is_counted_in_the_metrics(site, tmp_path):
    """Each of git's three commands over SSH: counted by service, with bytes and duration."""
    key, _ = add_key(site, "alice", "alice-metrics")
    before = scrape(site.server.url + "/metrics")
    work = tmp_path / "pub"
    assert site.git(key, "clone", "-q", site.url("alice", "pub"), str(work)).returncode == 0
    assert commit_and_push(site, key, work, "counted").returncode == 0
    archive = site.git(
        key, "archive", "--format=tar", f"--remote={site.url('alice', 'pub')}", "main", cwd=work
    )
    assert archive.returncode == 0, archive.stderr
    after = scrape(site.server.url + "/metrics")
    ops, moved = "hubsvc_git_operations", "hubsvc_git_bytes"
    for service in ("git-upload-pack", "git-receive-pack", "git-upload-archive"):
        labels = {"service": service, "transport": "ssh"}
        grew = value(after, ops, ops + "_total", outcome="ok", **labels)
        assert grew == value(before, ops, ops + "_total", outcome="ok", **labels) + 1, service
        for direction in ("received", "sent"):
            sent = value(after, moved, moved + "_total", direction=direction, **labels)
            assert sent > value(before, moved, moved + "_total", direction=direction, **labels)
        duration = "hubsvc_git_operation_duration_seconds"
        assert value(after, duration, duration + "_count", **labels) >= 1


def test_a_strangers_key_is_refused(site, tmp_path):
    key, _ = keypair(site.root, "stranger")
    done = site.git(key, "clone", "-q", site.url("alice", "pub"), str(tmp_path / "w"))
    assert done.returncode != 0
    assert "Permission denied (publickey)" in done.stderr
    # No key at all: nothing but publickey is offered (no password, no keyboard-interactive).
    keyless = site.ssh(key, opts=("-T", "-o", "PubkeyAuthentication=no"))
    assert keyless.returncode == 255 and "Permission denied (publickey)." in keyless.stderr


def test_another_users_key_sees_only_what_that_user_may(site, tmp_path):
    key, _ = add_key(site, "bob", "bob-desk")
    hidden = site.git(key, "clone", "-q", site.url("alice", "priv"), str(tmp_path / "p"))
    assert hidden.returncode != 0 and "ERROR: Repository not found." in hidden.stderr
    missing = site.git(key, "clone", "-q", site.url("alice", "nothing"), str(tmp_path / "n"))
    assert missing.returncode != 0 and "ERROR: Repository not found." in missing.stderr
    work = tmp_path / "pub"
    assert site.git(key, "clone", "-q", site.url("alice", "pub"), str(work)).returncode == 0
    refused = commit_and_push(site, key, work, "not mine")
    assert refused.returncode != 0
    assert "ERROR: Permission to alice/pub denied to bob." in refused.stderr


def test_deploy_keys_read_their_repository_only_and_push_only_when_writable(site, tmp_path):
    ro_key, ro_line = keypair(site.root, "deploy-ro")
    rw_key, rw_line = keypair(site.root, "deploy-rw")
    register(site, ro_line, "alice", repo="alice/priv")
    register(site, rw_line, "alice", repo="alice/priv", read_only=False)

    greeting = site.ssh(ro_key, "-T")
    assert greeting.returncode == 1 and f"Hi alice/priv! {NO_SHELL}" in greeting.stderr
    work = tmp_path / "ro"
    cloned = site.git(ro_key, "clone", "-q", site.url("alice", "priv"), str(work))
    assert cloned.returncode == 0, cloned.stderr
    other = site.git(ro_key, "clone", "-q", site.url("alice", "pub"), str(tmp_path / "o"))
    assert other.returncode != 0 and "ERROR: Repository not found." in other.stderr
    refused = commit_and_push(site, ro_key, work, "from a read-only key")
    assert refused.returncode != 0
    assert (
        "ERROR: The key you are authenticating with has been marked as read only." in refused.stderr
    )

    work = tmp_path / "rw"
    assert site.git(rw_key, "clone", "-q", site.url("alice", "priv"), str(work)).returncode == 0
    pushed = commit_and_push(site, rw_key, work, "deployed", ref="deploy")
    assert pushed.returncode == 0, pushed.stderr
    status, body = site.api("GET", "/api/repositories/alice/priv/events", user="alice")
    refs = [e["data"]["ref"] for e in body["events"] if e["type"] == "push"]
    assert "refs/heads/deploy" in refs, body


def test_shells_ptys_and_other_commands_are_refused(site):
    key, _ = add_key(site, "carol", "carol-key")
    shell = site.ssh(key, opts=("-T",))
    assert shell.returncode == 1 and f"Hi carol! {NO_SHELL}" in shell.stderr
    pty = site.ssh(key, opts=("-tt",))  # forced: OpenSSH gives up when refused
    assert pty.returncode != 0 and "PTY allocation request failed" in pty.stderr
    for command in (
        "ls",
        "sh -c id",
        "git-upload-pack '../../etc'",
        "git-upload-pack 'alice/pub/../priv'",
        "git-upload-pack",
        "git-receive-pack 'alice/pub.git' extra",
    ):
        done = site.ssh(key, command)
        assert done.returncode == 1, command
        assert "ERROR: hubsvc serves git only" in done.stderr, (command, done.stderr)
    sftp = site.ssh(key, "sftp", opts=("-s",))
    assert sftp.returncode != 0


def test_a_removed_key_is_refused_at_once_and_its_open_session_closed(site, tmp_path):
    key, key_id = add_key(site, "bob", "bob-soon-gone")
    held = hold(site, key)
    try:
        unregister(site, key_id, "bob")
        removed = time.monotonic()
        held.wait(timeout=10)
        assert time.monotonic() - removed < 2.5
    finally:
        release(held)
    refused = site.ssh(key, opts=("-T",))
    assert refused.returncode == 255 and "Permission denied (publickey)" in refused.stderr


def test_a_disabled_account_is_refused(site, tmp_path):
    site.sign_up("dave")
    key, _ = add_key(site, "dave", "dave-key")
    assert site.ssh(key, opts=("-T",)).returncode == 1
    status, body = site.api("PATCH", "/api/admin/users/dave", {"disabled": True}, "alice")
    assert status == 200, body
    refused = site.ssh(key, opts=("-T",))
    assert refused.returncode == 255 and "Permission denied (publickey)" in refused.stderr


def test_a_protected_branch_refuses_a_push_over_ssh_with_the_rules_line(site, tmp_path):
    key, _ = add_key(site, "alice", "alice-rules")
    status, _ = site.api("POST", "/api/repositories", {"name": "ruled"}, "alice")
    assert status == 201
    work = tmp_path / "ruled"
    assert site.git(key, "clone", "-q", site.url("alice", "ruled"), str(work)).returncode == 0
    assert commit_and_push(site, key, work, "first").returncode == 0
    rule = {
        "requiredPullRequestReviews": {"requiredApprovingReviewCount": 1},
        "enforceAdmins": True,
    }
    path = "/api/repositories/alice/ruled/branches/main/protection"
    assert site.api("PUT", path, rule, "alice")[0] == 200
    refused = commit_and_push(site, key, work, "direct")
    assert refused.returncode != 0
    assert "remote: main is protected: changes must go through a pull request" in refused.stderr


def test_connections_per_address_are_capped_and_idle_ones_end(tmp_path):
    with open_site(tmp_path, {"ssh": {"max_per_ip": 2, "idle_seconds": 3}}) as site:
        key, _ = add_key(site, "alice", "alice-many")
        first, second = hold(site, key), hold(site, key)
        try:
            third = site.ssh(key, opts=("-T",))
            assert third.returncode == 255, third.stderr
            assert "Hi alice" not in third.stderr
            # Silent past idle_seconds: both end, and their places are free again.
            first.wait(timeout=10)
            second.wait(timeout=10)
        finally:
            release(first)
            release(second)
        again = site.ssh(key, opts=("-T",))
        assert again.returncode == 1 and "Hi alice!" in again.stderr


def test_failed_keys_spend_the_sign_in_budget_of_the_address(tmp_path):
    settings = {"rate_limit": {"enabled": True, "sign_in_per_15_minutes": 3}}
    with open_site(tmp_path, settings) as site:
        key, _ = add_key(site, "alice", "alice-real")
        assert site.ssh(key, opts=("-T",)).returncode == 1
        for n in range(4):
            stranger, _ = keypair(site.root, f"guess-{n}")
            assert site.ssh(stranger, opts=("-T",)).returncode == 255
        # Past the budget not even the right key is looked at, as a sign-in's password.
        refused = site.ssh(key, opts=("-T",))
        assert refused.returncode == 255 and "Hi alice" not in refused.stderr


def test_a_push_over_the_size_limit_moves_no_ref(tmp_path):
    with open_site(tmp_path, {"limits": {"push_bytes": 20000}}) as site:
        key, _ = add_key(site, "alice", "alice-big")
        work = tmp_path / "w"
        assert site.git(key, "clone", "-q", site.url("alice", "pub"), str(work)).returncode == 0
        (work / "big").write_bytes(os.urandom(200000))
        site.git(key, "add", "big", cwd=work)
        refused = commit_and_push(site, key, work, "too big")
        assert refused.returncode != 0
        assert "push is larger than 20000 bytes" in refused.stderr, refused.stderr
        status, body = site.api("GET", "/api/repositories/alice/pub/branches", user="alice")
        assert body["branches"] == [], body


def test_a_key_added_on_one_process_works_on_the_others_ssh_port_at_once(tmp_path, redis_url):
    servers = several(tmp_path / "data", 2, redis=redis_url)
    ports = [free_port(), free_port()]
    for server, port in zip(servers, ports, strict=True):
        server.settings["ssh"]["port"] = port
    try:
        for server in servers:  # the first makes the host keys, the second reads them
            server.start()
        roots = [tmp_path / "a", tmp_path / "b"]
        for root in roots:
            root.mkdir()
        one, other = (Site(s, p, r) for s, p, r in zip(servers, ports, roots, strict=True))
        one.sign_up("alice")
        other.tokens = one.tokens
        assert one.host_key == other.host_key  # one data folder, one identity
        assert one.api("GET", "/api/meta") == other.api("GET", "/api/meta")
        assert one.api("POST", "/api/repositories", {"name": "pub"}, "alice")[0] == 201
        key, line = keypair(roots[0], "alice-cluster")
        key_id = register(one, line, "alice")
        greeting = other.ssh(key, opts=("-T",))
        assert greeting.returncode == 1 and "Hi alice!" in greeting.stderr, greeting.stderr
        held = hold(other, key)
        try:
            unregister(one, key_id, "alice")
            removed = time.monotonic()
            held.wait(timeout=10)
            assert time.monotonic() - removed < 2.5
        finally:
            release(held)
        assert other.ssh(key, opts=("-T",)).returncode == 255
    finally:
        stop_all(servers)


def test_a_removed_collaborator_loses_the_repository_on_the_next_connection(site, tmp_path):
    key, _ = add_key(site, "carol", "carol-collab")
    path = "/api/repositories/alice/priv/collaborators/carol"
    assert site.api("PUT", path, {"permission": "write"}, "alice")[0] in (200, 201, 204)
    work = tmp_path / "priv"
    cloned = site.git(key, "clone", "-q", site.url("alice", "priv"), str(work))
    assert cloned.returncode == 0, cloned.stderr
    assert site.api("DELETE", path, None, "alice")[0] in (200, 204)
    gone = site.git(key, "fetch", "-q", "origin", cwd=work)
    assert gone.returncode != 0 and "ERROR: Repository not found." in gone.stderr


def test_several_processes_share_one_port_with_reuse_port(tmp_path, redis_url):
    port = free_port()
    servers = several(tmp_path / "data", 2, {"ssh": {"port": port, "reuse_port": True}}, redis_url)
    try:
        for server in servers:
            server.start()
        site = Site(servers[0], port, tmp_path)
        site.sign_up("alice")
        key, line = keypair(tmp_path, "alice-shared")
        register(site, line, "alice")
        # The kernel spreads the connections over both listeners; every one answers.
        for _ in range(6):
            greeting = site.ssh(key, opts=("-T",))
            assert greeting.returncode == 1 and "Hi alice!" in greeting.stderr, greeting.stderr
    finally:
        stop_all(servers)


def test_the_host_keys_survive_a_restart(tmp_path):
    with open_site(tmp_path) as built:
        key, line = keypair(tmp_path, "alice-restart")
        register(built, line, "alice")
        assert built.ssh(key, opts=("-T",)).returncode == 1
        meta = built.api("GET", "/api/meta")
        built.server.stop()
        built.server.start()
        # The same known_hosts under StrictHostKeyChecking=yes: a new host key would be 255.
        greeting = built.ssh(key, opts=("-T",))
        assert greeting.returncode == 1 and "Hi alice!" in greeting.stderr, greeting.stderr
        assert built.api("GET", "/api/meta") == meta


def test_a_second_identical_clone_over_ssh_is_sent_from_the_pack_cache(site, tmp_path):
    key, _ = add_key(site, "alice", "alice-cache")
    assert site.api("POST", "/api/repositories", {"name": "cached"}, "alice")[0] == 201
    work = tmp_path / "work"
    assert site.git(key, "clone", "-q", site.url("alice", "cached"), str(work)).returncode == 0
    pushed = commit_and_push(site, key, work, "to be cloned twice")
    assert pushed.returncode == 0, pushed.stderr
    cache = site.server.data_dir / "pack-cache"

    def packs() -> dict[str, int]:
        return {p.name: p.stat().st_ino for p in cache.glob("*.pack")}

    before = packs()
    first = site.git(key, "clone", "-q", site.url("alice", "cached"), str(tmp_path / "one"))
    assert first.returncode == 0, first.stderr
    kept = packs()
    assert len(kept) == len(before) + 1  # the pack upload-pack computed, kept
    second = site.git(key, "clone", "-q", site.url("alice", "cached"), str(tmp_path / "two"))
    assert second.returncode == 0, second.stderr
    assert packs() == kept  # the same file, sent again: nothing was computed
    head = site.git(key, "rev-parse", "HEAD", cwd=tmp_path / "two").stdout
    assert head == site.git(key, "rev-parse", "HEAD", cwd=work).stdout
