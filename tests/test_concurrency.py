"""Check-then-act steps under concurrent requests, on both engines.

On SQLite one writer orders every write; on PostgreSQL the pool runs them at once, and
each of these holds only because writes are SERIALIZABLE (retried on conflict) or a
constraint decides. Each test sends its requests together with asyncio.gather.
"""

from __future__ import annotations

import asyncio

import pytest

from hubsvc.keys import STORE

from .conftest import make_config, sign_up
from .test_repos import create

ISSUES = "/api/repositories/alice/proj/issues"


@pytest.fixture
def config(tmp_path, database_url):
    # Hooks may name 127.0.0.1 (nothing is sent to them here).
    return make_config(tmp_path, database__url=database_url, webhooks__allowed_hosts=["127.0.0.1"])


async def test_concurrent_issues_get_unique_gap_free_numbers_and_one_event_each(
    client, events, alice, bob
):
    await create(client, alice)
    answers = await asyncio.gather(
        *(
            client.post(ISSUES, json={"title": f"t{n}"}, headers=(alice, bob)[n % 2].headers)
            for n in range(24)
        )
    )
    assert [r.status for r in answers] == [201] * 24
    numbers = sorted([(await r.json())["issue"]["number"] for r in answers])
    assert numbers == list(range(1, 25))
    opened = [e for e in await events.wait_for(24) if e.type == "issue"]
    # Each issue's event once, and the log's ids in the order the bus heard them.
    assert sorted(e.data["issue"]["number"] for e in opened) == numbers
    ids = [int(e.id) for e in events.events]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)


async def test_concurrent_stars_count_exactly(client, alice):
    await create(client, alice)
    users = [await sign_up(client) for _ in range(8)]
    star = "/api/repositories/alice/proj/star"
    await asyncio.gather(*(client.post(star, headers=u.headers) for u in users for _ in range(2)))
    repo = await (await client.get("/api/repositories/alice/proj")).json()
    assert repo["repo"]["starCount"] == 8
    await asyncio.gather(*(client.delete(star, headers=u.headers) for u in users[:5]))
    await asyncio.gather(*(client.post(star, headers=u.headers) for u in users[:2]))
    repo = await (await client.get("/api/repositories/alice/proj")).json()
    assert repo["repo"]["starCount"] == 5
    rows = await client.app[STORE].db.read(
        lambda c: c.execute("SELECT COUNT(*) FROM stars").fetchone()[0]
    )
    assert rows == 5


async def test_the_same_name_signed_up_at_once_is_taken_once(client):
    body = {"email": "x@example.com", "password": "correct horse", "name": "X"}
    answers = await asyncio.gather(
        *(
            client.post("/auth/sign-up", json={**body, "username": "same", "email": f"{n}@x.org"})
            for n in range(6)
        )
    )
    assert sorted(r.status for r in answers) == [201] + [409] * 5


async def test_of_first_accounts_signed_up_at_once_exactly_one_is_admin(client):
    answers = await asyncio.gather(
        *(
            client.post(
                "/auth/sign-up",
                json={
                    "email": f"u{n}@example.com",
                    "username": f"first{n}",
                    "password": "correct horse",
                    "name": "F",
                },
            )
            for n in range(6)
        )
    )
    assert [r.status for r in answers] == [201] * 6
    admins = [(await r.json())["user"]["isAdmin"] for r in answers]
    assert admins.count(True) == 1


async def test_two_admins_demoting_each_other_at_once_keep_one(client, alice, bob):
    users = "/api/admin/users"
    resp = await client.patch(f"{users}/bob", json={"isAdmin": True}, headers=alice.headers)
    assert resp.status == 200
    answers = await asyncio.gather(
        client.patch(f"{users}/bob", json={"isAdmin": False}, headers=alice.headers),
        client.patch(f"{users}/alice", json={"isAdmin": False}, headers=bob.headers),
    )
    assert sorted(r.status for r in answers)[0] == 200
    left = await client.app[STORE].db.read(
        lambda c: c.execute("SELECT COUNT(*) FROM users WHERE is_admin = 1").fetchone()[0]
    )
    assert left == 1


async def test_hooks_and_tokens_past_their_limits_at_once(client, alice):
    await create(client, alice)
    hooks = "/api/repositories/alice/proj/hooks"
    answers = await asyncio.gather(
        *(
            client.post(hooks, json={"url": f"http://127.0.0.1:9/{n}"}, headers=alice.headers)
            for n in range(26)
        )
    )
    assert sorted(r.status for r in answers) == [201] * 20 + [409] * 6
    tokens = "/api/users/me/tokens"
    answers = await asyncio.gather(
        *(client.post(tokens, json={"name": "ci"}, headers=alice.headers) for _ in range(5))
    )
    assert sorted(r.status for r in answers) == [201] + [409] * 4


async def test_one_open_pull_request_per_head_when_two_are_opened_at_once(client, alice, tmp_path):
    from .test_pulls import setup_branches

    await setup_branches(client, alice, tmp_path)
    pulls = "/api/repositories/alice/proj/pulls"
    body = {"title": "Topic", "head": "topic", "base": "main"}
    answers = await asyncio.gather(
        *(client.post(pulls, json=body, headers=alice.headers) for _ in range(4))
    )
    assert sorted(r.status for r in answers) == [201, 409, 409, 409]
    listed = await (await client.get(pulls + "?state=all")).json()
    assert len(listed["pullRequests"]) == 1


async def test_a_single_use_link_token_redeemed_at_once_links_once(client, alice):
    store = client.app[STORE]
    digest = b"\x01" * 32
    await store.db.write(
        lambda c: c.execute(
            "INSERT INTO chat_link_tokens (hash, chat_id, user_id, created_at, expires_at)"
            " VALUES (?, 'chat-1', ?, 'x', ?)",
            (digest, int(alice.data["id"]), 4102444800),
        )
    )
    results = await asyncio.gather(
        *(store.chat.redeem(digest, int(alice.data["id"])) for _ in range(4)),
        return_exceptions=True,
    )
    assert [r for r in results if not isinstance(r, Exception)] == ["chat-1"], results
