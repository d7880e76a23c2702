"""Event ids are commit order, with several writers: a reader never skips an event.

Two stores over one database stand for two server processes. On PostgreSQL a
sequence would hand the slow transaction the lower id and let the fast one commit a
higher id first; a reader that then moved past it would skip the slow event for good.
The ids taken last in each event-writing transaction, under a lock held until commit
(SQLite's write lock, PostgreSQL's advisory lock), make the fast writer wait.
"""

from __future__ import annotations

import asyncio
import time

from hubsvc.events.shape import Event
from hubsvc.store import Store
from hubsvc.store.log import append_events

REPO = {"owner": "nobody", "name": "nothing"}


def _event(n: int) -> Event:
    return Event(type="star", repository=REPO, actor=None, data={"n": n})


async def _open(tmp_path, database_url: str) -> Store:
    store = Store(tmp_path / "hubsvc.db", url=database_url)
    await store.open()
    return store


async def test_a_slow_event_transaction_is_never_skipped_by_a_reader(tmp_path, database_url):
    slow_writer = await _open(tmp_path, database_url)
    fast_writer = await _open(tmp_path, database_url)
    reader = await _open(tmp_path, database_url)
    try:

        def slow(conn):
            written = append_events(conn, [_event(1)])
            time.sleep(1.0)  # still uncommitted while the other writer tries its event
            return written

        slow_task = asyncio.create_task(slow_writer.db.write(slow))
        await asyncio.sleep(0.3)
        fast_task = asyncio.create_task(fast_writer.events.append([_event(2)]))
        seen: list[tuple[int, int]] = []
        cursor = 0
        # The reader polls as a consumer does, moving its cursor past what it read.
        while not (slow_task.done() and fast_task.done()) or cursor < 2:
            for event in await reader.events.after(cursor, 100):
                seen.append((int(event.id), event.data["n"]))
                cursor = int(event.id)
            await asyncio.sleep(0.01)
        slow_ids = [int(e.id) for e in await slow_task]
        fast_ids = [int(e.id) for e in await fast_task]
        # The slow transaction committed first, so it holds the lower id, and the
        # reader saw both, in order, each once.
        assert slow_ids < fast_ids
        assert seen == [(slow_ids[0], 1), (fast_ids[0], 2)]
    finally:
        for store in (slow_writer, fast_writer, reader):
            await store.close()


async def test_many_writers_at_once_give_unique_ids_in_commit_order(tmp_path, database_url):
    stores = [await _open(tmp_path, database_url) for _ in range(3)]
    try:
        batches = await asyncio.gather(
            *(stores[n % 3].events.append([_event(n), _event(n)]) for n in range(30))
        )
        ids = sorted(int(e.id) for batch in batches for e in batch)
        # None reused; on PostgreSQL a retried transaction may leave a gap (a cursor
        # means "every event up to here"), never a repeat.
        assert len(set(ids)) == 60 and ids[0] >= 1
        for batch in batches:  # one transaction's events are consecutive
            assert int(batch[1].id) == int(batch[0].id) + 1
        logged = [int(e.id) for e in await stores[0].events.after(0, 100)]
        assert logged == ids
    finally:
        for store in stores:
            await store.close()
