"""Releases: tags pushed by stock git or made for a release, assets byte for byte, drafts hidden."""

from __future__ import annotations

import os

import pytest

from .conftest import make_config
from .gitcli import git, remote
from .test_repos import create
from .test_ws import connect, next_of

REPO = "/api/repositories/alice/proj"
LIMIT = 200_000  # [git] max_object_bytes here: assets past it are refused


@pytest.fixture
def config(tmp_path, database_url):
    return make_config(tmp_path, database__url=database_url, git__max_object_bytes=LIMIT)


async def release(client, user, status=201, **body):
    resp = await client.post(REPO + "/releases", json=body, headers=user.headers)
    assert resp.status == status, await resp.text()
    return (await resp.json()).get("release")


async def test_a_tag_pushed_by_git_and_a_tag_made_for_a_release(client, alice, tmp_path, events):
    await create(client, alice, "proj", autoInit=True)
    work = tmp_path / "w"
    await git("clone", "-q", remote(client, alice, "alice", "proj"), str(work))
    await git("tag", "-a", "v1.0", "-m", "one", cwd=work)
    await git("push", "-q", "origin", "v1.0", cwd=work)
    tip = (await git("rev-parse", "HEAD", cwd=work))[1].strip()
    ws = await connect(client, alice)

    one = await release(client, alice, tagName="v1.0", name="One", body="notes")
    assert (one["tagName"], one["draft"], one["assets"]) == ("v1.0", False, [])
    assert one["publishedAt"] is not None and one["author"]["username"] == "alice"
    sent = await next_of(ws, "notification")
    assert sent["notification"]["type"] == "release"
    assert sent["notification"]["data"]["action"] == "published"
    assert sent["notification"]["data"]["release"]["tagName"] == "v1.0"
    await release(client, alice, status=409, tagName="v1.0")

    # A release of a new tag makes it, as a push would: stock git sees it, a push event says so.
    await git("commit", "-q", "--allow-empty", "-m", "two", cwd=work)
    await git("push", "-q", "origin", "HEAD:main", cwd=work)
    second = (await git("rev-parse", "HEAD", cwd=work))[1].strip()
    two = await release(client, alice, tagName="v2.0", targetCommitish="main", prerelease=True)
    assert two["targetCommitish"] == "main" and two["prerelease"] is True
    refs = (await git("ls-remote", "--tags", "origin", cwd=work))[1]
    assert f"{second}\trefs/tags/v2.0" in refs
    pushes = [e.data for e in events.of("push") if e.data["ref"] == "refs/tags/v2.0"]
    assert pushes and pushes[0]["created"] and pushes[0]["after"] == second
    bad = await client.post(
        REPO + "/releases", json={"tagName": "v3", "targetCommitish": "nope"}, headers=alice.headers
    )
    assert bad.status == 422 and "targetCommitish" in (await bad.json())["error"]
    bad = await client.post(REPO + "/releases", json={"tagName": "a..b"}, headers=alice.headers)
    assert bad.status == 400 and "tagName" in (await bad.json())["error"]

    tags = (await (await client.get(REPO + "/tags")).json())["tags"]
    assert [(t["name"], t["commit"]["oid"]) for t in tags] == [("v1.0", tip), ("v2.0", second)]
    # latest: the newest published release that is not a prerelease.
    latest = (await (await client.get(REPO + "/releases/latest")).json())["release"]
    assert latest["tagName"] == "v1.0"
    by_tag = await client.get(REPO + "/releases/tags/v2.0")
    assert (await by_tag.json())["release"]["id"] == two["id"]
    listed = (await (await client.get(REPO + "/releases")).json())["releases"]
    assert [r["tagName"] for r in listed] == ["v2.0", "v1.0"]
    resp = await client.patch(
        f"{REPO}/releases/{two['id']}", json={"prerelease": False}, headers=alice.headers
    )
    assert resp.status == 200
    latest = (await (await client.get(REPO + "/releases/latest")).json())["release"]
    assert latest["tagName"] == "v2.0"
    await ws.close()


async def test_an_asset_uploaded_and_downloaded_byte_for_byte(client, alice, bob, tmp_path):
    await create(client, alice, "proj", autoInit=True)
    made = await release(client, alice, tagName="v1")
    data = os.urandom(150_000)
    url = f"{REPO}/releases/{made['id']}/assets"
    headers = {**alice.headers, "Content-Type": "application/zip"}
    resp = await client.post(url + "?name=build%20one.zip", data=data, headers=headers)
    assert resp.status == 201, await resp.text()
    asset = (await resp.json())["asset"]
    assert (asset["name"], asset["size"], asset["contentType"]) == (
        "build one.zip",
        len(data),
        "application/zip",
    )
    again = await client.post(url + "?name=build%20one.zip", data=b"x", headers=headers)
    assert again.status == 409
    assert (await client.post(url + "?name=x", data=b"x", headers=bob.headers)).status == 403
    for _ in range(2):
        got = await client.get(f"{REPO}/releases/assets/{asset['id']}")
        assert got.status == 200 and await got.read() == data
    assert got.headers["Content-Type"] == "application/zip"
    assert got.headers["Content-Disposition"].startswith('attachment; filename="build one.zip"')
    shown = (await (await client.get(f"{REPO}/releases/{made['id']}")).json())["release"]
    assert shown["assets"][0]["downloadCount"] == 2
    # An HTML upload is served as bytes to download, never as a page of this origin.
    resp = await client.post(
        url + "?name=page.html",
        data=b"<script>1</script>",
        headers={**headers, "Content-Type": "text/html"},
    )
    page = (await resp.json())["asset"]
    got = await client.get(f"{REPO}/releases/assets/{page['id']}")
    assert got.headers["Content-Type"] == "application/octet-stream"

    # Past [git] max_object_bytes: 413, and no file or row is left behind.
    data_dir = tmp_path / "data"
    files_before = sorted(p.name for p in data_dir.rglob("*") if p.is_file() and "asset" in str(p))
    too_big = await client.post(url + "?name=big.bin", data=os.urandom(LIMIT + 1), headers=headers)
    assert too_big.status == 413

    async def chunks():
        for _ in range(4):
            yield os.urandom(LIMIT // 3)

    streamed = await client.post(url + "?name=big.bin", data=chunks(), headers=headers)
    assert streamed.status == 413
    files_after = sorted(p.name for p in data_dir.rglob("*") if p.is_file() and "asset" in str(p))
    assert files_after == files_before
    listed = (await (await client.get(url)).json())["assets"]
    assert [a["name"] for a in listed] == ["build one.zip", "page.html"]

    # Deleting an asset, then the release, then the repository leaves no file.
    assets_dir = next(data_dir.glob("assets/*/*"))
    assert len(list(assets_dir.iterdir())) == 2
    resp = await client.delete(f"{REPO}/releases/assets/{page['id']}", headers=alice.headers)
    assert resp.status == 204 and len(list(assets_dir.iterdir())) == 1
    assert (await client.get(f"{REPO}/releases/assets/{page['id']}")).status == 404
    assert (
        await client.delete(f"{REPO}/releases/{made['id']}", headers=alice.headers)
    ).status == 204
    assert list(assets_dir.iterdir()) == []
    again = await release(client, alice, tagName="v1")
    await client.post(f"{REPO}/releases/{again['id']}/assets?name=a", data=b"a", headers=headers)
    assert (await client.delete(REPO, headers=alice.headers)).status == 204
    assert not assets_dir.exists()


async def test_a_draft_is_for_writers_only(client, alice, bob, tmp_path, events):
    await create(client, alice, "proj", autoInit=True)
    draft = await release(client, alice, tagName="v9", draft=True, name="soon")
    assert draft["draft"] is True and draft["publishedAt"] is None
    headers = {**alice.headers, "Content-Type": "application/octet-stream"}
    resp = await client.post(
        f"{REPO}/releases/{draft['id']}/assets?name=a.bin", data=b"abc", headers=headers
    )
    asset = (await resp.json())["asset"]
    for who in ({}, bob.headers):
        for path in (f"/releases/{draft['id']}", "/releases/tags/v9", "/releases/latest"):
            assert (await client.get(REPO + path, headers=who)).status == 404, path
        assert (
            await client.get(f"{REPO}/releases/assets/{asset['id']}", headers=who)
        ).status == 404
        listed = await (await client.get(REPO + "/releases", headers=who)).json()
        assert listed["releases"] == []
    mine = await (await client.get(REPO + "/releases", headers=alice.headers)).json()
    assert [r["tagName"] for r in mine["releases"]] == ["v9"]
    # No tag and no event while it is a draft; publishing makes both.
    assert (await (await client.get(REPO + "/tags")).json())["tags"] == []
    assert events.of("release") == [] and events.of("push") == []
    resp = await client.patch(
        f"{REPO}/releases/{draft['id']}", json={"draft": False}, headers=alice.headers
    )
    assert resp.status == 200 and (await resp.json())["release"]["publishedAt"] is not None
    assert [t["name"] for t in (await (await client.get(REPO + "/tags")).json())["tags"]] == ["v9"]
    await events.wait_for(2)
    assert [e.data["action"] for e in events.of("release")] == ["published"]
    assert (await client.get(f"{REPO}/releases/{draft['id']}", headers=bob.headers)).status == 200


async def test_private_repository_releases_are_404(client, alice, bob):
    await create(client, alice, "proj", autoInit=True, visibility="private")
    made = await release(client, alice, tagName="v1")
    for path in ("/releases", f"/releases/{made['id']}", "/releases/latest", "/tags"):
        assert (await client.get(REPO + path, headers=bob.headers)).status == 404, path
    resp = await client.post(REPO + "/releases", json={"tagName": "v2"}, headers=bob.headers)
    assert resp.status == 404
