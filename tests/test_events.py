"""The event bus: publish never blocks, each subscriber has its own bounded queue."""

from __future__ import annotations

import asyncio

from hubsvc.events import Event, EventBus


def _event(n: int) -> Event:
    return Event(type="star", repository={"owner": "a", "name": "r"}, actor=None,
                 data={"action": "added", "n": n})


async def test_every_subscriber_gets_every_event_in_order():
    bus = EventBus()
    got_a, got_b = [], []

    async def a(event):
        got_a.append(event.data["n"])

    async def b(event):
        got_b.append(event.data["n"])

    bus.subscribe(a)
    unsubscribe_b = bus.subscribe(b)
    for n in range(5):
        bus.publish(_event(n))
    await bus.drain()
    assert got_a == got_b == [0, 1, 2, 3, 4]
    unsubscribe_b()
    bus.publish(_event(5))
    await bus.drain()
    assert got_a[-1] == 5 and got_b[-1] == 4
    await bus.close()


async def test_a_stuck_subscriber_never_blocks_publish_or_the_others():
    bus = EventBus(queue_size=3)
    release = asyncio.Event()
    fast = []

    async def stuck(event):
        await release.wait()

    async def quick(event):
        fast.append(event.data["n"])

    bus.subscribe(stuck, name="stuck")
    bus.subscribe(quick, name="quick", maxsize=100)
    for n in range(20):
        bus.publish(_event(n))  # returns at once even though "stuck" is full
    await asyncio.sleep(0.05)
    assert fast == list(range(20))
    stuck_sub = next(s for s in bus._subscribers if s.name == "stuck")
    assert stuck_sub.dropped > 0
    release.set()
    await bus.close()


async def test_a_failing_subscriber_keeps_running():
    bus = EventBus()
    seen = []

    async def flaky(event):
        seen.append(event.data["n"])
        if event.data["n"] == 0:
            raise ValueError("boom")

    bus.subscribe(flaky)
    bus.publish(_event(0))
    bus.publish(_event(1))
    await bus.drain()
    assert seen == [0, 1]
    await bus.close()


def test_event_shape():
    event = _event(1)
    data = event.to_dict()
    assert set(data) == {"id", "type", "repository", "actor", "data", "createdAt"}
    assert data["createdAt"].endswith("Z")
