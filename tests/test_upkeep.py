"""Scheduled upkeep: finished deliveries and expired sessions are pruned, nothing else."""

from __future__ import annotations

import time

from hubsvc.keys import STORE
from hubsvc.timeutil import iso

from .conftest import sign_up


async def test_prune_drops_finished_deliveries_and_expired_sessions(app, client):
    store = app[STORE]
    user = await sign_up(client, "ada")
    uid = int(user.id)
    done, failed, pending = [
        await store.outbox.enqueue(event_id=str(n), event_type="issues", repo_id=None, payload="{}")
        for n in (1, 2, 3)
    ]
    await store.outbox.record_attempt(
        done["id"], status_code=200, error=None, duration_ms=1, outcome="delivered"
    )
    await store.outbox.record_attempt(
        failed["id"], status_code=500, error="x", duration_ms=1, outcome="failed"
    )
    await store.users.add_token(uid, b"e" * 32, int(time.time()) + 3600)
    await store.db.write(
        lambda c: c.execute("UPDATE tokens SET expires_at = 1 WHERE hash = ?", (b"e" * 32,))
    )

    # Nothing is old enough yet: a cutoff in the past keeps every delivery.
    assert await store.upkeep.prune_deliveries(iso(time.time() - 3600)) == 0
    assert await store.upkeep.prune_deliveries(iso(time.time() + 60)) == 2
    assert await store.outbox.get(done["id"]) is None
    assert await store.outbox.get(failed["id"]) is None
    assert (await store.outbox.get(pending["id"]))["status"] == "pending"

    assert await store.upkeep.prune_sessions(int(time.time())) == 1
    # The live session still works.
    resp = await client.get("/api/users/me", headers=user.headers)
    assert resp.status == 200
    await store.upkeep.optimize()
