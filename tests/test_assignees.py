"""Who may be assigned, as on GitHub: triage access or more, or the owning organization's members.

Anyone else (a mere reader of a public repository, a collaborator who only reads) is
refused with 422 naming them, so nobody can have strangers mailed by assigning them.
"""

from __future__ import annotations

from .conftest import sign_up
from .gitcli import git, remote
from .test_orgs import _ok
from .test_repos import create

REPOS = "/api/repositories"


async def project(client, admin, owner: str, tmp_path) -> str:
    """A public repository of owner with issue #1, pull request #2 (topic) and branch other."""
    extra = {"owner": owner} if owner != admin.username else {}
    await create(client, admin, "proj", autoInit=True, **extra)
    api = f"{REPOS}/{owner}/proj"
    work = tmp_path / owner
    await git("clone", "-q", remote(client, admin, owner, "proj"), str(work))
    for branch in ("topic", "other"):
        await git("checkout", "-q", "-b", branch, "origin/main", cwd=work)
        await git("commit", "-q", "--allow-empty", "-m", branch, cwd=work)
        await git("push", "-q", "origin", branch, cwd=work)
    await _ok(await client.post(api + "/issues", json={"title": "one"}, headers=admin.headers), 201)
    body = {"title": "two", "head": "topic"}
    await _ok(await client.post(api + "/pulls", json=body, headers=admin.headers), 201)
    return api


async def collaborator(client, admin, api: str, user, permission: str) -> None:
    resp = await client.put(
        f"{api}/collaborators/{user.username}",
        json={"permission": permission},
        headers=admin.headers,
    )
    assert resp.status in (200, 201), await resp.text()


async def assign(client, by, api: str, name: str) -> dict[str, int]:
    """Statuses of assigning name on each surface; a 422 must name them and change nothing."""
    got = {}
    attempts = (
        ("issue create", "POST", "/issues", {"title": "new"}),
        ("issue edit", "PATCH", "/issues/1", {}),
        ("pull create", "POST", "/pulls", {"title": "new", "head": "other"}),
        ("pull edit", "PATCH", "/pulls/2", {}),
    )
    for what, method, path, body in attempts:
        before = await (await client.get(f"{api}/issues?state=all")).json()
        pulls_before = await (await client.get(f"{api}/pulls?state=all")).json()
        resp = await client.request(
            method, api + path, json={**body, "assignees": [name]}, headers=by.headers
        )
        got[what] = resp.status
        answer = await resp.json()
        if resp.status == 422:
            assert answer["error"].endswith(f"organization: {name}"), answer
            assert await (await client.get(f"{api}/issues?state=all")).json() == before
            assert await (await client.get(f"{api}/pulls?state=all")).json() == pulls_before
        elif resp.status in (200, 201):
            item = answer.get("issue") or answer["pullRequest"]
            assert [a["username"] for a in item["assignees"]] == [name]
            if what == "pull create":  # closed again: the next one may open
                closed = {"state": "closed"}
                resp = await client.patch(
                    f"{api}/pulls/{item['number']}", json=closed, headers=by.headers
                )
                await _ok(resp)
    return got


EVERYWHERE = ("issue create", "issue edit", "pull create", "pull edit")


def each(status: int) -> dict[str, int]:
    return dict.fromkeys(EVERYWHERE, status)


async def test_a_public_user_repository_assigns_its_writers_only(client, alice, bob, tmp_path):
    api = await project(client, alice, "alice", tmp_path)
    await sign_up(client, "carol")
    rita, tom = await sign_up(client, "rita"), await sign_up(client, "tom")
    await collaborator(client, alice, api, rita, "read")
    await collaborator(client, alice, api, tom, "write")
    # carol reads the public repository, rita is a collaborator who only reads.
    assert await assign(client, alice, api, "carol") == each(422)
    assert await assign(client, alice, api, "rita") == each(422)
    assert await assign(client, alice, api, "tom") == each(200) | {
        "issue create": 201,
        "pull create": 201,
    }
    assert await assign(client, alice, api, "alice") == each(200) | {
        "issue create": 201,
        "pull create": 201,
    }
    # Setting assignees needs triage itself: bob, a reader, may open a pull request
    # but not assign one; tom, a writer, assigns others' pull requests.
    resp = await client.post(
        api + "/pulls",
        json={"title": "b", "head": "other", "assignees": ["tom"]},
        headers=bob.headers,
    )
    assert resp.status == 403
    resp = await client.patch(api + "/pulls/2", json={"assignees": ["alice"]}, headers=tom.headers)
    await _ok(resp)


async def test_an_organization_assigns_its_members_and_writers(client, alice, tmp_path):
    await _ok(await client.post("/api/orgs", json={"name": "acme"}, headers=alice.headers), 201)
    for name in ("mia", "carol"):
        await sign_up(client, name)
    rita, tom = await sign_up(client, "rita"), await sign_up(client, "tom")
    await _ok(await client.put("/api/orgs/acme/members/mia", json={}, headers=alice.headers), 201)
    api = await project(client, alice, "acme", tmp_path)
    await collaborator(client, alice, api, rita, "read")
    await collaborator(client, alice, api, tom, "write")
    created = each(200) | {"issue create": 201, "pull create": 201}
    # A member holds only the organization's base read, and is assignable as on GitHub;
    # so is an outside collaborator with write, not one who only reads.
    assert await assign(client, alice, api, "mia") == created
    assert await assign(client, alice, api, "tom") == created
    assert await assign(client, alice, api, "carol") == each(422)
    assert await assign(client, alice, api, "rita") == each(422)
    # Leaving the organization ends it.
    await _ok(await client.delete("/api/orgs/acme/members/mia", headers=alice.headers), 204)
    assert await assign(client, alice, api, "mia") == each(422)
