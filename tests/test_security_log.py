"""The security log: each action leaves one entry, seen by whom it concerns only (issue 32)."""

from __future__ import annotations

import pytest

from hubsvc.keys import STORE

from .conftest import make_config, sign_up

ORG_LOG = "/api/orgs/acme/audit-log"
ADMIN_LOG = "/api/admin/audit-log"
MY_LOG = "/api/users/me/security-log"
APP = "/api/repositories/acme/app"


@pytest.fixture
def config(tmp_path, database_url):
    return make_config(
        tmp_path,
        database__url=database_url,
        webhooks__allowed_hosts=["127.0.0.1"],
        server__trusted_proxies=["127.0.0.1/32"],
    )


async def ok(resp, status=(200, 201, 204)):
    if not hasattr(resp, "status"):  # a request not yet awaited
        resp = await resp
    assert resp.status in ((status,) if isinstance(status, int) else status), await resp.text()
    return await resp.json() if resp.content_type == "application/json" else None


async def entries(client, path, user, **query):
    resp = await client.get(path, headers=user.headers, params=query)
    body = await ok(resp, 200)
    return body


class World:
    """root (the administrator), owen (owner of acme), mia (a plain member), sam (a
    stranger) and tina (whom things are done to)."""

    def __init__(self, client, root, owen, mia, sam, tina) -> None:
        self.client = client
        self.root, self.owen, self.mia, self.sam, self.tina = root, owen, mia, sam, tina
        self.people = {"root": root, "owen": owen, "mia": mia, "sam": sam, "tina": tina}

    async def marks(self) -> dict[str, int]:
        """The newest id each log shows now."""
        marks = {}
        for name, user in self.people.items():
            marks[name] = await self._newest(MY_LOG, user)
        marks["org"] = await self._newest(ORG_LOG, self.owen)
        marks["admin"] = await self._newest(ADMIN_LOG, self.root)
        return marks

    async def _newest(self, path, user) -> int:
        got = (await entries(self.client, path, user, limit=1))["entries"]
        return int(got[0]["id"]) if got else 0

    async def since(self, path, user, mark) -> list[dict]:
        got = (await entries(self.client, path, user, limit=100))["entries"]
        return [e for e in got if int(e["id"]) > mark]

    async def check(self, action: str, sees: set[str], org: bool, does) -> dict:
        """Run does(); exactly one new entry, of action, for the admins, the org log when org,
        and the personal logs of sees; nothing new for anyone else."""
        before = await self.marks()
        await does()
        admin = await self.since(ADMIN_LOG, self.root, before["admin"])
        assert [e["action"] for e in admin] == [action], (action, admin)
        org_new = await self.since(ORG_LOG, self.owen, before["org"])
        assert [e["action"] for e in org_new] == ([action] if org else []), (action, org_new)
        for name, user in self.people.items():
            mine = await self.since(MY_LOG, user, before[name])
            expected = [action] if name in sees else []
            assert [e["action"] for e in mine] == expected, (action, name, mine)
        # Neither a plain member nor a stranger reads the organization's or the admin log.
        for user in (self.mia, self.sam):
            assert (await self.client.get(ORG_LOG, headers=user.headers)).status == 403
            assert (await self.client.get(ADMIN_LOG, headers=user.headers)).status == 403
        return admin[0]


@pytest.fixture
async def world(client):
    root = await sign_up(client, "root")  # the first account: the administrator
    owen, mia, sam, tina = [await sign_up(client, n) for n in ("owen", "mia", "sam", "tina")]
    await ok(
        await client.post(
            "/api/orgs", json={"name": "acme", "description": ""}, headers=owen.headers
        )
    )
    await ok(
        await client.put(
            "/api/orgs/acme/members/mia", json={"role": "member"}, headers=owen.headers
        )
    )
    await ok(
        await client.post(
            "/api/repositories", json={"name": "app", "owner": "acme"}, headers=owen.headers
        )
    )
    await ok(await client.post("/api/repositories", json={"name": "own"}, headers=tina.headers))
    return World(client, root, owen, mia, sam, tina)


async def test_each_account_action_is_one_entry_seen_by_its_user_and_administrators(client, world):
    tina = world.tina

    async def sign_in():
        resp = await client.post(
            "/auth/sign-in",
            json={"username": "tina", "password": tina.password},
            headers={"User-Agent": "Agent/7", "X-Forwarded-For": "203.0.113.5"},
        )
        await ok(resp)
        client.session.cookie_jar.clear()

    entry = await world.check("auth.sign-in", {"tina"}, False, sign_in)
    assert entry["actor"]["name"] == "tina" and entry["user"]["name"] == "tina"
    assert entry["ip"] == "203.0.113.5" and entry["userAgent"] == "Agent/7"
    assert entry["data"]["session"]

    async def wrong_password():
        resp = await client.post(
            "/auth/sign-in", json={"username": "tina", "password": "nope-nope"}
        )
        assert resp.status == 401

    entry = await world.check("auth.sign-in-failed", {"tina"}, False, wrong_password)
    assert entry["actor"] is None and entry["user"]["name"] == "tina"

    async def no_such_account():
        resp = await client.post("/auth/sign-in", json={"username": "nobody", "password": "x" * 8})
        assert resp.status == 401

    await world.check("auth.sign-in-failed", set(), False, no_such_account)

    async def new_password():
        body = {"currentPassword": tina.password, "newPassword": "a brand new one"}
        await ok(await client.post("/api/users/me/password", json=body, headers=tina.headers))
        tina.password = "a brand new one"

    await world.check("user.password", {"tina"}, False, new_password)

    async def new_email():
        body = {"email": "tina2@example.com", "currentPassword": tina.password}
        await ok(await client.patch("/api/users/me/settings", json=body, headers=tina.headers))

    entry = await world.check("user.email", {"tina"}, False, new_email)
    assert "tina2" not in str(entry["data"])
    # A settings change that is not the e-mail leaves no entry.
    before = await world.marks()
    await ok(await client.patch("/api/users/me/settings", json={"bio": "hi"}, headers=tina.headers))
    assert await world.since(ADMIN_LOG, world.root, before["admin"]) == []

    made = {}

    async def new_token():
        resp = await client.post("/api/users/me/tokens", json={"name": "ci"}, headers=tina.headers)
        made.update(await ok(resp))

    entry = await world.check("token.created", {"tina"}, False, new_token)
    assert entry["data"]["name"] == "ci" and made["secret"] not in str(entry)

    async def token_gone():
        path = f"/api/users/me/tokens/{made['token']['id']}"
        await ok(await client.delete(path, headers=tina.headers))

    await world.check("token.deleted", {"tina"}, False, token_gone)

    async def session_ended():
        resp = await client.get("/api/users/me/sessions", headers=tina.headers)
        other = next(s for s in (await ok(resp))["sessions"] if not s["current"])
        path = f"/api/users/me/sessions/{other['id']}"
        await ok(await client.delete(path, headers=tina.headers))

    await sign_in()  # the password change ended the others: one to end
    await world.check("session.ended", {"tina"}, False, session_ended)

    async def personal_visibility():
        body = {"visibility": "private"}
        await ok(await client.patch("/api/repositories/tina/own", json=body, headers=tina.headers))

    entry = await world.check("repo.visibility", {"tina"}, False, personal_visibility)
    assert entry["repository"]["name"] == "tina/own"
    assert entry["data"] == {"from": "public", "to": "private"}


async def test_each_organization_action_is_one_entry_seen_by_its_owners(client, world):
    owen, tina = world.owen, world.tina
    h = owen.headers

    async def put(path, body):
        await ok(await client.put(path, json=body, headers=h))

    async def delete(path):
        await ok(await client.delete(path, headers=h))

    both = {"owen", "tina"}
    steps = [
        ("org.member.added", both, lambda: put("/api/orgs/acme/members/tina", {"role": "member"})),
        ("org.member.role", both, lambda: put("/api/orgs/acme/members/tina", {"role": "owner"})),
        ("org.member.role", both, lambda: put("/api/orgs/acme/members/tina", {"role": "member"})),
        (
            "org.team.created",
            {"owen"},
            lambda: ok(client.post("/api/orgs/acme/teams", json={"name": "devs"}, headers=h)),
        ),
        (
            "org.team.changed",
            {"owen"},
            lambda: ok(
                client.patch("/api/orgs/acme/teams/devs", json={"permission": "write"}, headers=h)
            ),
        ),
        ("org.team.member.added", both, lambda: put("/api/orgs/acme/teams/devs/members/tina", {})),
        (
            "org.team.member.removed",
            both,
            lambda: delete("/api/orgs/acme/teams/devs/members/tina"),
        ),
        (
            "org.team.repository",
            {"owen"},
            lambda: put("/api/orgs/acme/teams/devs/repositories/app", {}),
        ),
        (
            "org.team.repository.removed",
            {"owen"},
            lambda: delete("/api/orgs/acme/teams/devs/repositories/app"),
        ),
        ("org.team.deleted", {"owen"}, lambda: delete("/api/orgs/acme/teams/devs")),
        (
            "repo.visibility",
            {"owen"},
            lambda: ok(client.patch(APP, json={"visibility": "private"}, headers=h)),
        ),
        (
            "repo.collaborator.added",
            both,
            lambda: put(f"{APP}/collaborators/tina", {"permission": "read"}),
        ),
        (
            "repo.collaborator.permission",
            both,
            lambda: put(f"{APP}/collaborators/tina", {"permission": "write"}),
        ),
        ("repo.collaborator.removed", both, lambda: delete(f"{APP}/collaborators/tina")),
        ("repo.protection.set", {"owen"}, lambda: put(f"{APP}/branches/main/protection", {})),
        ("repo.protection.removed", {"owen"}, lambda: delete(f"{APP}/branches/main/protection")),
        ("org.member.removed", both, lambda: delete("/api/orgs/acme/members/tina")),
    ]
    for action, sees, does in steps:

        async def run(does=does):
            result = does()
            if hasattr(result, "__await__"):
                await result

        await world.check(action, sees, True, run)
    # A removal that removes nothing (404) leaves nothing.
    before = await world.marks()
    assert (await client.delete(f"{APP}/collaborators/tina", headers=h)).status == 404
    assert (await client.delete("/api/orgs/acme/members/tina", headers=h)).status == 404
    # A refused change (the last owner demoted: 409) leaves nothing: one transaction.
    demote = await client.put("/api/orgs/acme/members/owen", json={"role": "member"}, headers=h)
    assert demote.status == 409
    assert await world.since(ADMIN_LOG, world.root, before["admin"]) == []
    # tina sees what was done to her, not the organization's log.
    assert (await client.get(ORG_LOG, headers=tina.headers)).status == 403


async def test_hook_changes_are_logged_without_their_url_path_or_secret(client, world):
    h = world.owen.headers
    made = {}
    secret_url = "http://127.0.0.1:9/api/webhooks/123/SECRET-TOKEN"

    async def create():
        resp = await client.post(
            f"{APP}/hooks", json={"url": secret_url, "secret": "s3cret-value"}, headers=h
        )
        made.update((await ok(resp))["hook"])

    entry = await world.check("repo.hook.created", {"owen"}, True, create)
    assert entry["data"] == {"hook": made["id"], "host": "127.0.0.1"}
    assert "SECRET" not in str(entry) and "s3cret" not in str(entry)

    async def change():
        resp = await client.patch(
            f"{APP}/hooks/{made['id']}", json={"active": False, "secret": "other"}, headers=h
        )
        await ok(resp)

    entry = await world.check("repo.hook.changed", {"owen"}, True, change)
    assert entry["data"]["fields"] == ["active", "secret"] and "other" not in str(entry)

    async def remove():
        await ok(await client.delete(f"{APP}/hooks/{made['id']}", headers=h))

    await world.check("repo.hook.deleted", {"owen"}, True, remove)


async def test_administrator_changes_are_logged(client, world):
    h = world.root.headers

    async def create():
        body = {
            "username": "newbie",
            "email": "n@example.com",
            "password": "pw-pw-pw-pw",
            "name": "N",
        }
        await ok(await client.post("/api/admin/users", json=body, headers=h))

    await world.check("admin.user.created", {"root"}, False, create)

    async def promote():
        await ok(await client.patch("/api/admin/users/newbie", json={"isAdmin": True}, headers=h))

    entry = await world.check("admin.user.changed", {"root"}, False, promote)
    assert entry["data"] == {"isAdmin": True} and entry["user"]["name"] == "newbie"

    async def disable_tina():
        body = {"disabled": True}
        await ok(await client.patch("/api/admin/users/tina", json=body, headers=h))

    before = await world.marks()
    await disable_tina()
    admin = await world.since(ADMIN_LOG, world.root, before["admin"])
    assert [e["action"] for e in admin] == ["admin.user.changed"]
    await ok(await client.patch("/api/admin/users/tina", json={"disabled": False}, headers=h))
    tina_log = await world.since(MY_LOG, world.tina, before["tina"])
    assert [e["data"] for e in tina_log] == [{"disabled": False}, {"disabled": True}]

    async def delete():
        await ok(await client.delete("/api/admin/users/newbie", headers=h))

    entry = await world.check("admin.user.deleted", {"root"}, False, delete)
    # The entries outlive the account they name.
    again = await entries(client, ADMIN_LOG, world.root, actor="root", action="admin.user.created")
    assert again["entries"][0]["user"]["name"] == "newbie"


async def test_filters_paging_and_no_route_that_edits_or_deletes(client, world):
    tina = world.tina
    for _ in range(5):
        resp = await client.post(
            "/auth/sign-in", json={"username": "tina", "password": "wrong-password"}
        )
        assert resp.status == 401
    seen, before = [], None
    while True:
        query = {"limit": 2, "action": "auth.sign-in-failed"}
        if before:
            query["before"] = before
        page = await entries(client, MY_LOG, tina, **query)
        seen += page["entries"]
        assert len(page["entries"]) <= 2
        if not page["hasMore"]:
            assert page["nextBefore"] is None
            break
        before = page["nextBefore"]
    assert len(seen) == 5 and len({e["id"] for e in seen}) == 5
    assert [int(e["id"]) for e in seen] == sorted((int(e["id"]) for e in seen), reverse=True)
    by_actor = await entries(client, ADMIN_LOG, world.root, actor="OWEN")
    assert by_actor["entries"] and all(e["actor"]["name"] == "owen" for e in by_actor["entries"])
    assert (await entries(client, ADMIN_LOG, world.root, actor="nobody"))["entries"] == []
    for bad in ({"limit": "0"}, {"limit": "x"}, {"before": "-1"}, {"limit": "101"}):
        resp = await client.get(MY_LOG, headers=tina.headers, params=bad)
        assert resp.status == 400 and "error" in await resp.json()
    entry_id = seen[0]["id"]
    for method in ("DELETE", "PATCH", "PUT", "POST"):
        for path in (MY_LOG, f"{MY_LOG}/{entry_id}", ADMIN_LOG, f"{ADMIN_LOG}/{entry_id}"):
            resp = await client.request(method, path, headers=world.root.headers, json={})
            assert resp.status in (404, 405), (method, path, resp.status)
    assert (await client.get(MY_LOG)).status == 401
    # A personal access token with user:read reads its owner's log; one without, not.
    for scopes, status in ((["user:read"], 200), (["repo:read"], 403)):
        resp = await client.post(
            "/api/users/me/tokens",
            json={"name": str(scopes), "scopes": scopes},
            headers=tina.headers,
        )
        secret = (await ok(resp))["secret"]
        got = await client.get(MY_LOG, headers={"Authorization": f"Bearer {secret}"})
        assert got.status == status


async def test_entries_past_log_days_are_pruned(client, world, app):
    store = app[STORE]
    assert (await entries(client, ADMIN_LOG, world.root))["entries"]
    assert await store.audit.prune("9999-01-01T00:00:00Z") > 0
    assert (await entries(client, ADMIN_LOG, world.root))["entries"] == []
