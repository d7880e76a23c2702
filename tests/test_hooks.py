"""Per-repository webhooks against real local receivers: management, SSRF, delivery rules."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import time

import pytest

from hubsvc.app import create_app
from hubsvc.events.shape import Event
from hubsvc.keys import STORE
from hubsvc.notify.webhook import HOOKS

from .conftest import make_config, sign_up
from .gitcli import git, remote
from .receiver import Receiver
from .test_repos import create

HOOKS_URL = "/api/repositories/alice/proj/hooks"


async def _receiver(aiohttp_server) -> Receiver:
    rec = Receiver()
    server = await aiohttp_server(rec.app)
    rec.url = str(server.make_url("/hook"))
    return rec


@pytest.fixture
async def receiver(aiohttp_server):
    return await _receiver(aiohttp_server)


@pytest.fixture
def config(tmp_path):
    # Local receivers listen on 127.0.0.1: the tests allow that one address.
    return make_config(
        tmp_path,
        webhooks__allowed_hosts=["127.0.0.1"],
        webhooks__retry_seconds=0.05,
        webhooks__max_retry_seconds=0.2,
        webhooks__timeout_seconds=0.5,
    )


async def add_hook(client, user, url, path=HOOKS_URL, status=201, **fields):
    resp = await client.post(path, json={"url": url, **fields}, headers=user.headers)
    body = await resp.json()
    assert resp.status == status, body
    return body.get("hook", body)


async def deliveries(client, user, hook_id, path=HOOKS_URL, settled=True):
    """The hook's deliveries; with settled, once none is still pending (the receiver's
    answer arrives a moment before the sender records it)."""
    for _ in range(100):
        resp = await client.get(f"{path}/{hook_id}/deliveries", headers=user.headers)
        assert resp.status == 200, await resp.text()
        rows = (await resp.json())["deliveries"]
        if not settled or all(row["status"] != "pending" for row in rows):
            break
        await asyncio.sleep(0.05)
    return rows


async def star(client, user, repo="alice/proj"):
    resp = await client.post(f"/api/repositories/{repo}/star", headers=user.headers)
    assert resp.status == 200, await resp.text()
    resp = await client.delete(f"/api/repositories/{repo}/star", headers=user.headers)
    assert resp.status in (200, 204), await resp.text()


async def open_issue(client, user, title="bug", repo="alice/proj"):
    resp = await client.post(
        f"/api/repositories/{repo}/issues", json={"title": title}, headers=user.headers
    )
    assert resp.status == 201, await resp.text()
    return (await resp.json())["issue"]


async def test_hook_crud_shape_and_secret_never_shown(client, alice, receiver):
    await create(client, alice, "proj")
    hook = await add_hook(client, alice, receiver.url, secret="s3cret")
    assert set(hook) == {
        "id",
        "url",
        "format",
        "events",
        "branches",
        "active",
        "hasSecret",
        "createdAt",
        "lastDelivery",
        "disabledReason",
    }
    assert hook["format"] == "discord" and hook["active"] is True and hook["hasSecret"] is True
    # Every event type by default, as GitHub's "send me everything".
    assert hook["events"] == [
        "issue",
        "pull_request",
        "push",
        "star",
        "fork",
        "status",
        "milestone",
        "label",
        "reaction",
        "release",
    ]
    assert hook["branches"] is None and hook["lastDelivery"] is None
    resp = await client.patch(
        f"{HOOKS_URL}/{hook['id']}",
        headers=alice.headers,
        json={
            "format": "json",
            "events": ["star", "issue"],
            "branches": "release/*",
            "secret": None,
        },
    )
    changed = (await resp.json())["hook"]
    assert changed["format"] == "json" and changed["events"] == ["issue", "star"]
    assert changed["branches"] == "release/*" and changed["hasSecret"] is False
    listed = await (await client.get(HOOKS_URL, headers=alice.headers)).json()
    assert [h["id"] for h in listed["hooks"]] == [hook["id"]] and listed["hasMore"] is False
    assert "s3cret" not in str(listed)
    resp = await client.delete(f"{HOOKS_URL}/{hook['id']}", headers=alice.headers)
    assert resp.status == 204
    resp = await client.get(f"{HOOKS_URL}/{hook['id']}", headers=alice.headers)
    assert resp.status == 404


async def test_wrong_fields_are_400_naming_them(client, alice, receiver):
    await create(client, alice, "proj")
    for body, field in (
        ({"url": "ftp://127.0.0.1/x"}, "url"),
        ({}, "url"),
        ({"url": receiver.url, "format": "teams"}, "format"),
        ({"url": receiver.url, "events": ["issue", "wiki"]}, "events"),
        ({"url": receiver.url, "events": []}, "events"),
        ({"url": receiver.url, "active": "yes"}, "active"),
    ):
        resp = await client.post(HOOKS_URL, json=body, headers=alice.headers)
        assert resp.status == 400, body
        assert (await resp.json())["error"].startswith(field), body
    assert (await (await client.get(HOOKS_URL, headers=alice.headers)).json())["hooks"] == []


async def test_only_repository_admins_manage_hooks(client, alice, bob, receiver):
    await create(client, alice, "proj")
    await create(client, alice, "secret", visibility="private")
    hook = await add_hook(client, alice, receiver.url)
    carol = await sign_up(client, "carol")
    for path in (HOOKS_URL, f"{HOOKS_URL}/{hook['id']}", f"{HOOKS_URL}/{hook['id']}/deliveries"):
        assert (await client.get(path, headers=bob.headers)).status == 403, path  # a reader
        assert (await client.get(path)).status == 401, path
    resp = await client.post(HOOKS_URL, json={"url": receiver.url}, headers=bob.headers)
    assert resp.status == 403
    private = "/api/repositories/alice/secret/hooks"
    assert (await client.get(private, headers=bob.headers)).status == 404  # can't read it
    resp = await client.put(
        "/api/repositories/alice/proj/collaborators/carol",
        json={"permission": "admin"},
        headers=alice.headers,
    )
    assert resp.status in (200, 201), await resp.text()
    resp = await client.put(
        "/api/repositories/alice/proj/collaborators/bob",
        json={"permission": "write"},
        headers=alice.headers,
    )
    assert (await client.get(HOOKS_URL, headers=bob.headers)).status == 403  # a writer
    assert (await client.get(HOOKS_URL, headers=carol.headers)).status == 200
    await add_hook(client, carol, receiver.url)


async def test_at_most_twenty_hooks(client, alice, receiver):
    await create(client, alice, "proj")
    for _ in range(20):
        await add_hook(client, alice, receiver.url)
    body = await add_hook(client, alice, receiver.url, status=409)
    assert "20" in body["error"]


@pytest.fixture
async def strict(aiohttp_client, tmp_path):
    """An app with no allowed hosts, as a server is by default."""
    client = await aiohttp_client(create_app(make_config(tmp_path)))
    alice = await sign_up(client, "alice")
    await create(client, alice, "proj")
    return client, alice


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/hook",
        "http://10.0.0.1/",
        "http://[::1]:8080/",
        "http://169.254.169.254/latest/meta-data",
        "http://localhost:1/",
        "http://0.0.0.0/",
        "http://224.0.0.1/",
        "http://192.168.1.1/",
        "http://[::ffff:127.0.0.1]/",
        "https://100.64.0.1/",
    ],
)
async def test_ssrf_refused_at_save(strict, url):
    client, alice = strict
    body = await add_hook(client, alice, url, status=400)
    assert body["error"].startswith("url: ") and "allowed_hosts" in body["error"], body


# Other spellings of refused addresses, with the kind the refusal names. The host of a
# URL with a decimal, octal or hex IPv4 goes through getaddrinfo, which reads it as
# inet_aton does (127.0.0.1), so it is refused by the address it resolves to.
ENCODED = [
    ("http://[2002:7f00:1::]/", "loopback"),
    ("http://[2002:a9fe:a9fe::1]/", "link-local"),
    ("http://[2002:c0a8:101::]:8080/", "private"),  # 6to4 of 192.168.1.1
    ("http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/", "loopback"),  # Teredo client
    ("http://[::127.0.0.1]/", "loopback"),
    ("http://[::10.0.0.1]/", "private"),
    ("http://[64:ff9b::10.0.0.1]/", "private"),
    ("http://[64:ff9b::a9fe:a9fe]/", "link-local"),
    ("http://[64:ff9b:1::a00:1]/", ""),  # reserved or private, by Python version
    ("http://[fec0::1]/", "site-local"),
    ("http://2130706433/", "loopback"),
    ("http://0x7f.1/", "loopback"),
    ("http://017700000001/", "loopback"),
    ("http://0177.0.0.1/", "loopback"),
    ("http://127.1/", "loopback"),
    ("http://0/", "unspecified"),
]


@pytest.mark.parametrize("url, kind", ENCODED)
async def test_other_encodings_of_refused_addresses_refused_at_save(strict, url, kind):
    client, alice = strict
    body = await add_hook(client, alice, url, status=400)
    assert body["error"].startswith("url: ") and "allowed_hosts" in body["error"], body
    assert f"a {kind}" in body["error"], body


async def test_ssrf_refused_on_patch_too(strict, receiver):
    client, alice = strict
    client.app[HOOKS].rules.networks.append(ipaddress.ip_network("127.0.0.1/32"))
    hook = await add_hook(client, alice, receiver.url)
    client.app[HOOKS].rules.networks.clear()
    resp = await client.patch(
        f"{HOOKS_URL}/{hook['id']}", json={"url": "http://localhost/"}, headers=alice.headers
    )
    assert resp.status == 400 and "loopback" in (await resp.json())["error"]


async def test_ssrf_checked_again_at_delivery(client, alice, receiver):
    """A hook saved while allowed, whose host is refused when delivering, is never reached."""
    await create(client, alice, "proj")
    hook = await add_hook(client, alice, receiver.url)
    client.app[HOOKS].rules.networks.clear()  # as if the address changed under the name
    await star(client, alice)
    await asyncio.sleep(0.3)
    assert receiver.requests == []
    [*_, first] = await deliveries(client, alice, hook["id"])
    assert "loopback" in first["error"] and first["statusCode"] is None


@pytest.mark.parametrize(
    "host, allowed", [("[2002:7f00:1::]", "2002::/16"), ("2130706433", "127.0.0.1/32")]
)
async def test_encoded_loopback_refused_when_dialling(client, alice, receiver, host, allowed):
    """A hook saved while its range was allowed is refused at delivery once it is not."""
    await create(client, alice, "proj")
    rules = client.app[HOOKS].rules
    rules.networks.append(ipaddress.ip_network(allowed))
    url = receiver.url.replace("127.0.0.1", host)
    hook = await add_hook(client, alice, url)
    rules.networks.clear()
    await star(client, alice)
    for _ in range(100):
        rows = await deliveries(client, alice, hook["id"], settled=False)
        if rows and rows[-1]["error"]:
            break
        await asyncio.sleep(0.05)
    assert "loopback" in rows[-1]["error"] and rows[-1]["statusCode"] is None, rows
    assert receiver.requests == []


async def test_events_delivered_in_order_signed_with_stable_ids(client, alice, receiver):
    await create(client, alice, "proj", visibility="private")
    hook = await add_hook(client, alice, receiver.url, secret="k3y", format="json")
    await star(client, alice)
    await open_issue(client, alice)
    requests = await receiver.wait_for(3)
    assert [r["headers"]["X-Hubsvc-Event"] for r in requests] == ["star", "star", "issue"]
    assert [r["json"]["data"].get("action") for r in requests] == ["added", "removed", "opened"]
    ids = [int(r["json"]["id"]) for r in requests]
    assert ids == sorted(ids)
    for r in requests:
        expected = "sha256=" + hmac.new(b"k3y", r["body"], hashlib.sha256).hexdigest()
        assert r["headers"]["X-Hub-Signature-256"] == expected
        assert r["headers"]["X-Hubsvc-Hook-Id"] == hook["id"]
    rows = await deliveries(client, alice, hook["id"])
    assert [d["event"]["type"] for d in rows] == ["issue", "star", "star"]  # newest first
    assert {d["guid"] for d in rows} == {r["headers"]["X-Hubsvc-Delivery"] for r in requests}
    assert all(d["status"] == "delivered" and d["statusCode"] == 200 for d in rows)
    shown = (await (await client.get(f"{HOOKS_URL}/{hook['id']}", headers=alice.headers)).json())[
        "hook"
    ]
    assert shown["lastDelivery"]["id"] == rows[0]["id"]


async def test_events_and_branch_filters(client, alice, receiver, tmp_path):
    await create(client, alice, "proj")
    await add_hook(client, alice, receiver.url, events=["push"], branches="release/*")
    await star(client, alice)
    await open_issue(client, alice)
    work = tmp_path / "w"
    await git("init", "-q", "-b", "main", str(work))
    (work / "f.txt").write_text("x\n")
    await git("add", "f.txt", cwd=work)
    await git("commit", "-qm", "first", cwd=work)
    url = remote(client, alice, "alice", "proj")
    await git("push", "-q", url, "main", cwd=work)
    await git("push", "-q", url, "main:release/1.0", cwd=work)
    [request] = await receiver.wait_for(1)
    await asyncio.sleep(0.2)
    assert len(receiver.requests) == 1
    assert "release/1.0" in str(request["json"])


async def test_formats_slack_and_discord(client, alice, aiohttp_server):
    await create(client, alice, "proj")
    slack, discord = await _receiver(aiohttp_server), await _receiver(aiohttp_server)
    await add_hook(client, alice, slack.url, format="slack")
    await add_hook(client, alice, discord.url)
    await open_issue(client, alice, "@everyone look")
    [s], [d] = await slack.wait_for(1), await discord.wait_for(1)
    assert "look" in s["json"]["text"] and s["json"]["blocks"]
    assert d["json"]["embeds"][0]["title"].endswith("@everyone look")
    assert d["json"]["allowed_mentions"] == {"parse": []}


async def test_private_repository_events_reach_its_hooks_only(client, alice, aiohttp_server):
    await create(client, alice, "proj")
    await create(client, alice, "secret", visibility="private")
    public, private = await _receiver(aiohttp_server), await _receiver(aiohttp_server)
    await add_hook(client, alice, public.url)
    await add_hook(client, alice, private.url, path="/api/repositories/alice/secret/hooks")
    await open_issue(client, alice, "hidden", repo="alice/secret")
    await open_issue(client, alice, "shown")
    [p], [s] = await public.wait_for(1), await private.wait_for(1)
    assert "shown" in str(p["json"]) and "hidden" in str(s["json"])
    await asyncio.sleep(0.2)
    assert len(public.requests) == 1 and len(private.requests) == 1


async def test_ping_and_redeliver_keep_the_delivery_id(client, alice, receiver):
    await create(client, alice, "proj")
    hook = await add_hook(client, alice, receiver.url)
    resp = await client.post(f"{HOOKS_URL}/{hook['id']}/test", headers=alice.headers)
    ping = (await resp.json())["delivery"]
    assert resp.status == 200 and ping["status"] == "delivered" and ping["event"]["type"] == "ping"
    assert receiver.requests[0]["headers"]["X-Hubsvc-Event"] == "ping"
    receiver.plan = [422]
    await open_issue(client, alice)
    await receiver.wait_for(2)
    for _ in range(100):  # the answer reached the receiver; its record follows at once
        [failed, _] = await deliveries(client, alice, hook["id"])
        if failed["status"] != "pending":
            break
        await asyncio.sleep(0.05)
    assert failed["status"] == "failed" and failed["statusCode"] == 422
    resp = await client.post(
        f"{HOOKS_URL}/{hook['id']}/deliveries/{failed['id']}/redeliver", headers=alice.headers
    )
    assert resp.status == 202
    await receiver.wait_for(3)
    # Picked by id, not by position: under load a 0.5 s timeout may make the sender
    # try a request twice, which the receiver sees as one more request.
    for _ in range(100):
        same = [
            r for r in receiver.requests if r["headers"].get("X-Hubsvc-Delivery") == failed["guid"]
        ]
        if len(same) >= 2:
            break
        await asyncio.sleep(0.05)
    assert len(same) >= 2 and same[-1]["body"] == same[0]["body"]
    resp = await client.post(
        f"{HOOKS_URL}/{hook['id']}/deliveries/999/redeliver", headers=alice.headers
    )
    assert resp.status == 404


async def test_refused_message_does_not_block_the_next(client, alice, receiver):
    """12.8: a 4xx is final for that message, recorded with the answer, and the next goes."""
    await create(client, alice, "proj")
    hook = await add_hook(client, alice, receiver.url)
    receiver.plan = [(400, {"Content-Type": "text/plain"})]
    await open_issue(client, alice, "one")
    await open_issue(client, alice, "two")
    first, second = await receiver.wait_for(2)
    assert "two" in str(second["json"])
    await asyncio.sleep(0.3)
    assert len(receiver.requests) == 2  # the refused one is not retried
    for _ in range(100):
        newest, oldest = await deliveries(client, alice, hook["id"])
        if "pending" not in (newest["status"], oldest["status"]):
            break
        await asyncio.sleep(0.05)
    assert oldest["status"] == "failed" and oldest["statusCode"] == 400
    assert oldest["error"] == "HTTP 400" and oldest["attempts"] == 1
    assert oldest["durationMs"] is not None
    assert newest["status"] == "delivered"


async def test_redirect_is_final_and_not_followed(client, alice, receiver):
    await create(client, alice, "proj")
    hook = await add_hook(client, alice, receiver.url)
    receiver.plan = [(302, {"Location": receiver.url + "?again"})]
    await open_issue(client, alice)
    await receiver.wait_for(1)
    await asyncio.sleep(0.3)
    assert len(receiver.requests) == 1
    [row] = await deliveries(client, alice, hook["id"])
    assert row["status"] == "failed" and "redirects are not followed" in row["error"]


async def test_retries_then_a_2xx_lets_the_queue_go_at_once(client, alice, receiver):
    """5xx, 408 and timeouts retry the same delivery id; after the 2xx the rest go in order."""
    await create(client, alice, "proj")
    hook = await add_hook(client, alice, receiver.url)
    receiver.plan = [500, 408, "hang", 503]
    for n in range(3):
        await open_issue(client, alice, f"issue {n}")
    requests = await receiver.wait_for(7, timeout=15)
    titles = [r["json"]["embeds"][0]["title"] for r in requests]
    assert all("issue 0" in t for t in titles[:5]) and "issue 1" in titles[5]
    assert "issue 2" in titles[6]
    assert len({r["headers"]["X-Hubsvc-Delivery"] for r in requests[:5]}) == 1
    [*_, first] = await deliveries(client, alice, hook["id"])
    assert first["attempts"] == 5 and first["status"] == "delivered"


async def test_429_honours_retry_after(client, alice, receiver):
    await create(client, alice, "proj")
    await add_hook(client, alice, receiver.url)
    receiver.plan = [(429, {"Retry-After": "1"})]
    await open_issue(client, alice)
    first, second = await receiver.wait_for(2)
    assert second["at"] - first["at"] >= 0.9  # not the 0.05 s of the backoff
    assert second["headers"]["X-Hubsvc-Delivery"] == first["headers"]["X-Hubsvc-Delivery"]


async def test_failing_hook_is_disabled_with_reason_and_reactivated(
    aiohttp_client, tmp_path, receiver
):
    config = make_config(
        tmp_path,
        webhooks__allowed_hosts=["127.0.0.1"],
        webhooks__retry_seconds=0.05,
        webhooks__max_retry_seconds=0.1,
        webhooks__disable_after_hours=0.5 / 3600,
    )
    client = await aiohttp_client(create_app(config))
    alice = await sign_up(client, "alice")
    await create(client, alice, "proj")
    hook = await add_hook(client, alice, receiver.url)
    receiver.plan = [500] * 1000
    await open_issue(client, alice)
    deadline = time.monotonic() + 10
    while True:
        shown = (
            await (await client.get(f"{HOOKS_URL}/{hook['id']}", headers=alice.headers)).json()
        )["hook"]
        if not shown["active"] or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.1)
    assert shown["active"] is False and "HTTP 500" in shown["disabledReason"]
    count = len(receiver.requests)
    await open_issue(client, alice, "while off")
    await asyncio.sleep(0.3)
    assert len(receiver.requests) == count
    receiver.plan = []
    resp = await client.patch(
        f"{HOOKS_URL}/{hook['id']}", json={"active": True}, headers=alice.headers
    )
    assert (await resp.json())["hook"]["disabledReason"] is None
    # The delivery queued before it was disabled goes; the event of the off time does not.
    requests = await receiver.wait_for(count + 1)
    assert "bug" in str(requests[-1]["json"])
    await open_issue(client, alice, "after")
    requests = await receiver.wait_for(count + 2)
    assert "after" in str(requests[-1]["json"])


async def test_a_failing_hook_never_delays_another(client, alice, aiohttp_server):
    await create(client, alice, "proj")
    healthy, failing = await _receiver(aiohttp_server), await _receiver(aiohttp_server)
    await add_hook(client, alice, healthy.url)
    await add_hook(client, alice, failing.url)
    failing.plan = [500] * 15 + ["hang"]
    for n in range(10):
        await open_issue(client, alice, f"issue {n}")
    got = await healthy.wait_for(10)
    assert [f"issue {n}" in r["json"]["embeds"][0]["title"] for n, r in enumerate(got)] == [
        True
    ] * 10
    requests = await failing.wait_for(16 + 10, timeout=15)
    delivered = [r for r in requests if r is not requests[15]][15:]
    titles = [r["json"]["embeds"][0]["title"] for r in delivered]
    assert [f"issue {n}" in t for n, t in enumerate(titles)] == [True] * 10


async def test_burst_of_5000_events_each_hook_gets_all_in_order(client, alice, aiohttp_server):
    repo = await create(client, alice, "proj")
    one, two = await _receiver(aiohttp_server), await _receiver(aiohttp_server)
    await add_hook(client, alice, one.url, format="json")
    await add_hook(client, alice, two.url, format="json")
    batch = [
        Event(
            type="star",
            repository={"owner": "alice", "name": "proj"},
            actor=None,
            data={"action": "added", "n": n},
            repo_id=str(repo["id"]),
        )
        for n in range(5000)
    ]
    await client.app[STORE].events.append(batch)
    for rec in (one, two):
        # At least once: a delivery answered after the 0.5 s timeout (a loaded machine;
        # the receiver shares the test's loop) is sent again under its own delivery id.
        deadline = time.monotonic() + 60
        while len({r["headers"]["X-Hubsvc-Delivery"] for r in rec.requests}) < 5000:
            assert time.monotonic() < deadline, len(rec.requests)
            await asyncio.sleep(0.05)
        first: dict[str, int] = {}  # delivery id -> n, in the order first received
        for r in rec.requests:
            n = r["json"]["data"]["n"]
            assert first.setdefault(r["headers"]["X-Hubsvc-Delivery"], n) == n
        assert list(first.values()) == list(range(5000))


async def test_chat_webhook_redirect_is_final_and_next_goes(aiohttp_client, tmp_path, receiver):
    """The server-wide chat webhook follows the same rules: a 3xx is final, not retried."""
    config = make_config(tmp_path, chat__webhook_url=receiver.url, chat__retry_seconds=0.05)
    client = await aiohttp_client(create_app(config))
    admin = await sign_up(client, "boss")
    await create(client, admin, "proj")
    receiver.plan = [(301, {"Location": receiver.url + "/moved"})]
    await star(client, admin, "boss/proj")
    await receiver.wait_for(2)
    await asyncio.sleep(0.3)
    assert len(receiver.requests) == 2
    rows = (
        await (await client.get("/api/webhooks/chat/deliveries", headers=admin.headers)).json()
    )["deliveries"]
    assert rows[1]["status"] == "failed" and "redirects are not followed" in rows[1]["lastError"]
    assert rows[0]["status"] == "delivered"
