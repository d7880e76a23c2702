"""The chat bot's key acts for a linked user only within the bot's scope; links end like
credentials do."""

from __future__ import annotations

import pytest

from hubsvc.policy import ACTIONS, BOT_ACTIONS

from .conftest import make_config, sign_up
from .gitcli import git
from .test_accounts import bearer, new_pat
from .test_chat_link import BOT, BOT_KEY, as_chat, generate, link
from .test_repos import create


@pytest.fixture
def config(tmp_path):
    return make_config(tmp_path, chat__bot_key=BOT_KEY)


async def refused(resp) -> None:
    """A 403 whose message names the bot's scope."""
    assert resp.status == 403, (resp.method, resp.url, resp.status, await resp.text())
    assert "chat bot's scope" in (await resp.json())["error"]


async def test_the_bot_key_cannot_take_the_account_over(client, alice, bob):
    # alice signed up first: an administrator, so the bot acting for her could make more.
    await create(client, alice, "proj")
    await link(client, alice, "c1")
    chat = as_chat("c1")
    repo = "/api/repositories/alice/proj"
    attempts = [
        ("POST", "/api/users/me/tokens", {"name": "from-chat"}),
        ("GET", "/api/users/me/tokens", None),
        ("GET", "/api/users/me/settings", None),
        ("PATCH", "/api/users/me/settings", {"email": "mallory@example.com"}),
        ("POST", "/api/users/me/settings/preferences", {"theme": "dark"}),
        ("POST", "/api/users/me/password", {"currentPassword": "x" * 8, "newPassword": "y" * 8}),
        ("DELETE", "/api/users/me/avatar", None),
        ("GET", "/api/admin/users", None),
        (
            "POST",
            "/api/admin/users",
            {
                "username": "evil",
                "email": "evil@example.com",
                "password": "evil-password",
                "isAdmin": True,
            },
        ),
        ("PATCH", "/api/admin/users/bob", {"isAdmin": True}),
        ("POST", "/api/repositories", {"name": "from-chat"}),
        ("PATCH", repo, {"visibility": "private"}),
        ("DELETE", repo, None),
        ("GET", repo + "/hooks", None),
        ("POST", repo + "/hooks", {"url": "https://example.com/h", "format": "json"}),
        ("PUT", repo + "/collaborators/bob", {"permission": "admin"}),
        ("GET", repo + "/collaborators", None),
        ("POST", repo + "/star", None),
        ("POST", "/auth/sign-out", None),
        ("POST", "/api/chat/link/verify", {"token": "0" * 64, "serviceUserId": alice.id}),
        ("GET", "/ws", None),
    ]
    for method, path, body in attempts:
        await refused(await client.request(method, path, json=body, headers=chat))
    # Nothing happened: no token, no new administrator, the repository is as it was.
    tokens = await (await client.get("/api/users/me/tokens", headers=alice.headers)).json()
    assert tokens["tokens"] == []
    settings = await (await client.get("/api/users/me/settings", headers=alice.headers)).json()
    assert settings["settings"]["email"] == "alice@example.com"
    assert (await client.get(repo, headers=alice.headers)).status == 200
    listed = await (await client.get("/api/admin/users", headers=alice.headers)).json()
    assert [u["username"] for u in listed["users"] if u.get("isAdmin")] == ["alice"]


async def test_the_bot_does_what_chat_commands_need(client, alice, bob):
    await create(client, bob, "tool", autoInit=True)
    await link(client, alice, "c1")
    chat = {**as_chat("c1"), "Origin": "https://elsewhere.example"}
    for path in (
        "/api/users/me",
        "/api/repositories/bob/tool",
        "/api/search?q=tool",
        "/api/repositories/bob/tool/commits",
        "/api/repositories/bob/tool/issues",
        "/api/repositories/bob/tool/pulls",
        "/api/chat/link/status/c1",
    ):
        resp = await client.get(path, headers=chat)
        assert resp.status == 200, (path, await resp.text())
    resp = await client.post("/api/repositories/bob/tool/fork", json={}, headers=chat)
    assert resp.status == 201 and (await resp.json())["repo"]["owner"]["username"] == "alice"
    resp = await client.post(
        "/api/repositories/bob/tool/issues", json={"title": "from chat"}, headers=chat
    )
    assert resp.status == 201, await resp.text()
    number = (await resp.json())["issue"]["number"]
    resp = await client.post(
        f"/api/repositories/bob/tool/issues/{number}/comments",
        json={"body": "me too"},
        headers=chat,
    )
    assert resp.status == 201
    # Deleting that comment is outside the scope, though alice wrote it.
    comment = (await resp.json())["comment"]["id"]
    await refused(
        await client.delete(
            f"/api/repositories/bob/tool/issues/{number}/comments/{comment}", headers=chat
        )
    )


def test_every_action_of_the_scope_exists():
    assert BOT_ACTIONS - set(ACTIONS) == set()


async def test_git_refuses_the_bot_headers(client, alice, tmp_path):
    await create(client, alice, "secret", visibility="private", autoInit=True)
    await link(client, alice, "c1")
    url = str(client.make_url("/alice/secret.git"))
    code, _, err = await git(
        "-c",
        f"http.extraHeader=X-Chat-Bot-Key: {BOT_KEY}",
        "-c",
        "http.extraHeader=X-Chat-User-Id: c1",
        "clone",
        url,
        str(tmp_path / "out"),
        check=False,
    )
    assert code != 0 and "403" in err, err
    assert not (tmp_path / "out" / "README.md").exists()


async def test_link_endpoints_share_one_budget_per_bot_key(aiohttp_client, tmp_path):
    from hubsvc.app import create_app

    config = make_config(
        tmp_path,
        chat__bot_key=BOT_KEY,
        rate_limit__enabled=True,
        rate_limit__burst=3,
        rate_limit__per_minute=1,
    )
    client = await aiohttp_client(create_app(config))
    statuses = []
    for n in range(5):
        resp = await client.post(
            "/api/chat/link/generate",
            json={"chatId": f"made-up-{n}"},
            headers=as_chat(f"made-up-{n}"),
        )
        statuses.append(resp.status)
    assert statuses == [200, 200, 200, 429, 429]


async def linked(client, chat_id: str) -> bool:
    resp = await client.get(f"/api/chat/link/status/{chat_id}", headers=BOT)
    return (await resp.json())["linked"]


async def test_a_password_change_ends_the_chat_links(client, alice):
    await link(client, alice, "c1")
    assert (await client.get("/api/users/me", headers=as_chat("c1"))).status == 200
    resp = await client.post(
        "/api/users/me/password",
        headers=alice.headers,
        json={"currentPassword": alice.password, "newPassword": "a brand new one"},
    )
    assert resp.status == 204
    assert (await client.get("/api/users/me", headers=as_chat("c1"))).status == 401
    assert not await linked(client, "c1")


async def test_disabling_and_deleting_end_the_chat_links(client, alice, bob):
    await link(client, bob, "b1")
    resp = await client.patch(
        "/api/admin/users/bob", json={"disabled": True}, headers=alice.headers
    )
    assert resp.status == 200
    await client.patch("/api/admin/users/bob", json={"disabled": False}, headers=alice.headers)
    # Enabled again, bob's sessions work, but the bot must link anew.
    assert (await client.get("/api/users/me", headers=bob.headers)).status == 200
    assert (await client.get("/api/users/me", headers=as_chat("b1"))).status == 401
    assert not await linked(client, "b1")

    carol = await sign_up(client, "carol")
    await link(client, carol, "k1")
    assert (await client.delete("/api/admin/users/carol", headers=alice.headers)).status == 204
    assert (await client.get("/api/users/me", headers=as_chat("k1"))).status == 401
    # The name taken again does not inherit the link.
    await sign_up(client, "carol")
    assert not await linked(client, "k1")


async def test_verify_takes_a_session_never_a_personal_token(client, alice):
    pat = (await new_pat(client, alice, "script"))["secret"]
    token = await generate(client, "c9")
    resp = await client.post(
        "/api/chat/link/verify",
        headers=bearer(pat),
        json={"token": token, "serviceUserId": alice.id},
    )
    assert resp.status == 403 and "session" in (await resp.json())["error"]
    assert not await linked(client, "c9")
    # The same token still works from the signed-in session.
    resp = await client.post(
        "/api/chat/link/verify",
        headers=alice.headers,
        json={"token": token, "serviceUserId": alice.id},
    )
    assert resp.status == 200


async def test_made_up_chat_ids_spend_the_bot_keys_budget(aiohttp_client, tmp_path):
    from hubsvc.app import create_app

    config = make_config(
        tmp_path,
        chat__bot_key=BOT_KEY,
        rate_limit__enabled=True,
        rate_limit__burst=3,
        rate_limit__per_minute=1,
    )
    client = await aiohttp_client(create_app(config))
    statuses = []
    for n in range(6):
        resp = await client.get("/api/users/me", headers=as_chat(f"invented-{n}"))
        statuses.append(resp.status)
    assert statuses == [401, 401, 401, 429, 429, 429]
