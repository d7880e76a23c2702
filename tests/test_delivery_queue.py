"""The three delivery tables share one claim / settle / record state machine (store/queue.py)."""

from __future__ import annotations

import time

import pytest

from hubsvc.store import Store
from hubsvc.store.leases import LeaseLost
from hubsvc.store.queue import HOOKS, MAIL, WEBHOOKS, backoff


def test_backoff_doubles_from_the_base_up_to_the_cap():
    assert [backoff(n, 2.0, 60.0) for n in (1, 2, 3, 5, 6, 9)] == [2, 4, 8, 32, 60, 60]


def test_mail_alone_is_claimed_without_the_lease():
    assert (WEBHOOKS.fenced, HOOKS.fenced, MAIL.fenced) == (True, True, False)


async def test_a_claim_is_taken_once_released_when_its_process_is_gone_and_fenced(
    tmp_path, database_url
):
    store = Store(tmp_path / "hubsvc.db", url=database_url)
    await store.open()
    try:
        now = time.time()
        await store.leases.beat("a", "jobs", now, 30)
        await store.leases.beat("b", "jobs", now, 30)  # alive, not the holder
        chat = await store.outbox.enqueue(
            event_id="1", event_type="push", repo_id=None, payload="{}"
        )
        [mail] = await store.mail.enqueue([("x@example.com", "s", b"body")])

        # The chat outbox needs the lease; mail does not, but is still claimed once.
        with pytest.raises(LeaseLost):
            await store.outbox.claim(chat["id"], "b", "jobs", now)
        assert await store.outbox.claim(chat["id"], "a", "jobs", now)
        assert not await store.outbox.claim(chat["id"], "a", "jobs", now)
        assert await store.mail.claim(mail, "b")
        assert not await store.mail.claim(mail, "a")

        # b's heartbeat runs out: its claim is released, one attempt counted, and b's
        # late outcome is not written over the release.
        await store.leases.release("b")
        assert await store.mail.settle_abandoned(time.time()) == 1
        await store.mail.record(mail, outcome="delivered", error=None, retry_at=None, holder="b")
        [row] = (await store.mail.recent(10, 0))[0]
        assert (row["status"], row["attempts"], row["delivered_at"]) == ("pending", 1, None)

        # The holder's outcome is written while its claim stands; a settled message's body goes.
        assert await store.mail.claim(mail, "a")
        await store.mail.record(mail, outcome="failed", error="550", retry_at=None, holder="a")
        body = await store.db.read(
            lambda c: c.execute(
                "SELECT message, status, attempts FROM mail_deliveries WHERE id = ?", (mail,)
            ).fetchone()
        )
        assert (body[0], body[1], body[2]) == (None, "failed", 2)
        await store.outbox.record_attempt(
            chat["id"],
            status_code=200,
            error=None,
            duration_ms=3,
            outcome="delivered",
            holder="a",
        )
        sent = await store.outbox.get(chat["id"])
        assert (sent["status"], sent["last_status"], sent["claimed_by"]) == ("delivered", 200, None)
        [listed] = (await store.outbox.recent(10, 0))[0]
        assert [a["status_code"] for a in listed["attempt_list"]] == [200]
    finally:
        await store.close()
