"""The stock git client as people use it: many refs, both protocols, push events, refs/pull,
push options, readable refusals, partial clones."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from .conftest import sign_up
from .gitcli import git, remote
from .test_repos import create

ZERO = "0" * 40


async def many_refs_repo(
    path: Path, commits: int = 60, branches: int = 40, tags: int = 40
) -> dict[str, str]:
    """A repository with a long history and many branches and tags, made in a few calls."""
    await git("init", "-q", "-b", "main", str(path))
    script = []
    for n in range(commits):
        body = f"line {n}\n"
        script.append(
            f"commit refs/heads/main\ncommitter Tess <t@example.com> {1700000000 + n} +0000\n"
            f"data <<EOT\ncommit {n}\nEOT\n"
            f"M 100644 inline file{n % 7}.txt\ndata {len(body)}\n{body}\n"
        )
    await git("fast-import", "--quiet", cwd=path, stdin="".join(script).encode())
    updates = [f"create refs/heads/branch-{n:02d} main~{n % commits}" for n in range(branches)]
    updates += [f"create refs/tags/v{n}.0 main~{(n * 3) % commits}" for n in range(tags)]
    await git("update-ref", "--stdin", cwd=path, stdin=("\n".join(updates) + "\n").encode())
    await git("checkout", "-q", "-f", "main", cwd=path)
    out = (await git("for-each-ref", "--format=%(refname) %(objectname)", cwd=path))[1]
    return dict(line.split(" ") for line in out.splitlines())


def remote_refs(text: str) -> dict[str, str]:
    return {ref: oid for oid, ref in (line.split("\t") for line in text.splitlines())}


@pytest.mark.parametrize("protocol", ["0", "2"])
async def test_clone_mirror_and_long_fetch_of_a_repository_with_many_refs(
    client, alice, tmp_path, protocol
):
    # Git gzips an upload-pack request over about a kilobyte; 80 wants are well over it.
    await create(client, alice, "big")
    work = tmp_path / "work"
    refs = await many_refs_repo(work)
    url = remote(client, alice, "alice", "big")
    proto = ("-c", f"protocol.version={protocol}")
    await git(*proto, "push", "-q", url, "--all", cwd=work)
    await git(*proto, "push", "-q", url, "--tags", cwd=work)

    mirror = tmp_path / "mirror.git"
    await git(*proto, "clone", "-q", "--mirror", remote(client, None, "alice", "big"), str(mirror))
    got = (await git("for-each-ref", "--format=%(refname) %(objectname)", cwd=mirror))[1]
    assert dict(line.split(" ") for line in got.splitlines()) == refs
    clone = tmp_path / "clone"
    await git(*proto, "clone", "-q", remote(client, None, "alice", "big"), str(clone))
    assert (await git("fsck", "--strict", cwd=clone))[0] == 0

    # A fetch whose negotiation sends many `have` lines: the client holds 300 commits the
    # server never saw, on 30 branches, then fetches new server commits.
    script = "".join(
        f"commit refs/heads/local-{n % 30}\ncommitter L <l@example.com> {1800000000 + n} +0000\n"
        f"data <<EOT\nlocal {n}\nEOT\nM 100644 inline local.txt\ndata 3\n{n % 10}{n % 10}\n\n"
        for n in range(300)
    )
    await git("fast-import", "--quiet", cwd=clone, stdin=script.encode())
    (work / "new.txt").write_text("new\n")
    await git("add", "new.txt", cwd=work)
    await git("commit", "-qm", "new on server", cwd=work)
    await git(*proto, "push", "-q", url, "main", cwd=work)
    await git(*proto, "fetch", "-q", "origin", cwd=clone)
    head = (await git("rev-parse", "origin/main", cwd=clone))[1].strip()
    assert head == (await git("rev-parse", "main", cwd=work))[1].strip()


async def test_push_of_many_refs_at_once_lands_every_ref(client, alice, tmp_path):
    await create(client, alice, "wide")
    work = tmp_path / "work"
    refs = await many_refs_repo(work, commits=30, branches=120, tags=120)
    code, _, err = await git(
        "push",
        "--porcelain",
        remote(client, alice, "alice", "wide"),
        "--all",
        "--follow-tags",
        cwd=work,
    )
    await git("push", "-q", remote(client, alice, "alice", "wide"), "--tags", cwd=work)
    listed = remote_refs(
        (await git("ls-remote", "--heads", "--tags", remote(client, None, "alice", "wide")))[1]
    )
    assert listed == refs


async def push_events(events, count: int) -> list:
    await events.wait_for(count)
    await asyncio.sleep(0.05)
    return events.of("push")


async def test_push_events_describe_what_each_push_did(client, events, alice, tmp_path):
    await create(client, alice, "proj")
    work = tmp_path / "w"
    await git("init", "-q", "-b", "main", str(work))
    for n in range(10):
        (work / "f.txt").write_text(f"{n}\n")
        await git("add", "f.txt", cwd=work)
        await git("commit", "-qm", f"main {n}", cwd=work)
    url = remote(client, alice, "alice", "proj")
    await git("push", "-q", url, "main", cwd=work)
    [first] = await push_events(events, 1)
    assert first.data["created"] is True and first.data["totalCommits"] == 10

    # A new branch with one new commit on top of a ten-commit main: one commit, not eleven.
    await git("checkout", "-qb", "topic", cwd=work)
    (work / "t.txt").write_text("topic\n")
    await git("add", "t.txt", cwd=work)
    await git("commit", "-qm", "topic work", cwd=work)
    await git("push", "-q", url, "topic", cwd=work)
    topic = (await push_events(events, 2))[-1]
    assert topic.data["ref"] == "refs/heads/topic" and topic.data["before"] == ZERO
    assert topic.data["created"] is True and topic.data["deleted"] is False
    assert topic.data["totalCommits"] == 1
    assert [c["message"].strip() for c in topic.data["commits"]] == ["topic work"]
    assert topic.data["summary"] == "created branch topic with 1 new commit"

    # A tag on a commit that is already there brings no commits.
    await git("tag", "v1", "main", cwd=work)
    await git("push", "-q", url, "v1", cwd=work)
    tag = (await push_events(events, 3))[-1]
    assert tag.data["ref"] == "refs/tags/v1" and tag.data["totalCommits"] == 0
    assert tag.data["commits"] == [] and tag.data["summary"].startswith("tagged ")

    # A forced update says so and counts what the new tip brought.
    await git("commit", "-q", "--amend", "-m", "topic rewritten", cwd=work)
    await git("push", "-q", "--force", url, "topic", cwd=work)
    forced = (await push_events(events, 4))[-1]
    assert forced.data["forced"] is True and forced.data["totalCommits"] == 1
    assert forced.data["summary"].startswith("force-pushed topic")

    # A deletion: after is all zeros, nothing new.
    await git("push", "-q", url, ":topic", cwd=work)
    deleted = (await push_events(events, 5))[-1]
    assert deleted.data == {
        **deleted.data,
        "after": ZERO,
        "deleted": True,
        "commits": [],
        "totalCommits": 0,
        "summary": "deleted branch topic",
    }
    assert len(events.of("push")) == 5


async def test_two_pushes_landing_at_once_each_get_their_own_event(client, events, alice, tmp_path):
    await create(client, alice, "proj")
    base = tmp_path / "base"
    await git("init", "-q", "-b", "main", str(base))
    (base / "f.txt").write_text("f\n")
    await git("add", "f.txt", cwd=base)
    await git("commit", "-qm", "base", cwd=base)
    url = remote(client, alice, "alice", "proj")
    await git("push", "-q", url, "main", cwd=base)
    await push_events(events, 1)
    clones = []
    for n in range(4):
        work = tmp_path / f"w{n}"
        await git("clone", "-q", url, str(work))
        await git("checkout", "-qb", f"b{n}", cwd=work)
        for k in range(n + 1):
            (work / f"n{n}.txt").write_text(f"{k}\n")
            await git("add", "-A", cwd=work)
            await git("commit", "-qm", f"b{n} commit {k}", cwd=work)
        clones.append(work)
    await asyncio.gather(*(git("push", "-q", url, f"b{n}", cwd=w) for n, w in enumerate(clones)))
    pushes = (await push_events(events, 5))[1:]
    by_ref = {e.data["ref"]: e for e in pushes}
    assert len(pushes) == 4 and set(by_ref) == {f"refs/heads/b{n}" for n in range(4)}
    for n in range(4):
        assert by_ref[f"refs/heads/b{n}"].data["totalCommits"] == n + 1


async def test_refs_pull_follow_every_pull_request_and_no_push_touches_them(
    client, alice, tmp_path
):
    await create(client, alice, "proj")
    work = tmp_path / "w"
    await git("init", "-q", "-b", "main", str(work))
    (work / "f.txt").write_text("f\n")
    await git("add", "f.txt", cwd=work)
    await git("commit", "-qm", "base", cwd=work)
    await git("checkout", "-qb", "topic", cwd=work)
    (work / "t.txt").write_text("t\n")
    await git("add", "t.txt", cwd=work)
    await git("commit", "-qm", "topic", cwd=work)
    url = remote(client, alice, "alice", "proj")
    await git("push", "-q", url, "main", "topic", cwd=work)
    resp = await client.post(
        "/api/repositories/alice/proj/pulls",
        headers=alice.headers,
        json={"title": "T", "head": "topic"},
    )
    assert resp.status == 201
    listed = remote_refs((await git("ls-remote", url))[1])
    topic = (await git("rev-parse", "topic", cwd=work))[1].strip()
    assert listed["refs/pull/1/head"] == topic

    # It follows the head branch.
    (work / "t.txt").write_text("t2\n")
    await git("commit", "-qam", "more", cwd=work)
    await git("push", "-q", url, "topic", cwd=work)
    topic = (await git("rev-parse", "topic", cwd=work))[1].strip()
    for _ in range(100):
        listed = remote_refs((await git("ls-remote", url))[1])
        if listed["refs/pull/1/head"] == topic:
            break
        await asyncio.sleep(0.05)
    assert listed["refs/pull/1/head"] == topic

    # No push may create, move or delete anything under refs/pull/.
    main = (await git("rev-parse", "main", cwd=work))[1].strip()
    for refspec in (
        f"{main}:refs/pull/1/head",
        ":refs/pull/1/head",
        f"{main}:refs/pull/9/head",
        f"+{main}:refs/pull/1/head",
    ):
        code, _, err = await git("push", url, refspec, cwd=work, check=False)
        assert code != 0 and "hidden ref" in err, (refspec, err)
    after = remote_refs((await git("ls-remote", url))[1])
    assert after["refs/pull/1/head"] == topic and "refs/pull/9/head" not in after


async def test_push_options_are_accepted(client, events, alice, tmp_path):
    await create(client, alice, "proj")
    work = tmp_path / "w"
    await git("init", "-q", "-b", "main", str(work))
    await git("commit", "-q", "--allow-empty", "-m", "one", cwd=work)
    code, _, err = await git(
        "push",
        "-o",
        "ci.skip",
        "-o",
        "key=value",
        remote(client, alice, "alice", "proj"),
        "main",
        cwd=work,
        check=False,
    )
    assert code == 0, err
    assert (await push_events(events, 1))[0].data["ref"] == "refs/heads/main"


async def test_refusals_reach_the_git_user_as_readable_lines(client, alice, tmp_path):
    await create(client, alice, "proj")
    await create(client, alice, "secret", visibility="private")
    bob = await sign_up(client, "bob")
    work = tmp_path / "w"
    await git("init", "-q", "-b", "main", str(work))
    await git("commit", "-q", "--allow-empty", "-m", "one", cwd=work)
    # 403: a reader pushing.
    code, _, err = await git(
        "push", remote(client, bob, "alice", "proj"), "main", cwd=work, check=False
    )
    assert code != 0 and "remote: write access to this repository is required" in err, err
    # 404: a private repository a signed-in caller may not read.
    code, _, err = await git(
        "clone", remote(client, bob, "alice", "secret"), str(tmp_path / "c"), check=False
    )
    assert code != 0 and "remote: repository not found" in err.lower(), err


async def test_error_bodies_on_git_routes_are_plain_text(client, alice):
    await create(client, alice, "proj")
    resp = await client.get("/alice/proj.git/info/refs?service=git-nothing")
    assert resp.status == 400 and resp.content_type == "text/plain"
    assert (await resp.text()).startswith("service must be")
    resp = await client.post(
        "/alice/proj.git/git-upload-pack", data=b"0000", headers={"Content-Type": "text/plain"}
    )
    assert resp.status == 400 and resp.content_type == "text/plain"
    # The API keeps its JSON errors.
    resp = await client.get("/api/repositories/alice/nope")
    assert resp.status == 404 and (await resp.json())["error"]


async def test_push_over_the_size_limit_says_so_in_git(aiohttp_client, tmp_path):
    from hubsvc.app import create_app

    from .conftest import make_config

    client = await aiohttp_client(create_app(make_config(tmp_path, limits__push_bytes=20000)))
    alice = await sign_up(client, "alice")
    await create(client, alice, "proj")
    work = tmp_path / "w"
    await git("init", "-q", "-b", "main", str(work))
    (work / "big.bin").write_bytes(bytes(range(256)) * 400 + b"x" * 7)
    import os

    (work / "rand.bin").write_bytes(os.urandom(60000))
    await git("add", "-A", cwd=work)
    await git("commit", "-qm", "big", cwd=work)
    code, _, err = await git(
        "push", remote(client, alice, "alice", "proj"), "main", cwd=work, check=False
    )
    assert code != 0 and "push is larger than 20000 bytes" in err, err


async def test_git_lfs_gets_one_readable_line(client, alice):
    await create(client, alice, "proj")
    # What git-lfs sends first on a push: the batch API request.
    resp = await client.post(
        "/alice/proj.git/info/lfs/objects/batch",
        headers={
            "Accept": "application/vnd.git-lfs+json",
            "Content-Type": "application/vnd.git-lfs+json",
        },
        data=b'{"operation":"upload","transfers":["basic"],"objects":[]}',
    )
    assert resp.status == 501
    assert (await resp.json(content_type=None))[
        "message"
    ] == "Git LFS is not supported by this server"


async def _blobless_checkout(client, user, owner, name, tmp_path, dest):
    url = remote(client, user, owner, name)
    code, _, err = await git(
        "clone", "-q", "--no-checkout", "--filter=blob:none", url, str(dest), check=False
    )
    assert code == 0, err
    assert "filtering not recognized" not in err
    missing = (await git("rev-list", "--objects", "--all", "--missing=print", cwd=dest))[1]
    assert any(line.startswith("?") for line in missing.splitlines()), "blobs came anyway"
    await git("checkout", "-q", "main", cwd=dest)  # fetches the blobs it needs, lazily
    return dest


@pytest.mark.parametrize("visibility", ["public", "private"])
async def test_blobless_partial_clone(client, alice, tmp_path, visibility):
    await create(client, alice, "proj", visibility=visibility)
    work = tmp_path / "w"
    await git("init", "-q", "-b", "main", str(work))
    for n in range(5):
        (work / "f.txt").write_text(f"version {n}\n")
        (work / f"g{n}.txt").write_text(f"g {n}\n")
        await git("add", "-A", cwd=work)
        await git("commit", "-qm", f"c{n}", cwd=work)
    await git("push", "-q", remote(client, alice, "alice", "proj"), "main", cwd=work)
    user = None if visibility == "public" else alice
    dest = await _blobless_checkout(client, user, "alice", "proj", tmp_path, tmp_path / "c")
    assert (dest / "f.txt").read_text() == "version 4\n"
    assert (await git("fsck", "--connectivity-only", cwd=dest))[0] == 0
    if visibility == "private":
        # Nobody else gets anything of it, lazily or not.
        bob = await sign_up(client, "bob")
        for who in (None, bob):
            code, _, _ = await git(
                "clone",
                "-q",
                "--filter=blob:none",
                remote(client, who, "alice", "proj"),
                str(tmp_path / "x"),
                check=False,
            )
            assert code != 0


async def test_a_blob_is_served_only_by_a_repository_that_holds_it(client, alice, tmp_path):
    await create(client, alice, "open")
    await create(client, alice, "secret", visibility="private")
    work = tmp_path / "w"
    await git("init", "-q", "-b", "main", str(work))
    (work / "pub.txt").write_text("public\n")
    await git("add", "-A", cwd=work)
    await git("commit", "-qm", "public", cwd=work)
    await git("push", "-q", remote(client, alice, "alice", "open"), "main", cwd=work)
    (work / "secret.txt").write_text("the secret\n")
    await git("add", "-A", cwd=work)
    await git("commit", "-qm", "secret", cwd=work)
    await git("push", "-q", remote(client, alice, "alice", "secret"), "main", cwd=work)
    blob = (await git("rev-parse", "HEAD:secret.txt", cwd=work))[1].strip()
    dest = await _blobless_checkout(client, None, "alice", "open", tmp_path, tmp_path / "c")
    code, _, _ = await git("fetch", "-q", "origin", blob, cwd=dest, check=False)
    assert code != 0
    assert (await git("cat-file", "-e", blob, cwd=dest, check=False))[0] != 0
