"""The chat webhook against a real local receiver: signing, retries, 429, outbox, inbound."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import time

import pytest

from hubsvc.app import create_app
from hubsvc.keys import BUS
from hubsvc.notify.webhook import WEBHOOK

from .conftest import Recorder, make_config, sign_up
from .gitcli import git, remote
from .receiver import Receiver
from .test_repos import create

SECRET = "s3cret-webhook-key"


@pytest.fixture
async def receiver(aiohttp_server):
    rec = Receiver()
    server = await aiohttp_server(rec.app)
    rec.url = str(server.make_url("/hook"))
    return rec


@pytest.fixture
async def hooked(aiohttp_client, tmp_path, receiver):
    """The app with its chat webhook pointed at the receiver, with fast retries."""
    config = make_config(
        tmp_path,
        chat__webhook_url=receiver.url,
        chat__webhook_secret=SECRET,
        chat__retry_seconds=0.05,
    )
    app = create_app(config)
    client = await aiohttp_client(app)
    client.app[WEBHOOK].timeout = 0.5
    admin = await sign_up(client, "boss")
    return client, admin


async def test_event_delivered_signed_with_delivery_id(hooked, receiver):
    client, admin = hooked
    await create(client, admin, "proj")
    await client.post("/api/repositories/boss/proj/star", headers=admin.headers)
    [request] = await receiver.wait_for(1)
    body = request["body"]
    expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    assert request["headers"]["X-Hub-Signature-256"] == expected
    assert request["headers"]["X-Hubsvc-Event"] == "star"
    assert len(request["headers"]["X-Hubsvc-Delivery"]) == 36
    embed = request["json"]["embeds"][0]
    assert embed["color"] == 16705372 and "Starred by boss" in embed["title"]
    assert embed["url"].endswith("/boss/proj") and embed["timestamp"].endswith("Z")
    await client.delete("/api/repositories/boss/proj/star", headers=admin.headers)
    requests = await receiver.wait_for(2)
    assert requests[1]["json"]["embeds"][0]["color"] == 9807270


async def test_retries_on_5xx_and_timeouts_then_delivers_once(hooked, receiver):
    client, admin = hooked
    receiver.plan = [500, "hang", 503]
    await create(client, admin, "proj")
    await client.post("/api/repositories/boss/proj/star", headers=admin.headers)
    requests = await receiver.wait_for(4)
    await asyncio.sleep(0.3)
    assert len(receiver.requests) == 4  # nothing after the success
    assert len({r["headers"]["X-Hubsvc-Delivery"] for r in requests}) == 1
    gaps = [b["at"] - a["at"] for a, b in zip(requests, requests[1:])]
    assert gaps[2] > gaps[0]  # delays grow
    resp = await client.get("/api/webhooks/chat/deliveries", headers=admin.headers)
    [delivery] = (await resp.json())["deliveries"]
    assert delivery["status"] == "delivered" and delivery["attempts"] == 4
    assert [a["statusCode"] for a in delivery["attemptList"]] == [500, None, 503, 200]
    assert "timed out" in delivery["attemptList"][1]["error"]


async def test_429_honours_retry_after(hooked, receiver):
    client, admin = hooked
    receiver.plan = [(429, {"Retry-After": "1"})]
    await create(client, admin, "proj")
    await client.post("/api/repositories/boss/proj/star", headers=admin.headers)
    first, second = await receiver.wait_for(2)
    assert second["at"] - first["at"] >= 0.95


async def test_other_4xx_is_not_retried(hooked, receiver):
    client, admin = hooked
    receiver.plan = [400]
    await create(client, admin, "proj")
    await client.post("/api/repositories/boss/proj/star", headers=admin.headers)
    await receiver.wait_for(1)
    await asyncio.sleep(0.4)
    assert len(receiver.requests) == 1
    deliveries = (
        await (await client.get("/api/webhooks/chat/deliveries", headers=admin.headers)).json()
    )["deliveries"]
    assert deliveries[0]["status"] == "failed" and deliveries[0]["lastStatus"] == 400
    # An administrator can send it again; it is a new delivery.
    resp = await client.post(
        f"/api/webhooks/chat/deliveries/{deliveries[0]['id']}/redeliver", headers=admin.headers
    )
    assert resp.status == 202
    again = (await resp.json())["delivery"]
    assert again["redeliveryOf"] == deliveries[0]["id"]
    requests = await receiver.wait_for(2)
    assert requests[1]["body"] == requests[0]["body"]
    assert (
        requests[1]["headers"]["X-Hubsvc-Delivery"] != requests[0]["headers"]["X-Hubsvc-Delivery"]
    )


async def test_deliveries_are_for_administrators(hooked, receiver):
    client, admin = hooked
    user = await sign_up(client, "plain")
    assert (await client.get("/api/webhooks/chat/deliveries", headers=user.headers)).status == 403
    assert (await client.get("/api/webhooks/chat/deliveries")).status == 401
    resp = await client.post("/api/webhooks/chat/deliveries/1/redeliver", headers=user.headers)
    assert resp.status == 403
    resp = await client.post("/api/webhooks/chat/deliveries/999/redeliver", headers=admin.headers)
    assert resp.status == 404


async def test_push_message_shows_last_five_commits_and_total(hooked, receiver, tmp_path):
    client, admin = hooked
    await create(client, admin, "proj")
    work = tmp_path / "w"
    await git("init", "-q", "-b", "main", str(work))
    for n in range(7):
        (work / "f.txt").write_text(f"{n}\n")
        await git("add", "f.txt", cwd=work)
        await git("commit", "-qm", f"commit number {n}", cwd=work)
    await git("push", "-q", remote(client, admin, "boss", "proj"), "main", cwd=work)
    [request] = await receiver.wait_for(1)
    embed = request["json"]["embeds"][0]
    assert embed["color"] == 5793266
    assert embed["title"] == "[boss/proj] boss created branch main with 7 new commits"
    # Each commit is "[`abc1234`](link to it) first line — author".
    shown = [line for line in embed["description"].splitlines() if line.startswith("[`")]
    assert [line.split(" ", 1)[1].split(" — ")[0] for line in shown] == [
        f"commit number {n}" for n in (6, 5, 4, 3, 2)
    ]
    assert "and 2 more" in embed["description"]
    assert {"name": "Total commits", "value": "7", "inline": True} in embed["fields"]


async def test_issue_and_pull_colours(hooked, receiver):
    client, admin = hooked
    await create(client, admin, "proj")
    url = "/api/repositories/boss/proj/issues"
    await client.post(
        url, json={"title": "Bug", "body": "details", "labels": ["ui"]}, headers=admin.headers
    )
    await client.patch(url + "/1", json={"state": "closed"}, headers=admin.headers)
    opened, closed = await receiver.wait_for(2)
    assert opened["json"]["embeds"][0]["color"] == 65280
    fields = {f["name"]: f["value"] for f in opened["json"]["embeds"][0]["fields"]}
    assert fields["Labels"] == "ui" and fields["Author"] == "boss" and fields["State"] == "open"
    assert opened["json"]["embeds"][0]["description"] == "details"
    assert closed["json"]["embeds"][0]["color"] == 16711680


async def test_private_repositories_never_reach_the_chat(hooked, receiver):
    client, admin = hooked
    await create(client, admin, "hidden", visibility="private")
    await client.post("/api/repositories/boss/hidden/star", headers=admin.headers)
    await create(client, admin, "shown")
    await client.post("/api/repositories/boss/shown/star", headers=admin.headers)
    [request] = await receiver.wait_for(1)
    await asyncio.sleep(0.2)
    assert len(receiver.requests) == 1 and "shown" in request["json"]["embeds"][0]["title"]


async def test_test_endpoints_send_a_real_message(hooked, receiver):
    client, admin = hooked
    user = await sign_up(client, "plain")
    for path in ("/api/webhooks/chat/test", "/api/chat/link/test"):
        assert (await client.get(path, headers=user.headers)).status == 403
        resp = await client.get(path, headers=admin.headers)
        assert await resp.json() == {"success": True, "status": 200, "error": None}
    requests = await receiver.wait_for(2)
    assert requests[0]["headers"]["X-Hubsvc-Event"] == "ping"
    receiver.plan = [502]
    resp = await client.get("/api/webhooks/chat/test", headers=admin.headers)
    assert (await resp.json())["success"] is False


async def test_test_endpoints_503_without_a_webhook(client, alice):
    for path in ("/api/webhooks/chat/test", "/api/chat/link/test"):
        resp = await client.get(path, headers=alice.headers)  # alice is the first: admin
        assert resp.status == 503 and "error" in await resp.json()


def _signed(body: dict, at: float | None = None) -> tuple[bytes, dict]:
    """Signed as a sender does: HMAC-SHA256 of "<timestamp>." + body, written out here."""
    raw = json.dumps(body).encode()
    timestamp = str(int(time.time() if at is None else at))
    signature = (
        "sha256="
        + hmac.new(SECRET.encode(), timestamp.encode() + b"." + raw, hashlib.sha256).hexdigest()
    )
    return raw, {
        "X-Hub-Signature-256": signature,
        "X-Hubsvc-Timestamp": timestamp,
        "Content-Type": "application/json",
    }


def _one_digit_off(signature: str) -> str:
    """The signature with its last hex digit changed (to "0", unless it was one already)."""
    return signature[:-1] + ("1" if signature.endswith("0") else "0")


async def test_inbound_with_secret_checks_the_signature(hooked, receiver):
    client, admin = hooked
    await create(client, admin, "proj")
    event = {
        "type": "issue",
        "repository": {"owner": "boss", "name": "proj"},
        "data": {"action": "opened", "issue": {"number": 9, "title": "From chat", "state": "open"}},
    }
    raw, headers = _signed(event)
    resp = await client.post("/api/webhooks/chat", data=raw, headers=headers)
    assert resp.status == 202 and (await resp.json())["accepted"] is True
    [request] = await receiver.wait_for(1)
    assert "From chat" in request["json"]["embeds"][0]["title"]
    stamp = {"X-Hubsvc-Timestamp": headers["X-Hubsvc-Timestamp"]}
    body_only = "sha256=" + hmac.new(SECRET.encode(), raw, hashlib.sha256).hexdigest()
    for bad in (
        {},
        {**stamp, "X-Hub-Signature-256": "sha256=" + "0" * 64},
        {**stamp, "X-Hub-Signature-256": _one_digit_off(headers["X-Hub-Signature-256"])},
        {"X-Hub-Signature-256": headers["X-Hub-Signature-256"]},  # no timestamp
        {**stamp, "X-Hub-Signature-256": body_only},
    ):  # the timestamp is signed too
        resp = await client.post(
            "/api/webhooks/chat", data=raw, headers={"Content-Type": "application/json", **bad}
        )
        assert resp.status == 401
    raw, headers = _signed({**event, "type": "wiki"})
    assert (await client.post("/api/webhooks/chat", data=raw, headers=headers)).status == 400
    raw, headers = _signed({**event, "repository": {"owner": "boss", "name": "nope"}})
    assert (await client.post("/api/webhooks/chat", data=raw, headers=headers)).status == 404


async def test_inbound_without_secret_needs_a_writer(client, events, alice, bob):
    await create(client, alice, "proj")
    event = {
        "type": "star",
        "repository": {"owner": "alice", "name": "proj"},
        "data": {"action": "added"},
    }
    assert (await client.post("/api/webhooks/chat", json=event)).status == 401
    assert (await client.post("/api/webhooks/chat", json=event, headers=bob.headers)).status == 403
    resp = await client.post("/api/webhooks/chat", json=event, headers=alice.headers)
    assert resp.status == 202
    [published] = await events.wait_for(1)
    assert published.type == "star" and published.data == {"action": "added"}
    assert published.actor["username"] == "alice"
    bad = {**event, "data": "x"}
    assert (await client.post("/api/webhooks/chat", json=bad, headers=alice.headers)).status == 400


async def test_inbound_data_is_checked_by_type_before_the_202(hooked, receiver):
    client, admin = hooked
    await create(client, admin, "proj")
    repo = {"owner": "boss", "name": "proj"}
    bad = [
        ("issue", {"action": "opened"}, "data.issue"),  # rendered "#None" before
        ("issue", {"action": "opened", "issue": "x"}, "data.issue"),  # crashed in the sender
        (
            "issue",
            {"action": "opened", "issue": {"number": "9", "title": "t", "state": "open"}},
            "data.issue.number",
        ),
        (
            "issue",
            {"action": "dance", "issue": {"number": 9, "title": "t", "state": "open"}},
            "data.action",
        ),
        (
            "pull_request",
            {
                "action": "opened",
                "pullRequest": {"number": 1, "title": "t", "state": "open", "author": "x"},
            },
            "data.pullRequest.author",
        ),
        ("push", {"ref": "refs/heads/main", "commits": [{"message": "m"}]}, "data.commits"),
        ("push", {"ref": "refs/heads/main", "commits": "abc"}, "data.commits"),
        ("star", {}, "data.action"),
        ("fork", {"forkee": None}, "data.forkee"),
    ]
    for type_, data, field in bad:
        raw, headers = _signed({"type": type_, "repository": repo, "data": data})
        resp = await client.post("/api/webhooks/chat", data=raw, headers=headers)
        assert resp.status == 400, (type_, data)
        assert (await resp.json())["error"].startswith(field), (type_, data)
    good = [
        (
            "push",
            {
                "ref": "refs/heads/main",
                "commits": [{"oid": "a" * 40, "message": "Fix it", "author": {"name": "Ann"}}],
                "totalCommits": 1,
            },
        ),
        (
            "fork",
            {
                "forkee": {"fullName": "ann/proj", "url": None},
                "forker": {"username": "ann"},
                "extra": [1, 2],
            },
        ),
    ]
    for type_, data in good:
        raw, headers = _signed({"type": type_, "repository": repo, "data": data})
        resp = await client.post("/api/webhooks/chat", data=raw, headers=headers)
        assert resp.status == 202, await resp.text()
    requests = await receiver.wait_for(2)
    titles = [r["json"]["embeds"][0]["title"] for r in requests]
    assert titles == [
        "[boss/proj] Inbound event: pushed 1 new commit to main",
        "[boss/proj] Inbound event: Forked by ann",
    ]


async def test_inbound_signed_requests_expire_and_cannot_be_replayed(hooked, receiver):
    client, admin = hooked
    await create(client, admin, "proj")
    event = {
        "type": "star",
        "repository": {"owner": "boss", "name": "proj"},
        "data": {"action": "added", "starCount": 1},
    }
    for age in (301, -301, 3600):
        raw, headers = _signed(event, at=time.time() - age)
        resp = await client.post("/api/webhooks/chat", data=raw, headers=headers)
        assert resp.status == 401, age
        assert "X-Hubsvc-Timestamp" in (await resp.json())["error"]
    raw, headers = _signed(event, at=time.time() - 200)  # within five minutes
    assert (await client.post("/api/webhooks/chat", data=raw, headers=headers)).status == 202
    resp = await client.post("/api/webhooks/chat", data=raw, headers=headers)
    assert resp.status == 409 and "replay" in (await resp.json())["error"]
    await receiver.wait_for(1)
    await asyncio.sleep(0.2)
    assert len(receiver.requests) == 1  # the replay reached nobody
    # The same event signed anew (a new timestamp) is a new request.
    raw, headers = _signed(event, at=time.time() + 1)
    assert (await client.post("/api/webhooks/chat", data=raw, headers=headers)).status == 202


async def test_the_secret_reaches_public_and_listed_private_repositories_only(
    aiohttp_client, tmp_path, receiver
):
    config = make_config(
        tmp_path,
        chat__webhook_url=receiver.url,
        chat__webhook_secret=SECRET,
        chat__webhook_repositories=["Boss/Linked"],
    )
    client = await aiohttp_client(create_app(config))
    recorder = Recorder()
    client.app[BUS].subscribe(recorder, name="test-recorder")
    boss = await sign_up(client, "boss")
    other = await sign_up(client, "other")
    await create(client, boss, "linked", visibility="private")
    await create(client, other, "secret", visibility="private")
    await create(client, other, "open")

    async def post(owner: str, name: str) -> int:
        raw, headers = _signed(
            {
                "type": "star",
                "repository": {"owner": owner, "name": name},
                "data": {"action": "added"},
            }
        )
        return (await client.post("/api/webhooks/chat", data=raw, headers=headers)).status

    assert await post("boss", "linked") == 202
    assert await post("other", "open") == 202
    # Another private repository looks exactly like a missing one.
    assert await post("other", "secret") == 404
    assert await post("other", "missing") == 404
    published = await recorder.wait_for(2)
    assert sorted(e.repository["name"] for e in published) == ["linked", "open"]


async def test_inbound_refuses_deep_or_non_json_bodies(hooked):
    client, admin = hooked
    raw = b"[" * 100_000
    timestamp = str(int(time.time()))
    signature = (
        "sha256="
        + hmac.new(SECRET.encode(), timestamp.encode() + b"." + raw, hashlib.sha256).hexdigest()
    )
    headers = {"X-Hub-Signature-256": signature, "X-Hubsvc-Timestamp": timestamp}
    resp = await client.post(
        "/api/webhooks/chat", data=raw, headers={**headers, "Content-Type": "application/json"}
    )
    assert resp.status == 400 and "deeper" in (await resp.json())["error"]
    resp = await client.post(
        "/api/webhooks/chat", data=raw, headers={**headers, "Content-Type": "text/plain"}
    )
    assert resp.status == 415


async def test_planning_events_reach_the_channel_but_reactions_do_not(hooked, receiver):
    client, admin = hooked
    await create(client, admin, "proj")
    base = "/api/repositories/boss/proj"
    await client.post(base + "/issues", json={"title": "t"}, headers=admin.headers)
    [opened] = await receiver.wait_for(1)
    resp = await client.post(
        base + "/issues/1/reactions", json={"content": "+1"}, headers=admin.headers
    )
    assert resp.status == 201
    await client.post(base + "/milestones", json={"title": "v1"}, headers=admin.headers)
    requests = await receiver.wait_for(2)
    assert [r["headers"]["X-Hubsvc-Event"] for r in requests] == ["issue", "milestone"]
    assert "created milestone v1" in requests[1]["json"]["embeds"][0]["title"]
