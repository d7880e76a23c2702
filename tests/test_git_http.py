"""Smart HTTP with the real git CLI, and every browsing endpoint checked against what was pushed."""

from __future__ import annotations

import base64
import os
from pathlib import Path

from hubsvc.app import create_app
from hubsvc.git.files import REPO_FILES

from .conftest import make_config, sign_up
from .gitcli import git, remote
from .test_repos import create

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)


async def build_worktree(path: Path) -> dict[str, str]:
    """A repository with branches, a tag, a binary file, a rename and nested folders."""
    await git("init", "-q", "-b", "main", str(path))
    (path / "src" / "deep" / "deeper").mkdir(parents=True)
    (path / "README.md").write_text("# Demo\n\nline two\n")
    (path / "src" / "app.py").write_text("print('hello')\n")
    (path / "src" / "deep" / "deeper" / "leaf.txt").write_text("leaf\n")
    (path / "logo.png").write_bytes(PNG)
    (path / "data.bin").write_bytes(bytes(range(256)) * 4)
    await git("add", "-A", cwd=path)
    await git("commit", "-qm", "first", cwd=path)
    await git("mv", "src/app.py", "src/main.py", cwd=path)
    await git("commit", "-qm", "rename app to main", cwd=path)
    (path / "README.md").write_text("# Demo\n\nline two changed\nline three\n")
    await git("commit", "-qam", "edit readme", cwd=path)
    await git("tag", "v1", cwd=path)
    await git("checkout", "-qb", "feature", cwd=path)
    (path / "feature.txt").write_text("feature work\n")
    await git("add", "feature.txt", cwd=path)
    await git("commit", "-qm", "feature commit", cwd=path)
    await git("checkout", "-q", "main", cwd=path)
    refs = (await git("for-each-ref", "--format=%(refname) %(objectname)", cwd=path))[1]
    return dict(line.split(" ") for line in refs.splitlines())


async def pushed_repo(client, user, tmp_path, name="demo", **extra):
    await create(client, user, name, **extra)
    work = tmp_path / f"work-{name}"
    refs = await build_worktree(work)
    await git("push", "-q", remote(client, user, user.username, name), "--all", cwd=work)
    await git("push", "-q", remote(client, user, user.username, name), "--tags", cwd=work)
    return work, refs


async def test_push_then_clone_gives_back_the_same_repository(client, events, alice, tmp_path):
    work, refs = await pushed_repo(client, alice, tmp_path)
    clone = tmp_path / "clone"
    await git("clone", "-q", remote(client, None, "alice", "demo"), str(clone))
    await git("fetch", "-q", "origin", "--tags", cwd=clone)
    cloned = (
        await git(
            "for-each-ref",
            "--format=%(refname) %(objectname)",
            "refs/remotes/origin/main",
            "refs/remotes/origin/feature",
            "refs/tags",
            cwd=clone,
        )
    )[1]
    cloned = {
        n.replace("refs/remotes/origin/", "refs/heads/"): o
        for n, o in (line.split(" ") for line in cloned.splitlines())
    }
    assert cloned == refs
    for rel in ("README.md", "logo.png", "data.bin", "src/main.py", "src/deep/deeper/leaf.txt"):
        assert (clone / rel).read_bytes() == (work / rel).read_bytes()
    assert (await git("fsck", "--strict", cwd=clone))[0] == 0
    # One push event per updated ref, with the commits it brought.
    await events.wait_for(3)
    pushes = {e.data["ref"]: e for e in events.of("push")}
    main = pushes["refs/heads/main"]
    assert main.data["before"] == "0" * 40 and main.data["after"] == refs["refs/heads/main"]
    assert main.data["totalCommits"] == 3
    assert [c["message"].strip() for c in main.data["commits"]] == [
        "edit readme",
        "rename app to main",
        "first",
    ]
    assert main.actor["username"] == "alice"
    assert "action" not in main.data


async def test_browsing_matches_what_was_pushed(client, alice, tmp_path):
    work, refs = await pushed_repo(client, alice, tmp_path)
    api = "/api/repositories/alice/demo"
    branches = (await (await client.get(api + "/branches")).json())["branches"]
    assert [(b["name"], b["commit"]["oid"], b["isDefault"]) for b in branches] == [
        ("feature", refs["refs/heads/feature"], False),
        ("main", refs["refs/heads/main"], True),
    ]

    log = (await git("log", "--format=%H", "feature", cwd=work))[1].split()
    body = await (await client.get(api + "/commits?branch=feature&limit=2")).json()
    assert [c["oid"] for c in body["commits"]] == log[:2] and body["hasMore"] is True
    body = await (await client.get(api + "/commits?branch=feature&limit=2&skip=2")).json()
    assert [c["oid"] for c in body["commits"]] == log[2:] and body["hasMore"] is False
    first = body["commits"][-1]
    assert first["author"] == {
        "name": "Tess Ter",
        "email": "tess@example.com",
        "date": "2026-01-02T03:04:05Z",
    }
    assert first["timestamp"] == 1767323045000 and first["parents"] == []
    tag_log = await (await client.get(api + "/commits?branch=v1")).json()
    assert [c["oid"] for c in tag_log["commits"]] == log[1:]
    by_oid = await (await client.get(api + f"/commits?branch={log[1]}")).json()
    assert [c["oid"] for c in by_oid["commits"]] == log[1:]
    assert (await client.get(api + "/commits?branch=nope")).status == 404

    rename_oid = log[2]
    diff = await (await client.get(api + f"/commits/{rename_oid}/diff")).json()
    assert diff["commit"]["oid"] == rename_oid
    assert [(f["status"], f["oldPath"], f["path"]) for f in diff["files"]] == [
        ("renamed", "src/app.py", "src/main.py")
    ]
    root = await (await client.get(api + f"/commits/{log[3]}/diff")).json()
    statuses = {f["path"]: (f["status"], f["binary"]) for f in root["files"]}
    assert statuses["logo.png"] == ("added", True) and statuses["README.md"] == ("added", False)
    assert root["stats"]["filesChanged"] == 5
    edit = await (await client.get(api + f"/commits/{log[1]}/diff")).json()
    readme = edit["files"][0]
    assert (readme["additions"], readme["deletions"]) == (2, 1)
    assert "+line three" in readme["patch"]
    assert (await client.get(api + "/commits/xyz/diff")).status == 400
    assert (await client.get(api + "/commits/" + "0" * 40 + "/diff")).status == 404

    tree = await (await client.get(api + "/tree")).json()
    assert tree["isEmpty"] is False
    assert [(e["name"], e["type"]) for e in tree["files"]] == [
        ("src", "dir"),
        ("README.md", "file"),
        ("data.bin", "file"),
        ("logo.png", "file"),
    ]
    listing = (await git("ls-tree", "-l", "main", "src/deep/deeper/", cwd=work))[1].split()
    nested = await (await client.get(api + "/tree?path=src/deep/deeper")).json()
    assert [(e["path"], e["oid"], e["size"], e["mode"]) for e in nested["files"]] == [
        (listing[4], listing[2], int(listing[3]), listing[0])
    ]
    assert (await client.get(api + "/tree?path=missing")).status == 404

    text = await (await client.get(api + "/file?path=README.md")).json()
    assert text["file"]["content"] == (work / "README.md").read_text()
    assert text["file"]["encoding"] == "utf-8" and text["file"]["isBinary"] is False
    binary = await (await client.get(api + "/file?path=logo.png")).json()
    assert binary["file"]["isBinary"] is True and binary["file"]["encoding"] == "base64"
    assert base64.b64decode(binary["file"]["content"]) == PNG
    raw = await client.get(api + "/file?path=data.bin&return=1")
    assert await raw.read() == (work / "data.bin").read_bytes()
    assert raw.headers["X-Content-Type-Options"] == "nosniff"
    assert raw.headers["Content-Type"] == "application/octet-stream"
    raw = await client.get(api + "/file?path=README.md&return=1")
    assert raw.headers["Content-Type"] == "text/plain; charset=utf-8"
    feature = await (await client.get(api + "/file?path=feature.txt&branch=feature")).json()
    assert feature["file"]["content"] == "feature work\n"
    assert (await client.get(api + "/file?path=feature.txt")).status == 404


async def test_answers_by_oid_are_immutable_with_etags(client, alice, tmp_path):
    _, refs = await pushed_repo(client, alice, tmp_path)
    api = "/api/repositories/alice/demo"
    oid = refs["refs/heads/main"]
    for path in (
        f"/commits/{oid}/diff",
        f"/tree?branch={oid}",
        f"/file?branch={oid}&path=README.md",
        f"/commits?branch={oid}",
    ):
        resp = await client.get(api + path)
        assert "immutable" in resp.headers["Cache-Control"], path
        again = await client.get(api + path, headers={"If-None-Match": resp.headers["ETag"]})
        assert again.status == 304, path
    resp = await client.get(api + "/tree")
    assert "immutable" not in resp.headers["Cache-Control"]
    assert (
        await client.get(api + "/tree", headers={"If-None-Match": resp.headers["ETag"]})
    ).status == 304


async def test_traversal_paths_never_escape(client, alice, tmp_path):
    await pushed_repo(client, alice, tmp_path)
    api = "/api/repositories/alice/demo"
    for bad in (
        "../../etc/passwd",
        "src/../../x",
        "/etc/passwd",
        "src%00x",
        "src\\deep",
        "%2e%2e/%2e%2e/etc/passwd",
        "./README.md",
        "..%2fconfig",
    ):
        for endpoint in ("tree", "file"):
            resp = await client.get(f"{api}/{endpoint}?path={bad}")
            assert resp.status in (400, 404), (endpoint, bad)
            assert "root:" not in await resp.text()
    assert (await client.get(f"{api}/file?path=config")).status == 404  # the bare repo's own file


async def test_private_repository_and_clone_rules(client, alice, bob, tmp_path):
    carol = await sign_up(client, "carol")
    await pushed_repo(client, alice, tmp_path, "hidden", visibility="private")
    await client.put(
        "/api/repositories/alice/hidden/collaborators/carol",
        json={"permission": "read"},
        headers=alice.headers,
    )
    code, _, err = await git(
        "clone", remote(client, None, "alice", "hidden"), str(tmp_path / "anon"), check=False
    )
    assert code != 0 and (
        "Authentication failed" in err
        or "terminal prompts disabled" in err
        or "could not read Username" in err
    )
    resp = await client.get("/alice/hidden.git/info/refs?service=git-upload-pack")
    assert resp.status == 401 and resp.headers["WWW-Authenticate"] == 'Basic realm="hubsvc"'
    resp = await client.get("/alice/missing.git/info/refs?service=git-upload-pack")
    assert resp.status == 401
    code, _, err = await git(
        "clone", remote(client, bob, "alice", "hidden"), str(tmp_path / "bob"), check=False
    )
    assert code != 0 and "not found" in err
    code, _, err = await git(
        "clone",
        remote(client, bob, "alice", "hidden", "wrong-password"),
        str(tmp_path / "bad"),
        check=False,
    )
    assert code != 0
    await git("clone", "-q", remote(client, carol, "alice", "hidden"), str(tmp_path / "carol"))
    # A reader may not push.
    work = tmp_path / "carol"
    (work / "x.txt").write_text("x\n")
    await git("add", "x.txt", cwd=work)
    await git("commit", "-qm", "reader change", cwd=work)
    code, _, err = await git("push", "origin", "main", cwd=work, check=False)
    assert code != 0 and "403" in err
    before = await (
        await client.get("/api/repositories/alice/hidden/branches", headers=alice.headers)
    ).json()
    # A token works as the Basic password too.
    await git(
        "clone",
        "-q",
        remote(client, alice, "alice", "hidden", alice.token),
        str(tmp_path / "bytoken"),
    )
    after = await (
        await client.get("/api/repositories/alice/hidden/branches", headers=alice.headers)
    ).json()
    assert before == after


async def test_anonymous_push_to_public_repo_is_challenged(client, alice, tmp_path):
    work, _ = await pushed_repo(client, alice, tmp_path)
    code, _, err = await git(
        "push", remote(client, None, "alice", "demo"), "main:other", cwd=work, check=False
    )
    assert code != 0
    resp = await client.get("/alice/demo.git/info/refs?service=git-receive-pack")
    assert resp.status == 401
    resp = await client.get("/alice/demo.git/info/refs?service=nonsense")
    assert resp.status == 400


async def test_empty_repository_and_first_push_sets_default_branch(client, alice, tmp_path):
    await create(client, alice, "empty")
    api = "/api/repositories/alice/empty"
    assert await (await client.get(api + "/tree")).json() == {"files": [], "isEmpty": True}
    assert await (await client.get(api + "/commits")).json() == {"commits": [], "hasMore": False}
    assert await (await client.get(api + "/branches")).json() == {"branches": [], "hasMore": False}
    assert (await client.get(api + "/file?path=README.md")).status == 404
    code, _, err = await git(
        "clone", remote(client, None, "alice", "empty"), str(tmp_path / "e"), check=False
    )
    assert code == 0 and "empty repository" in err
    work = tmp_path / "e"
    (work / "a.txt").write_text("a\n")
    await git("add", "a.txt", cwd=work)
    await git("commit", "-qm", "first", cwd=work)
    await git("push", "-q", remote(client, alice, "alice", "empty"), "HEAD:trunk", cwd=work)
    repo = (await (await client.get(api)).json())["repo"]
    assert repo["defaultBranch"] == "trunk"
    assert repo["updatedAt"] >= repo["createdAt"]
    tree = await (await client.get(api + "/tree")).json()
    assert [e["name"] for e in tree["files"]] == ["a.txt"]
    clone = tmp_path / "again"
    await git("clone", "-q", remote(client, None, "alice", "empty"), str(clone))
    assert (await git("rev-parse", "--abbrev-ref", "HEAD", cwd=clone))[1].strip() == "trunk"


async def test_push_over_the_limit_is_refused_and_changes_nothing(aiohttp_client, tmp_path):
    client = await aiohttp_client(create_app(make_config(tmp_path, limits__push_bytes=20000)))
    user = await sign_up(client, "pusher")
    await create(client, user, "small", autoInit=True)
    work = tmp_path / "w"
    await git("clone", "-q", remote(client, user, "pusher", "small"), str(work))
    before = (await git("ls-remote", remote(client, user, "pusher", "small"), cwd=work))[1]
    (work / "big.bin").write_bytes(os.urandom(100_000))
    await git("add", "big.bin", cwd=work)
    await git("commit", "-qm", "big", cwd=work)
    code, _, err = await git("push", "origin", "main", cwd=work, check=False)
    assert code != 0
    after = (await git("ls-remote", remote(client, user, "pusher", "small"), cwd=work))[1]
    assert before == after
    bare = client.app[REPO_FILES].path(1)
    assert (await git("--git-dir", str(bare), "fsck", "--no-progress"))[0] == 0


async def test_fork_has_the_full_history_and_outlives_its_parent(client, alice, bob, tmp_path):
    _, refs = await pushed_repo(client, alice, tmp_path)
    resp = await client.post(
        "/api/repositories/alice/demo/fork", json={"name": "mine"}, headers=bob.headers
    )
    assert resp.status == 201
    assert (
        await client.delete("/api/repositories/alice/demo", headers=alice.headers)
    ).status == 204
    clone = tmp_path / "forkclone"
    await git("clone", "-q", "--mirror", remote(client, None, "bob", "mine"), str(clone))
    got = (await git("for-each-ref", "--format=%(refname) %(objectname)", cwd=clone))[1]
    assert dict(line.split(" ") for line in got.splitlines()) == refs
    assert (await git("fsck", "--strict", cwd=clone))[0] == 0


async def test_a_password_change_ends_cached_git_credentials(client, alice, tmp_path):
    from hubsvc.keys import STORE
    from hubsvc.web.auth import hash_password

    await create(client, alice, "creds", autoInit=True, visibility="private")
    url = remote(client, alice, "alice", "creds")
    assert (await git("ls-remote", url))[0] == 0  # verified once, now remembered
    new_hash = await hash_password("another password", 4)
    await client.app[STORE].users.set_password(int(alice.id), new_hash)
    code, _, _ = await git("ls-remote", url, check=False)
    assert code != 0
    assert (await git("ls-remote", remote(client, alice, "alice", "creds", "another password")))[
        0
    ] == 0


async def test_gits_probe_before_a_large_push_is_answered_without_receive_pack(
    client, events, alice, tmp_path
):
    """A body over http.postBuffer is preceded by a lone flush-pkt checking the credentials."""
    await create(client, alice, "probed")
    url = "/alice/probed.git/git-receive-pack"
    probe = {"Content-Type": "application/x-git-receive-pack-request"}
    basic = "Basic " + base64.b64encode(f"alice:{alice.password}".encode()).decode()
    resp = await client.post(url, data=b"0000", headers=probe)
    assert resp.status == 401  # still a credential check
    resp = await client.post(url, data=b"0000", headers={**probe, "Authorization": basic})
    assert resp.status == 200 and await resp.read() == b""
    assert resp.headers["Content-Type"] == "application/x-git-receive-pack-result"
    resp = await client.post(url, data=b"0001", headers={**probe, "Authorization": basic})
    assert resp.status == 400
    # git itself, made to probe: a small post buffer and a body over it.
    work = tmp_path / "w"
    await git("init", "-q", "-b", "main", str(work))
    (work / "noise.bin").write_bytes(os.urandom(20_000))
    await git("add", "-A", cwd=work)
    await git("commit", "-qm", "noise", cwd=work)
    code, _, err = await git(
        "-c",
        "http.postBuffer=1024",
        "-c",
        "http.version=HTTP/1.1",
        "push",
        remote(client, alice, "alice", "probed"),
        "main",
        cwd=work,
        check=False,
    )
    assert code == 0, err
    await events.wait_for(1)
    [pushed] = events.of("push")
    assert pushed.data["ref"] == "refs/heads/main" and pushed.data["totalCommits"] == 1
