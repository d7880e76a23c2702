"""notifications.email: an issue assigned to you and @mentions arrive by real SMTP; off, none."""

from __future__ import annotations

import asyncio

import pytest

from .conftest import make_config, sign_up
from .test_chat_link import smtp  # noqa: F401 - the aiosmtpd fixture
from .test_repos import create


@pytest.fixture
def config(tmp_path, smtp):
    return make_config(
        tmp_path, mail__smtp_host="127.0.0.1", mail__smtp_port=smtp.port, mail__starttls=False
    )


async def _mails(smtp, count: int, timeout: float = 10.0) -> list:
    for _ in range(int(timeout / 0.05)):
        if len(smtp.messages) >= count:
            break
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.2)  # nothing more should follow
    return [smtp.parsed(i) for i in range(len(smtp.messages))]


async def test_assignment_and_mentions_are_mailed_to_readers_who_want_them(
    client,
    smtp,
    alice,
    bob,
):
    await create(client, alice, "proj", visibility="private")
    await client.put(
        "/api/repositories/alice/proj/collaborators/bob",
        headers=alice.headers,
        json={"permission": "write"},
    )
    await sign_up(client, "carol")  # may not read the private repository
    resp = await client.post(
        "/api/repositories/alice/proj/issues",
        headers=alice.headers,
        json={"title": "Fix the build", "body": "cc @carol", "assignees": ["bob"]},
    )
    assert resp.status == 201
    [assigned] = await _mails(smtp, 1)
    assert assigned["To"] == "bob@example.com"
    assert assigned["Subject"] == "[alice/proj] Fix the build (#1)"
    assert "you were assigned issue #1 by alice" in assigned.get_content()
    # A mention in a comment; the author is never mailed about their own words.
    await client.post(
        "/api/repositories/alice/proj/issues/1/comments",
        headers=bob.headers,
        json={"body": "@alice @bob @carol @nobody have a look"},
    )
    mails = await _mails(smtp, 2)
    assert [m["To"] for m in mails[1:]] == ["alice@example.com"]
    assert "you were mentioned in issue #1 by bob" in mails[1].get_content()
    # Off: nothing more for alice.
    await client.post(
        "/api/users/me/settings/preferences",
        headers=alice.headers,
        json={"notifications": {"email": False}},
    )
    await client.post(
        "/api/repositories/alice/proj/issues/1/comments",
        headers=bob.headers,
        json={"body": "@alice again"},
    )
    assert len(await _mails(smtp, 3, timeout=0.5)) == 2


async def test_an_edit_of_the_assignees_tells_only_those_it_added(
    client,
    smtp,
    alice,
    bob,
):
    await create(client, alice, "proj")
    await sign_up(client, "carol")
    for name in ("bob", "carol"):  # assignable: writers
        await client.put(
            f"/api/repositories/alice/proj/collaborators/{name}",
            headers=alice.headers,
            json={"permission": "write"},
        )
    url = "/api/repositories/alice/proj/issues"
    await client.post(url, headers=alice.headers, json={"title": "Triage", "assignees": ["bob"]})
    assert [m["To"] for m in await _mails(smtp, 1)] == ["bob@example.com"]
    resp = await client.patch(
        url + "/1", headers=alice.headers, json={"assignees": ["bob", "carol"]}
    )
    assert resp.status == 200
    mails = await _mails(smtp, 2)
    assert [m["To"] for m in mails] == ["bob@example.com", "carol@example.com"]
    assert "you were assigned issue #1 by alice" in mails[1].get_content()
    # Taking someone off, or closing with the same assignees, tells nobody.
    await client.patch(
        url + "/1", headers=alice.headers, json={"assignees": ["carol"], "state": "closed"}
    )
    assert len(await _mails(smtp, 3, timeout=0.5)) == 2
    feed = await (
        await client.get("/api/repositories/alice/proj/events", headers=alice.headers)
    ).json()
    edits = [e["data"] for e in feed["events"] if e["data"].get("action") != "opened"]
    assert [(e["changes"], e["assigneesAdded"]) for e in edits] == [
        (["assignees"], ["carol"]),
        (["assignees", "state"], []),
    ]
