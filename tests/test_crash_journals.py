"""SIGKILL in the middle of a merge, and between a new repository's row and its folder.

The server is held at the exact point with a real git hook, not with test code in the
service: a `reference-transaction` hook in the bare repository (git runs it around every
ref update, the merge's `git update-ref` included) writes a file and waits, and the test
SIGKILLs the server then. Recovery is by a restart (SQLite) or by the other process of
two (PostgreSQL + Redis), with nothing restarted.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import threading
import time
from pathlib import Path

from .gitcli import ENV
from .server import ServerProcess, seed_owner
from .servers import fresh_postgres_database, postgres_server, redis_server

API = "/api/repositories/owner/proj"
# Waits for the test's release file; exits 1 on "prepared" when asked to (git then
# aborts the update: the branch never moves), 0 otherwise.
HOOK = """#!/bin/sh
state="$1"
lines=$(cat)
case "$lines" in *" refs/heads/main"*) ;; *) exit 0 ;; esac
[ "$state" = "{state}" ] || exit 0
touch "{marks}/held"
i=0
while [ ! -e "{marks}/release" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done
exit {code}
"""


def _git(*args: str, cwd: Path | None = None) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env={**os.environ, **ENV}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _until(check, what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"waited {seconds} s for {what}")
        time.sleep(0.05)


def _two_pulls(server: ServerProcess, tmp_path: Path) -> dict[str, str]:
    """owner/proj with main and topics one and two, a pull request of each; headers."""
    headers, url = seed_owner(server)
    work = tmp_path / "w"
    _git("init", "-q", "-b", "main", str(work))
    (work / "a.txt").write_text("a\n")
    _git("add", "-A", cwd=work)
    _git("commit", "-qm", "base", cwd=work)
    for topic in ("one", "two"):
        _git("checkout", "-q", "-b", topic, "main", cwd=work)
        (work / f"{topic}.txt").write_text(f"{topic}\n")
        _git("add", "-A", cwd=work)
        _git("commit", "-qm", topic, cwd=work)
    _git("push", "-q", url, "main", "one", "two", cwd=work)
    for topic in ("one", "two"):
        status, body = server.request(
            "POST", API + "/pulls", {"title": topic, "head": topic}, headers
        )
        assert status == 201, body
    return headers


def _bare(data: Path) -> Path:
    return next((data / "repositories").glob("*/*.git"))


def _hold_merge(bare: Path, marks: Path, state: str, code: int) -> None:
    marks.mkdir(exist_ok=True)
    hook = bare / "hooks" / "reference-transaction"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text(HOOK.format(state=state, marks=marks, code=code))
    hook.chmod(0o755)


def _merge_and_kill(server: ServerProcess, headers: dict, marks: Path) -> None:
    """Ask for a merge of #1, SIGKILL the server once the hook holds it, release git."""
    answers: list = []

    def ask() -> None:
        try:
            answers.append(
                server.request("POST", API + "/pulls/1/merge", {"method": "merge"}, headers)
            )
        except OSError as err:  # the connection dies with the server
            answers.append(err)

    asking = threading.Thread(target=ask)
    asking.start()
    _until(lambda: (marks / "held").exists(), "the merge to reach the hook")
    server.stop(signal.SIGKILL)
    (marks / "release").touch()  # the orphaned git update-ref ends as the hook says
    asking.join(30)
    assert answers and not isinstance(answers[0], tuple), answers  # no answer was sent


def _events(server: ServerProcess, headers: dict) -> list[dict]:
    status, body = server.request("GET", API + "/events?limit=100", headers=headers)
    assert status == 200, body
    return body["events"]


def _merged_events(events: list[dict], number: int) -> list[dict]:
    return [
        e
        for e in events
        if e["type"] == "pull_request"
        and e["data"]["action"] == "merged"
        and e["data"]["pullRequest"]["number"] == number
    ]


def _pushes_to(events: list[dict], oid: str) -> list[dict]:
    return [e for e in events if e["type"] == "push" and e["data"]["after"] == oid]


def _journal(data: Path) -> tuple[int, list]:
    db = sqlite3.connect(f"file:{data / 'hubsvc.db'}?mode=ro", uri=True, timeout=5)
    try:
        rows = db.execute("SELECT COUNT(*) FROM merges_in_flight").fetchone()[0]
        claims = db.execute("SELECT merging_since FROM pulls ORDER BY issue_id").fetchall()
    finally:
        db.close()
    return rows, [c[0] for c in claims]


def test_a_merge_killed_after_the_branch_moved_is_finished_at_the_next_start(tmp_path):
    data = tmp_path / "data"
    server = ServerProcess(data).start()
    try:
        headers = _two_pulls(server, tmp_path)
    except BaseException:
        server.stop()
        raise
    bare = _bare(data)
    _hold_merge(bare, tmp_path / "marks", "committed", 0)
    _merge_and_kill(server, headers, tmp_path / "marks")
    (bare / "hooks" / "reference-transaction").unlink()
    tip = _git("--git-dir", str(bare), "rev-parse", "refs/heads/main")
    parents = _git("--git-dir", str(bare), "rev-list", "--parents", "-n1", tip).split()
    assert len(parents) == 3  # the merge commit is on the branch
    rows, claims = _journal(data)
    print(f"\nafter SIGKILL: main at merge commit {tip[:10]}, journal rows {rows}, claims {claims}")
    assert rows == 1 and claims[0] is not None

    with ServerProcess(data, server.settings) as again:
        status, pull = again.request("GET", API + "/pulls/1", headers=headers)
        events = _events(again, headers)
        merged, pushes = _merged_events(events, 1), _pushes_to(events, tip)
        rows, claims = _journal(data)
        print(
            f"after restart: #1 {pull['pullRequest']['state']}, merge commit"
            f" {pull['pullRequest']['mergeCommit'][:10]}, merged events {len(merged)},"
            f" push events to it {len(pushes)}, journal rows {rows}, claims {claims}"
        )
        assert pull["pullRequest"]["state"] == "merged"
        assert pull["pullRequest"]["mergeCommit"] == tip
        assert pull["pullRequest"]["mergedBy"]["username"] == "owner"
        assert len(merged) == 1 and len(pushes) == 1
        assert (
            pushes[0]["data"]["before"] == parents[1] and pushes[0]["actor"]["username"] == "owner"
        )
        assert rows == 0 and claims == [None, None]
        # The lock is free and the next merge works; a repeat of the first is refused.
        status, body = again.request("POST", API + "/pulls/2/merge", {"method": "merge"}, headers)
        assert status == 200 and body["pullRequest"]["state"] == "merged", body
        status, _ = again.request("POST", API + "/pulls/1/merge", {"method": "merge"}, headers)
        assert status == 409
        events = _events(again, headers)
        assert len(_merged_events(events, 1)) == 1 and len(_merged_events(events, 2)) == 1
        print(f"then #2 merged: 200; #1 again: {status}")


def test_a_merge_killed_before_the_branch_moved_is_undone_at_the_next_start(tmp_path):
    data = tmp_path / "data"
    server = ServerProcess(data).start()
    try:
        headers = _two_pulls(server, tmp_path)
    except BaseException:
        server.stop()
        raise
    bare = _bare(data)
    before = _git("--git-dir", str(bare), "rev-parse", "refs/heads/main")
    _hold_merge(bare, tmp_path / "marks", "prepared", 1)  # git aborts: main never moves
    _merge_and_kill(server, headers, tmp_path / "marks")
    (bare / "hooks" / "reference-transaction").unlink()
    assert _git("--git-dir", str(bare), "rev-parse", "refs/heads/main") == before
    with ServerProcess(data, server.settings) as again:
        status, pull = again.request("GET", API + "/pulls/1", headers=headers)
        rows, claims = _journal(data)
        print(
            f"\nafter restart: #1 {pull['pullRequest']['state']}, journal rows {rows}, claims {claims}"
        )
        assert pull["pullRequest"]["state"] == "open" and rows == 0 and claims == [None, None]
        assert not _merged_events(_events(again, headers), 1)
        # Free at once (before: locked for 600 s).
        status, body = again.request("POST", API + "/pulls/1/merge", {"method": "merge"}, headers)
        assert status == 200 and body["pullRequest"]["state"] == "merged", body


def test_a_merge_killed_on_one_process_is_finished_by_the_other(tmp_path):
    server_url, redis_url = postgres_server(), redis_server()
    databases = fresh_postgres_database(server_url)
    database = next(databases)
    settings = {
        "database": {"url": database},
        "redis": {"url": redis_url, "prefix": f"crash-merge-{os.getpid()}-{time.time_ns()}"},
    }
    data = tmp_path / "data"
    first = ServerProcess(data, settings).start()
    second = ServerProcess(data, settings)
    try:
        headers = _two_pulls(first, tmp_path)
        second.start()
        bare = _bare(data)
        _hold_merge(bare, tmp_path / "marks", "committed", 0)
        _merge_and_kill(first, headers, tmp_path / "marks")
        (bare / "hooks" / "reference-transaction").unlink()
        tip = _git("--git-dir", str(bare), "rev-parse", "refs/heads/main")
        started = time.monotonic()

        def merged() -> bool:
            return (
                second.request("GET", API + "/pulls/1", headers=headers)[1]["pullRequest"]["state"]
                == "merged"
            )

        _until(merged, "the surviving process to finish the merge")
        waited = time.monotonic() - started
        events = _events(second, headers)
        merged_events, pushes = _merged_events(events, 1), _pushes_to(events, tip)
        print(
            f"\nPostgreSQL, 2 processes: #1 merged by the survivor {waited:.1f} s after the"
            f" SIGKILL (no restart); merged events {len(merged_events)}, push events {len(pushes)}"
        )
        assert len(merged_events) == 1 and len(pushes) == 1
        status, body = second.request("POST", API + "/pulls/2/merge", {"method": "merge"}, headers)
        assert status == 200, body
    finally:
        if second.proc is not None and second.proc.poll() is None:
            second.stop()
        if first.proc is not None and first.proc.poll() is None:
            first.stop()
        next(databases, None)


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    if int(fh.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    return found


def _kill_tree(pid: int) -> None:
    """A crash: the process and everything under it die at once."""
    for kid in _children(pid):
        _kill_tree(kid)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def test_a_fork_killed_between_its_row_and_its_folder_is_removed_at_the_next_start(tmp_path):
    # The fork's `git clone` reads the source's refs; a FIFO in place of the source's
    # packed-refs holds it there, after the row is committed and before the folder is
    # whole. The server and its git are then SIGKILLed together.
    data = tmp_path / "data"
    with ServerProcess(data) as first:  # stopped once the push's upkeep is done
        headers, url = seed_owner(first)
        work = tmp_path / "w"
        _git("init", "-q", "-b", "main", str(work))
        _git("commit", "-q", "--allow-empty", "-m", "one", cwd=work)
        _git("push", "-q", url, "main", cwd=work)
        bob = {"Authorization": "Bearer " + first.sign_up("bob", "12345678")["token"]}
    server = ServerProcess(data, first.settings).start()
    try:
        bare = _bare(data)
        packed = bare / "packed-refs"
        kept = packed.read_bytes() if packed.exists() else None
        packed.unlink(missing_ok=True)
        os.mkfifo(packed)
        answers: list = []

        def ask() -> None:
            try:
                answers.append(server.request("POST", API + "/fork", {"name": "copy"}, bob))
            except OSError as err:
                answers.append(err)

        asking = threading.Thread(target=ask)
        asking.start()
        _until(
            lambda: server.request("GET", "/api/repositories/bob/copy", headers=bob)[0] == 200,
            "the fork's row",
        )
        assert server.proc is not None
        _kill_tree(server.proc.pid)
        server.stop(signal.SIGKILL)
        asking.join(30)
    finally:
        if server.proc is not None and server.proc.poll() is None:
            server.stop()
    packed.unlink()
    if kept is not None:
        packed.write_bytes(kept)
    assert answers and not isinstance(answers[0], tuple), answers  # no 201 was sent
    folders = sorted(p.name for p in (data / "repositories").glob("*/*.git"))
    print(f"\nafter SIGKILL: the fork's row committed, no 201 sent; folders {folders}")

    with ServerProcess(data, server.settings) as again:
        gone = again.request("GET", "/api/repositories/bob/copy", headers=bob)[0]
        left = sorted(p.name for p in (data / "repositories").glob("*/*.git"))
        print(f"after restart: GET bob/copy {gone}, folders {left}")
        assert gone == 404 and left == [bare.name]
        # The name is free and a retry makes exactly the fork asked for.
        status, body = again.request("POST", API + "/fork", {"name": "copy"}, bob)
        assert status == 201, body
        clone = subprocess.run(
            [
                "git",
                "clone",
                "-q",
                again.url.replace("http://", "http://bob:12345678@") + "/bob/copy.git",
                str(tmp_path / "c"),
            ],
            env={**os.environ, **ENV},
            capture_output=True,
            text=True,
        )
        assert clone.returncode == 0, clone.stderr
        assert _git("log", "--format=%s", cwd=tmp_path / "c") == "one"
        print(f"retry: 201, clone of the fork works (git exit {clone.returncode})")


def test_a_repository_whose_folder_is_gone_is_made_empty_at_start(tmp_path):
    # A row with no folder and no creation mark (a kill mid-create before the mark
    # existed, or a folder lost on disk): its git routes answered 500. It may have
    # issues in use, so it is kept and made an empty repository.
    data = tmp_path / "data"
    first = ServerProcess(data).start()
    try:
        headers, url = seed_owner(first)
        assert first.request("POST", API + "/issues", {"title": "kept"}, headers)[0] == 201
    finally:
        first.stop(signal.SIGKILL)  # committed already; no need to wait for a clean stop
    bare = _bare(data)
    subprocess.run(["rm", "-rf", str(bare)], check=True)
    with ServerProcess(data, first.settings) as again:
        url = again.url.replace("http://", "http://owner:12345678@") + "/owner/proj.git"
        work = tmp_path / "w"
        _git("init", "-q", "-b", "main", str(work))
        _git("commit", "-q", "--allow-empty", "-m", "one", cwd=work)
        push = subprocess.run(
            ["git", "push", "-q", url, "main"],
            cwd=work,
            env={**os.environ, **ENV},
            capture_output=True,
            text=True,
        )
        issue = again.request("GET", API + "/issues/1", headers=headers)[0]
        print(f"\nfolder removed, restarted: push exit {push.returncode}, issue #1 {issue}")
        assert push.returncode == 0, push.stderr
        assert issue == 200 and bare.is_dir()
