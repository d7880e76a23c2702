"""Inbound events cannot speak for the server; assignees may triage the repository."""

from __future__ import annotations

import pytest

from hubsvc.keys import BUS

from .conftest import make_config, sign_up
from .test_chat_link import smtp  # noqa: F401 - the aiosmtpd fixture
from .test_email_notify import _mails
from .test_repos import create


@pytest.fixture
def config(tmp_path, smtp):
    return make_config(
        tmp_path, mail__smtp_host="127.0.0.1", mail__smtp_port=smtp.port, mail__starttls=False
    )


async def test_a_forged_event_mails_nobody_and_is_labelled_inbound(
    client,
    smtp,
    alice,
    bob,
):
    # bob owns a repository, so with no webhook secret (the default) he may post events.
    await create(client, bob, "bait")
    await sign_up(client, "carol")
    forged = {
        "type": "issue",
        "repository": {"owner": "bob", "name": "bait"},
        "data": {
            "action": "opened",
            "issue": {
                "number": 1,
                "title": "Your account will be closed",
                "state": "open",
                "body": "@alice please sign in again",
                "url": "https://evil.example/login",
                "assignees": [{"username": "carol"}, {"username": "alice"}],
            },
        },
    }
    resp = await client.post("/api/webhooks/chat", json=forged, headers=bob.headers)
    assert resp.status == 202, await resp.text()
    await client.app[BUS].drain()
    assert await _mails(smtp, 1, timeout=1) == []
    feed = await (await client.get("/api/repositories/bob/bait/events")).json()
    [event] = feed["events"]
    assert event["inbound"] is True
    # A real assignment is mailed, with a link the server built.
    await create(client, alice, "real")
    await client.put(
        "/api/repositories/alice/real/collaborators/carol",
        headers=alice.headers,
        json={"permission": "write"},
    )
    await client.post(
        "/api/repositories/alice/real/issues",
        headers=alice.headers,
        json={"title": "Real work", "assignees": ["carol"]},
    )
    [mail] = await _mails(smtp, 1)
    assert mail["To"] == "carol@example.com"
    link = str(client.make_url("/api/repositories/alice/real/issues/1"))
    assert link.replace(str(client.make_url("")).rstrip("/"), "") in mail.get_content()
    assert "evil.example" not in mail.get_content()
    feed = await (await client.get("/api/repositories/alice/real/events")).json()
    assert feed["events"][0]["inbound"] is False


async def test_assignees_must_be_able_to_read_the_repository(client, smtp, alice, bob):
    await create(client, alice, "secret", visibility="private")
    url = "/api/repositories/alice/secret/issues"
    resp = await client.post(
        url, headers=alice.headers, json={"title": "Plan", "assignees": ["bob"]}
    )
    assert resp.status == 422
    assert (await resp.json())["error"] == (
        "assignees: need triage access to this repository or membership of its organization: bob"
    )
    resp = await client.post(url, headers=alice.headers, json={"title": "Plan"})
    assert resp.status == 201
    resp = await client.patch(url + "/1", headers=alice.headers, json={"assignees": ["bob"]})
    assert resp.status == 422
    issue = await (await client.get(url + "/1", headers=alice.headers)).json()
    assert issue["issue"]["assignees"] == []
    assert await _mails(smtp, 1, timeout=0.5) == []
    # A collaborator who may only read may not be assigned either; a writer may.
    for permission, status in (("read", 422), ("write", 200)):
        await client.put(
            "/api/repositories/alice/secret/collaborators/bob",
            headers=alice.headers,
            json={"permission": permission},
        )
        resp = await client.patch(url + "/1", headers=alice.headers, json={"assignees": ["bob"]})
        assert resp.status == status
    assert [m["To"] for m in await _mails(smtp, 1)] == ["bob@example.com"]
