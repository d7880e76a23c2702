"""Names people type: `me`, short commit ids, renamed repositories, CORS on every error."""

from __future__ import annotations

import hashlib

from hubsvc.app import create_app
from hubsvc.git.files import REPO_FILES

from .conftest import make_config, sign_up
from .gitcli import git, remote
from .test_repos import create


async def test_me_in_user_paths(client, alice, bob):
    await create(client, alice, "secret", visibility="private")
    await create(client, bob, "open")
    resp = await client.get("/api/users/me/profile", headers=alice.headers)
    assert resp.status == 200 and (await resp.json())["profile"]["username"] == "alice"
    resp = await client.get("/api/users/me/repositories", headers=alice.headers)
    assert [r["name"] for r in (await resp.json())["repositories"]] == ["secret"]
    resp = await client.get("/api/users/me/avatar", headers=bob.headers)
    assert resp.status == 200 and resp.headers["Cache-Control"].startswith("private")
    assert (await client.get("/api/users/bob/avatar")).headers["Cache-Control"].startswith("public")
    resp = await client.get("/api/repositories/me/open", headers=bob.headers)
    assert resp.status == 200 and (await resp.json())["repo"]["owner"]["username"] == "bob"
    # git asks for credentials on an anonymous /me/… URL, and then finds the caller's own.
    resp = await client.get("/me/open.git/info/refs?service=git-upload-pack")
    assert resp.status == 401 and resp.headers["WWW-Authenticate"].startswith("Basic")
    code, out, _ = await git("ls-remote", remote(client, bob, "me", "open"))
    assert code == 0
    for path in (
        "/api/users/me/profile",
        "/api/users/me/repositories",
        "/api/users/me/avatar",
        "/api/repositories/me/open",
    ):
        resp = await client.get(path)
        assert resp.status == 401, path
        assert (await resp.json())["error"] == "authentication required"


def _commit_with_prefix_twin() -> tuple[bytes, bytes, str]:
    """Two commit objects whose ids share their first 7 hex digits (a birthday search)."""
    seen: dict[str, bytes] = {}
    for n in range(2_000_000):
        body = (
            b"tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n"
            b"author A <a@example.com> 0 +0000\ncommitter A <a@example.com> 0 +0000\n\n"
            + str(n).encode()
            + b"\n"
        )
        prefix = hashlib.sha1(b"commit %d\x00" % len(body) + body).hexdigest()[:7]
        if prefix in seen:
            return seen[prefix], body, prefix
        seen[prefix] = body
    raise AssertionError("no twin found")


async def test_short_commit_ids(client, alice, tmp_path):
    repo = await create(client, alice, "proj", autoInit=True)
    api = "/api/repositories/alice/proj"
    oid = (await (await client.get(api + "/commits")).json())["commits"][0]["oid"]
    resp = await client.get(f"{api}/commits/{oid[:7]}/diff")
    assert resp.status == 200 and (await resp.json())["commit"]["oid"] == oid
    for path in (
        f"/commits?branch={oid[:9]}",
        f"/tree?branch={oid[:7].upper()}",
        f"/file?path=README.md&branch={oid[:12]}",
    ):
        assert (await client.get(api + path)).status == 200, path
    assert (await client.get(f"{api}/commits/{oid[:6]}/diff")).status == 400  # too short
    assert (await client.get(f"{api}/commits?branch=0000000")).status == 404
    first, second, prefix = _commit_with_prefix_twin()
    path = client.app[REPO_FILES].path(int(repo["id"]))
    for body in (first, second):
        await git(
            "--git-dir", str(path), "hash-object", "-w", "-t", "commit", "--stdin", stdin=body
        )
    resp = await client.get(f"{api}/commits/{prefix}/diff")
    assert resp.status == 400 and "ambiguous" in (await resp.json())["error"]
    assert (await client.get(f"{api}/commits?branch={prefix}")).status == 400


async def test_renamed_repository_redirects_and_clones(client, alice, bob, tmp_path):
    await create(client, alice, "old", autoInit=True)
    resp = await client.patch(
        "/api/repositories/alice/old", json={"name": "new"}, headers=alice.headers
    )
    assert resp.status == 200
    resp = await client.get(
        "/api/repositories/alice/OLD/commits?limit=1&skip=0", allow_redirects=False
    )
    assert resp.status == 301
    assert resp.headers["Location"] == "/api/repositories/alice/new/commits?limit=1&skip=0"
    resp = await client.get("/api/repositories/alice/old")
    assert resp.status == 200 and (await resp.json())["repo"]["name"] == "new"  # followed
    resp = await client.post(
        "/api/repositories/alice/old/issues",
        json={"title": "x"},
        headers=alice.headers,
        allow_redirects=False,
    )
    assert resp.status == 308  # keeps the method and body
    assert resp.headers["Location"] == "/api/repositories/alice/new/issues"
    # git keeps working at the old URL, without a redirect.
    await git("clone", "-q", remote(client, None, "alice", "old"), str(tmp_path / "c1"))
    assert (tmp_path / "c1" / "README.md").exists()
    # A chain of renames still leads to the repository.
    await client.patch("/api/repositories/alice/new", json={"name": "newer"}, headers=alice.headers)
    resp = await client.get("/api/repositories/alice/old", allow_redirects=False)
    assert resp.headers["Location"] == "/api/repositories/alice/newer"

    # A private repository's old name leaks nothing to those who cannot read it.
    await client.patch(
        "/api/repositories/alice/newer", json={"visibility": "private"}, headers=alice.headers
    )
    assert (
        await client.get("/api/repositories/alice/old", headers=bob.headers, allow_redirects=False)
    ).status == 404
    assert (await client.get("/api/repositories/alice/old", allow_redirects=False)).status == 404
    code, _, _ = await git(
        "clone", "-q", remote(client, bob, "alice", "old"), str(tmp_path / "c2"), check=False
    )
    assert code != 0
    assert (
        await client.get(
            "/api/repositories/alice/old", headers=alice.headers, allow_redirects=False
        )
    ).status == 301

    # A new repository takes the old name for good.
    await create(client, alice, "old")
    resp = await client.get(
        "/api/repositories/alice/old", headers=alice.headers, allow_redirects=False
    )
    assert resp.status == 200 and (await resp.json())["repo"]["name"] == "old"
    await client.delete("/api/repositories/alice/old", headers=alice.headers)
    assert (
        await client.get(
            "/api/repositories/alice/old", headers=alice.headers, allow_redirects=False
        )
    ).status == 404
    # Renaming back to an old name makes it the real name again.
    await client.patch("/api/repositories/alice/newer", json={"name": "new"}, headers=alice.headers)
    assert (
        await client.get(
            "/api/repositories/alice/new", headers=alice.headers, allow_redirects=False
        )
    ).status == 200


async def test_every_error_carries_cors_headers(aiohttp_client, tmp_path):
    config = make_config(tmp_path, cors__origins=["https://app.example"])
    client = await aiohttp_client(create_app(config))
    user = await sign_up(client, "carol")
    origin = {"Origin": "https://app.example"}
    for method, path, status, headers in (
        ("GET", "/api/no/such/route", 404, {}),
        ("GET", "/api/repositories/carol/missing", 404, {}),
        ("PUT", "/health", 405, {}),
        ("GET", "/api/users/me", 401, {}),
        ("GET", "/api/users/me", 401, {"Authorization": "Bearer nope"}),
        ("POST", "/api/repositories", 400, user.headers),
    ):
        resp = await client.request(method, path, headers={**origin, **headers})
        assert resp.status == status, (method, path)
        assert resp.headers.get("Access-Control-Allow-Origin") == "https://app.example", path
        assert resp.headers.get("Access-Control-Allow-Credentials") == "true", path
        assert "X-Request-Id" in resp.headers["Access-Control-Expose-Headers"], path
    resp = await client.get("/api/no/such/route", headers={"Origin": "https://evil.example"})
    assert resp.status == 404 and "Access-Control-Allow-Origin" not in resp.headers
