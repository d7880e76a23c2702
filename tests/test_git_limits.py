"""The [git] limits: bounded memory for huge blobs, paged trees, cut diffs, refused pushes,
killed git processes, and sign-ins that never wait behind git reads."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import aiohttp

from hubsvc.app import create_app
from hubsvc.git.files import GIT_THREADS, REPO_FILES
from hubsvc.git.repo import GitRepo
from hubsvc.keys import CONFIG

from .conftest import make_config, sign_up
from .gitcli import ENV, git, remote
from .server import ServerProcess, seed_owner
from .test_repos import create

MIB = 1 << 20


async def limited_client(aiohttp_client, tmp_path, **git_limits):
    """A test client over an app whose [git] section has the given values."""
    config = make_config(tmp_path, **{f"git__{key}": value for key, value in git_limits.items()})
    return await aiohttp_client(create_app(config))


async def push_files(
    client,
    user,
    work: Path,
    name: str,
    files: dict[str, bytes],
    message: str = "files",
    check: bool = True,
) -> tuple[int, str, str]:
    """Commit files in work (a new repository the first time) and push main to name."""
    if not work.exists():
        await git("init", "-q", "-b", "main", str(work))
    for path, data in files.items():
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_bytes(data)
    await git("add", "-A", cwd=work)
    await git("commit", "-qm", message, cwd=work)
    return await git(
        "push", "-q", remote(client, user, user.username, name), "main", cwd=work, check=check
    )


def _rss_mib(pid: int) -> tuple[int, int]:
    """(VmRSS, VmHWM) of a process in MiB."""
    values = {}
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                values[key] = int(rest.split()[0]) // 1024
    return values["VmRSS"], values["VmHWM"]


def _git_in(work: Path) -> Callable[..., str]:
    """A synchronous git runner in a new repository at work (branch main, one small commit)."""
    env = {**os.environ, **ENV}

    def run(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=work, env=env, check=True, capture_output=True, text=True
        ).stdout

    work.mkdir()
    run("init", "-q", "-b", "main")
    (work / "small.txt").write_text("small\n")
    run("add", "small.txt")
    run("commit", "-qm", "small")
    return run


def test_server_memory_stays_bounded_while_a_huge_blob_is_browsed(tmp_path):
    # 256 MiB of zeros: a sparse file, so the disk never holds it, and a pack of 256 KiB.
    size = 256 * MIB
    work = tmp_path / "work"
    run = _git_in(work)
    with open(work / "zeros.bin", "wb") as fh:
        fh.truncate(size)
    # Past bigFileThreshold git streams the file into a pack instead of reading it whole.
    run("-c", "core.bigFileThreshold=1m", "add", "zeros.bin")
    run("commit", "-qm", "zeros")
    head = run("rev-parse", "HEAD").strip()

    with ServerProcess(tmp_path / "data", {"git": {"max_object_bytes": 1 << 30}}) as server:
        status, body = server.request(
            "POST",
            "/auth/sign-up",
            {
                "email": "a@example.com",
                "username": "alice",
                "password": "correct horse",
                "name": "A",
            },
        )
        assert status == 201
        headers = {"Authorization": f"Bearer {body['token']}"}
        assert server.request("POST", "/api/repositories", {"name": "big"}, headers)[0] == 201
        url = server.url.replace("http://", "http://alice:correct%20horse@") + "/alice/big.git"
        run("push", "-q", url, "main")
        pid = server.proc.pid
        peaks: list[int] = []
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                peaks.append(_rss_mib(pid)[0])
                stop.wait(0.01)

        sampler = threading.Thread(target=sample)
        sampler.start()
        try:
            api = "/api/repositories/alice/big"
            status, tree = server.request("GET", api + "/tree")
            assert status == 200
            assert {e["name"]: e["size"] for e in tree["files"]} == {
                "small.txt": 6,
                "zeros.bin": size,
            }
            status, item = server.request("GET", api + "/file?path=zeros.bin")
            assert status == 200
            assert item["file"]["size"] == size and item["file"]["truncated"] is True
            assert item["file"]["content"] == "" and item["file"]["isBinary"] is True
            status, diff = server.request("GET", api + f"/commits/{head}/diff")
            assert status == 200
            assert [(f["path"], f["binary"]) for f in diff["files"]] == [("zeros.bin", True)]
            with urllib.request.urlopen(
                server.url + api + "/file?path=zeros.bin&return=1", timeout=60
            ) as resp:
                assert int(resp.headers["Content-Length"]) == size
                assert resp.headers["Content-Type"] == "application/octet-stream"
                got = 0
                while chunk := resp.read(MIB):
                    assert not chunk.strip(b"\0")
                    got += len(chunk)
            assert got == size
        finally:
            stop.set()
            sampler.join()
        peak = max(max(peaks), _rss_mib(pid)[1])
        # The server starts at about 60 MiB; reading the blob whole took 1 to 2 GiB.
        assert peak < 150, f"server peaked at {peak} MiB"


def test_server_memory_stays_bounded_while_a_range_of_huge_lines_is_diffed(tmp_path):
    # Three single-line 30 MiB files: a pack of kilobytes, 90 MiB of patch text. Reading
    # git's whole output before cutting it took one compare from 64 to 345 MiB.
    work = tmp_path / "work"
    run = _git_in(work)
    run("checkout", "-qb", "topic")
    for letter in "abc":
        (work / f"{letter}.txt").write_bytes(letter.encode() * (30 * MIB) + b"\n")
    run("add", "-A")
    run("commit", "-qm", "three long lines")
    run("checkout", "-q", "main")

    with ServerProcess(tmp_path / "data") as server:
        headers, url = seed_owner(server)
        run("push", "-q", url, "main", "topic")
        api = "/api/repositories/owner/proj"
        status, body = server.request(
            "POST", api + "/pulls", {"title": "t", "head": "topic"}, headers
        )
        assert status == 201, body
        number = body["pullRequest"]["number"]
        pid = server.proc.pid
        start = _rss_mib(pid)[1]

        def text(path: str) -> tuple[int, bytes]:
            try:
                with urllib.request.urlopen(server.url + path, timeout=60) as resp:
                    return resp.status, resp.read()
            except urllib.error.HTTPError as err:
                return err.code, err.read()

        status, compare = server.request("GET", api + "/compare/main...topic")
        assert status == 200 and compare["totalFiles"] == 3
        grown = {"compare": _rss_mib(pid)[1] - start}
        status, files = server.request("GET", api + f"/pulls/{number}/files")
        assert status == 200 and files["totalFiles"] == 3
        grown["files"] = _rss_mib(pid)[1] - start
        for kind in ("diff", "patch"):
            status, data = text(api + f"/pulls/{number}.{kind}")
            assert status == 406 and b"16 MiB" in data, (status, data[:200])
            grown[kind] = _rss_mib(pid)[1] - start
        # At once, from several clients: each holds a chunk, not 16 MiB of text.
        with concurrent.futures.ThreadPoolExecutor(6) as pool:
            answers = list(pool.map(text, [api + f"/pulls/{number}.diff"] * 6))
        assert [status for status, _ in answers] == [406] * 6
        grown["6 parallel .diff"] = _rss_mib(pid)[1] - start
    assert max(grown.values()) < 50, f"peak RSS grew by {grown} MiB"
    for listed in (compare["files"], files["files"]):
        # As a commit's diff answers a side over 4 MiB: no patch, and it says so.
        assert [
            (f["path"], f["status"], f["additions"], f["binary"], f["patch"], f["truncated"])
            for f in listed
        ] == [(f"{letter}.txt", "added", 1, False, "", True) for letter in "abc"]


async def test_files_over_max_blob_bytes_come_without_content_and_stream_raw(
    aiohttp_client, tmp_path
):
    client = await limited_client(aiohttp_client, tmp_path, max_blob_bytes=100)
    alice = await sign_up(client, "alice")
    await create(client, alice, "demo")
    big = "".join(f"line {n}\n" for n in range(200)).encode()
    await push_files(
        client, alice, tmp_path / "w", "demo", {"big.txt": big, "small.txt": b"small\n"}
    )
    api = "/api/repositories/alice/demo/file"
    item = (await (await client.get(api, params={"path": "big.txt"})).json())["file"]
    assert item["size"] == len(big) and item["truncated"] is True and item["content"] == ""
    assert (item["isBinary"], item["encoding"]) == (False, "utf-8")
    resp = await client.get(api, params={"path": "big.txt", "return": "1"})
    assert resp.status == 200 and resp.headers["Content-Type"] == "text/plain; charset=utf-8"
    assert resp.headers["X-Content-Type-Options"] == "nosniff"
    assert int(resp.headers["Content-Length"]) == len(big) and await resp.read() == big
    head = await client.head(api, params={"path": "big.txt", "return": "1"})
    assert head.status == 200 and int(head.headers["Content-Length"]) == len(big)
    assert await head.read() == b""
    again = await client.get(api, params={"path": "big.txt", "return": "1"})
    assert await again.read() == big  # the connection is still good after the HEAD
    # Under the limit nothing changes.
    small = (await (await client.get(api, params={"path": "small.txt"})).json())["file"]
    assert small["content"] == "small\n" and "truncated" not in small


async def test_trees_are_paged_past_max_tree_entries(aiohttp_client, tmp_path):
    client = await limited_client(aiohttp_client, tmp_path, max_tree_entries=10)
    alice = await sign_up(client, "alice")
    await create(client, alice, "demo")
    files = {f"f{n:02d}.txt": b"x\n" for n in range(22)}
    files.update({f"dir{n}/inner.txt": b"y\n" for n in range(3)})
    work = tmp_path / "w"
    await push_files(client, alice, work, "demo", files)
    api = "/api/repositories/alice/demo/tree"
    pages = []
    for params in ({}, {"offset": "10"}, {"offset": "20", "limit": "500"}):
        body = await (await client.get(api, params=params)).json()
        pages.append(body)
    assert [len(p["files"]) for p in pages] == [10, 10, 5]
    assert [p["hasMore"] for p in pages] == [True, True, False]
    names = [e["name"] for p in pages for e in p["files"]]
    assert names == ["dir0", "dir1", "dir2"] + sorted(f for f in files if "/" not in f)
    small = await (await client.get(api, params={"limit": "2", "offset": "1"})).json()
    assert [e["name"] for e in small["files"]] == ["dir1", "dir2"] and small["hasMore"]
    for bad in ({"limit": "0"}, {"offset": "-1"}, {"limit": "x"}):
        resp = await client.get(api, params=bad)
        assert resp.status == 400 and "error" in await resp.json()


async def test_diffs_are_cut_past_max_diff_files_and_max_diff_bytes(aiohttp_client, tmp_path):
    client = await limited_client(aiohttp_client, tmp_path, max_diff_files=3, max_diff_bytes=200)
    alice = await sign_up(client, "alice")
    await create(client, alice, "demo")
    work = tmp_path / "w"
    await push_files(
        client,
        alice,
        work,
        "demo",
        {
            f"{name}.txt": "".join(f"{name} {n}\n" for n in range(20)).encode()
            for name in ("a", "b", "c", "d", "e")
        },
    )
    head = (await git("rev-parse", "HEAD", cwd=work))[1].strip()
    diff = await (await client.get(f"/api/repositories/alice/demo/commits/{head}/diff")).json()
    assert diff["truncated"] is True
    assert [f["path"] for f in diff["files"]] == ["a.txt", "b.txt", "c.txt"]
    assert diff["stats"]["filesChanged"] == 5
    # 200 bytes of patch text in all: a.txt's 20 lines fit, b.txt's are cut, c.txt gets none.
    first, second, third = diff["files"]
    assert "truncated" not in first and first["patch"].count("\n+") == 20
    assert second["truncated"] is True and 0 < len(second["patch"]) < len(first["patch"])
    assert third["truncated"] is True and third["patch"] == ""
    assert all(f["additions"] == 20 for f in diff["files"])
    assert sum(len(f["patch"].encode()) for f in diff["files"]) <= 200
    # A small commit is whole and says so.
    await push_files(client, alice, work, "demo", {"a.txt": b"changed\n"}, "small")
    head = (await git("rev-parse", "HEAD", cwd=work))[1].strip()
    diff = await (await client.get(f"/api/repositories/alice/demo/commits/{head}/diff")).json()
    assert diff["truncated"] is False and "truncated" not in diff["files"][0]


async def test_range_patches_share_max_diff_bytes(aiohttp_client, tmp_path):
    client = await limited_client(aiohttp_client, tmp_path, max_diff_bytes=200)
    alice = await sign_up(client, "alice")
    await create(client, alice, "demo")
    work = tmp_path / "w"
    await push_files(client, alice, work, "demo", {"README.md": b"base\n"})
    await git("checkout", "-qb", "topic", cwd=work)
    for name in ("a", "b", "c"):
        (work / f"{name}.txt").write_text("".join(f"{name} {n}\n" for n in range(20)))
    await git("add", "-A", cwd=work)
    await git("commit", "-qm", "three files", cwd=work)
    await git("push", "-q", remote(client, alice, "alice", "demo"), "topic", cwd=work)
    api = "/api/repositories/alice/demo"
    resp = await client.post(
        api + "/pulls", json={"title": "t", "head": "topic"}, headers=alice.headers
    )
    assert resp.status == 201
    compare = await (await client.get(api + "/compare/main...topic")).json()
    files = await (await client.get(api + "/pulls/1/files")).json()
    for listed in (compare["files"], files["files"]):
        # As a commit's diff: a.txt's 20 lines fit, b.txt's are cut, c.txt gets none.
        first, second, third = listed
        assert "truncated" not in first and first["patch"].count("\n+") == 20
        assert second["truncated"] is True and 0 < len(second["patch"]) < len(first["patch"])
        assert second["patch"].endswith("\n")  # cut between lines
        assert third["truncated"] is True and third["patch"] == ""
        assert all(f["additions"] == 20 for f in listed)
        assert sum(len(f["patch"].encode()) for f in listed) <= 200


async def test_a_range_patch_line_over_a_mib_is_dropped_whole(aiohttp_client, tmp_path):
    client = await limited_client(aiohttp_client, tmp_path)
    alice = await sign_up(client, "alice")
    await create(client, alice, "demo")
    work = tmp_path / "w"
    await push_files(client, alice, work, "demo", {"README.md": b"base\n"})
    await git("checkout", "-qb", "topic", cwd=work)
    (work / "a.txt").write_bytes(b"x" * (2 * MIB) + b"\ntail\n")
    (work / "b.txt").write_text("bee\n")
    await git("add", "-A", cwd=work)
    await git("commit", "-qm", "a long line", cwd=work)
    await git("push", "-q", remote(client, alice, "alice", "demo"), "topic", cwd=work)
    compare = await (await client.get("/api/repositories/alice/demo/compare/main...topic")).json()
    long, short = compare["files"]
    # Patches keep whole lines only: the long one and all after it are left out.
    assert (long["patch"], long["truncated"], long["additions"]) == ("@@ -0,0 +1,2 @@\n", True, 2)
    assert short["patch"] == "@@ -0,0 +1 @@\n+bee\n" and "truncated" not in short


async def test_a_push_bringing_a_file_over_max_object_bytes_is_refused(aiohttp_client, tmp_path):
    client = await limited_client(aiohttp_client, tmp_path, max_object_bytes=1000)
    alice = await sign_up(client, "alice")
    await create(client, alice, "demo")
    work = tmp_path / "w"
    code, _, err = await push_files(
        client,
        alice,
        work,
        "demo",
        {"ok.txt": b"fine\n", "assets/huge file.bin": os.urandom(3000)},
        check=False,
    )
    assert code != 0
    assert (
        "remote: error: assets/huge file.bin is 0.0 MiB; this server refuses files "
        "over 0.0 MiB ([git] max_object_bytes)" in err
    )
    assert "pre-receive hook declined" in err
    branches = await (await client.get("/api/repositories/alice/demo/branches")).json()
    assert branches["branches"] == []  # no ref moved
    # Without the file the same history goes through.
    await git("rm", "-q", "--cached", "assets/huge file.bin", cwd=work)
    await git("commit", "-q", "--amend", "-m", "files", cwd=work)
    await git("push", "-q", remote(client, alice, "alice", "demo"), "main", cwd=work)
    branches = await (await client.get("/api/repositories/alice/demo/branches")).json()
    assert [b["name"] for b in branches["branches"]] == ["main"]


def _git_children(service: str) -> list[int]:
    """Processes of this test run (the in-process server's children) running service."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == os.getpid() and service.encode() in cmdline:
            found.append(int(entry))
    return found


async def test_a_stalled_upload_pack_is_killed_after_timeout_seconds(aiohttp_client, tmp_path):
    client = await limited_client(aiohttp_client, tmp_path)
    alice = await sign_up(client, "alice")
    await create(client, alice, "demo")
    await push_files(client, alice, tmp_path / "w", "demo", {"a.txt": b"a\n"})
    # Only now: on a loaded machine the push itself could take a second.
    client.app[CONFIG]["git"]["timeout_seconds"] = 1
    never = asyncio.Event()

    async def stalled_body():
        yield b"0011command=fetch"  # a first pkt-line, then nothing more, ever
        await never.wait()

    resp = await client.post(
        "/alice/demo.git/git-upload-pack",
        data=stalled_body(),
        headers={
            "Content-Type": "application/x-git-upload-pack-request",
            "Git-Protocol": "version=2",
        },
        timeout=aiohttp.ClientTimeout(total=30),
    )
    assert resp.status == 408
    assert "git.timeout_seconds" in await resp.text()
    assert _git_children("upload-pack") == []


async def test_sign_in_completes_while_every_git_thread_is_busy(client, alice):
    repo = await create(client, alice, "demo")
    files = client.app[REPO_FILES]
    release = threading.Event()
    # More blocked git reads than there are git threads (or default-pool threads).
    blockers = [
        asyncio.ensure_future(files.run(repo["id"], lambda g: release.wait(60)))
        for _ in range(GIT_THREADS + 4)
    ]
    try:
        await asyncio.sleep(0.1)
        assert not any(b.done() for b in blockers)
        resp = await asyncio.wait_for(
            client.post("/auth/sign-in", json={"username": "alice", "password": alice.password}), 30
        )
        assert resp.status == 200
    finally:
        release.set()
        await asyncio.gather(*blockers)


def test_sizes_come_from_headers_for_loose_packed_and_delta_objects(tmp_path):
    env = {**os.environ, **ENV}
    work, bare = tmp_path / "work", tmp_path / "bare.git"

    def run(*args: str, cwd: Path = work) -> str:
        return subprocess.run(
            ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
        ).stdout

    GitRepo.init_bare(bare, "main").close()
    work.mkdir()
    run("init", "-q", "-b", "main")
    base = "".join(f"row {n} of a file that deltas well\n" for n in range(400))
    for round_ in range(4):
        for n in range(3):
            (work / f"f{n}.txt").write_text(base + f"round {round_} file {n}\n" * (round_ + 1))
        (work / "empty.txt").write_text("")
        run("add", "-A")
        run("commit", "-qm", f"round {round_}")
        # The first push unpacks to loose objects; later ones keep their (thin) packs.
        unpack = "100" if round_ == 0 else "1"
        run("--git-dir", str(bare), "config", "receive.unpackLimit", unpack, cwd=tmp_path)
        run("push", "-q", str(bare), "main")
    expected = {}
    for line in run("--git-dir", str(bare), "ls-tree", "-l", "main", cwd=tmp_path).splitlines():
        meta, name = line.split("\t")
        expected[name] = int(meta.split()[3])

    def sizes() -> dict[str, int]:
        with GitRepo(bare) as repo:
            return {e["name"]: e["size"] for e in repo.tree("main", "")}

    assert sizes() == expected
    run("--git-dir", str(bare), "repack", "-adfq", "--depth=50", cwd=tmp_path)
    verify = run(
        "--git-dir",
        str(bare),
        "verify-pack",
        "-v",
        *map(str, (bare / "objects" / "pack").glob("*.idx")),
        cwd=tmp_path,
    )
    assert any(len(line.split()) == 7 for line in verify.splitlines())  # deltas are there
    assert sizes() == expected


async def test_a_raw_download_running_over_timeout_seconds_is_cut(aiohttp_client, tmp_path):
    client = await limited_client(aiohttp_client, tmp_path, max_blob_bytes=10)
    alice = await sign_up(client, "alice")
    await create(client, alice, "demo")
    work = tmp_path / "w"
    await git("init", "-q", "-b", "main", str(work))
    with open(work / "zeros.bin", "wb") as fh:
        fh.truncate(64 * MIB)  # more than the socket buffers hold, so git must wait on us
    await git("-c", "core.bigFileThreshold=1m", "add", "zeros.bin", cwd=work)
    await git("commit", "-qm", "zeros", cwd=work)
    await git("push", "-q", remote(client, alice, "alice", "demo"), "main", cwd=work)
    client.app[CONFIG]["git"]["timeout_seconds"] = 1  # after the push, which may take longer
    resp = await client.get(
        "/api/repositories/alice/demo/file", params={"path": "zeros.bin", "return": "1"}
    )
    assert resp.status == 200 and int(resp.headers["Content-Length"]) == 64 * MIB
    await resp.content.readexactly(MIB)
    await asyncio.sleep(2)  # a client that stalls past git.timeout_seconds
    try:
        await resp.read()
    except aiohttp.ClientPayloadError:
        pass
    else:
        raise AssertionError("the stalled download was not cut")
    assert _git_children("cat-file") == []
