"""Open sockets' objects leave the cycle collector's view in steps and come back to be freed."""

from __future__ import annotations

import asyncio
import gc
import weakref

import pytest

from hubsvc.notify.collector import COLLECTOR
from hubsvc.notify.hub import HUB
from hubsvc.notify.sockets import Client

from .conftest import make_config
from .test_ws import connect


@pytest.fixture
def config(tmp_path, database_url):
    return make_config(tmp_path, database__url=database_url, websocket__max_per_ip=50)


@pytest.fixture
def collector():
    """The process's collector, enabled with a small step for the test, then put back."""
    saved = dict(vars(COLLECTOR))
    COLLECTOR.every, COLLECTOR.enabled = 3, True
    COLLECTOR.open = COLLECTOR.opened = COLLECTOR.closed = 0
    gc.unfreeze()
    yield COLLECTOR
    gc.unfreeze()
    vars(COLLECTOR).update(saved)


def _clients() -> list[Client]:
    return [o for o in gc.get_objects() if type(o) is Client]


async def test_open_sockets_are_frozen_and_closed_ones_freed(client, bob, collector):
    hub = client.server.app[HUB]
    sockets = [await connect(client, bob) for _ in range(3)]
    assert collector.freezes == 1 and gc.get_freeze_count() > 0
    # The full passes no longer walk the open sockets' objects.
    assert not any(c in hub.clients for c in _clients())
    for ws in sockets:
        await ws.close()
    for _ in range(100):
        if not hub.clients:
            break
        await asyncio.sleep(0.02)
    assert not hub.clients
    # Three closed: everything is handed back, and a full pass frees their cycles.
    assert collector.thaws == 1 and gc.get_freeze_count() == 0
    gc.collect()
    assert _clients() == []


async def test_nothing_is_frozen_until_enabled(client, bob, collector):
    collector.enabled = False
    sockets = [await connect(client, bob) for _ in range(3)]
    assert collector.freezes == 0 and gc.get_freeze_count() == 0
    for ws in sockets:
        await ws.close()


class _Cycle:
    """An object that refers to itself: only the cycle collector frees it."""

    def __init__(self) -> None:
        self.me = self


async def test_garbage_already_old_is_freed_not_frozen(client, bob, collector):
    old = _Cycle()
    gc.collect()  # it survives into the oldest generation
    gone = weakref.ref(old)
    del old  # garbage now, waiting for a full pass
    sockets = [await connect(client, bob) for _ in range(3)]
    assert collector.freezes == 1
    assert gone() is None
    for ws in sockets:
        await ws.close()
