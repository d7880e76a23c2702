"""The WebSocket hub: who gets which event; each message encoded once for all its sockets."""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections import defaultdict
from collections.abc import AsyncIterator
from typing import Any, Literal

from aiohttp import WSCloseCode, web

from ..cluster.counts import SharedCounts
from ..events.shape import Event
from ..keys import BUS, CLUSTER, CONFIG, STORE
from ..metrics import WS_MESSAGES
from ..policy import decide_action, may_receive
from ..store.access import Audience
from .collector import COLLECTOR
from .fanout import Plan, WriteOut
from .sockets import (
    HIGH_WATER,
    PING_BOTH,
    PING_CONTROL,
    PING_FRAME,
    PING_TEXT,
    QUEUE_SIZE,
    Client,
    text_frame,
)

log = logging.getLogger("hubsvc.ws")
REVOKED = 4001  # close code of a socket whose credential was revoked
# How often open sockets' tokens are checked against the database, for revocations this
# process did not make itself (run.py reset-password, an expiry): the token cache's life.
SWEEP_SECONDS = 5.0
REPLAY_BATCH = 500
# Writers wait while the fan-out has more than this many committed events left to send,
# so a burst of writes delays the writers, not every watcher's notifications.
PACE = 4
REACH_SECONDS = 2.0
CLOSE_SECONDS = 5.0  # a dropped socket's close, before its connection is cut


def _wants(client: Client, event: Event, audience: Audience) -> bool:
    """Whether a client watches or subscribed to the event's repository and may read it."""
    return (
        client.web
        and (
            client.everything
            or client.user_id in audience.watchers
            or event.repo_number in client.subscriptions
        )
        and audience.may_read(client.user_id, event)
        and (client.caps is None or may_receive(client.caps, event.type, event.repo_id))
    )


async def _close(ws: web.WebSocketResponse, transport: Any, code: int, message: bytes) -> None:
    """Close a socket politely, or cut it: a peer that stops reading would hold aiohttp's
    close (it drains first) and the connection forever."""
    try:
        await asyncio.wait_for(ws.close(code=code, message=message), CLOSE_SECONDS)
    except (TimeoutError, ConnectionError, RuntimeError):
        if transport is not None:
            transport.abort()


# How many public repositories' targets Hub._targets keeps at once.
KEPT_MOST = 256


class Hub:
    """Bus subscriber that fans events out to the sockets allowed to see them."""

    def __init__(self, app: web.Application) -> None:
        self.app = app
        self.clients: set[Client] = set()
        self.by_user: defaultdict[int, set[Client]] = defaultdict(set)
        self.by_repo: defaultdict[int, set[Client]] = defaultdict(set)
        self.everyone: set[Client] = set()  # the clients subscribed to all they may read
        # Clients of scoped or limited credentials: the fan-out filters by caps only if any.
        self.capped: set[Client] = set()
        self.per_ip: defaultdict[str, int] = defaultdict(int)
        # Open sockets per token digest: the sweep asks about each token once, without
        # walking every socket every SWEEP_SECONDS.
        self.digests: defaultdict[bytes, int] = defaultdict(int)
        self.closing = False
        self._closers: set[asyncio.Task] = set()
        # The newest event whose live recipients are settled: a resume replays up to it.
        self.cursor = 0
        # With several processes (set at start): sockets per address counted across all.
        self.shared: SharedCounts | None = None
        # Heartbeats: the clients due in each tick (loop time ÷ tick, rounded up). One
        # loop for all sockets: a task or a timer per socket costs ~1 KiB or ~0.6 KiB.
        self.beats: defaultdict[int, set[Client]] = defaultdict(set)
        self.interval = float(app[CONFIG]["websocket"]["heartbeat_seconds"])
        self.tick = min(1.0, self.interval / 20)
        # Notifications staged for their sockets, written from the next loop turn.
        self.out = WriteOut(self._deliver, self.clients)
        # A public repository's targets and their write plan, by repository, while
        # Client.epoch and the audience (its watchers) are what they were computed with.
        self._kept: dict[int, tuple[Audience, list[Client], Plan | None]] = {}
        self._kept_epoch = -1

    async def admit(self, ip: str, limit: int) -> str | Literal[False] | None:
        """Whether another socket from ip fits under limit: False if not, else its ticket.

        The ticket (None with one process) goes on the Client, so remove() releases it.
        """
        cluster = self.app.get(CLUSTER)
        if self.shared is not None and (cluster is None or cluster.up):
            try:
                ticket = await self.shared.admit(ip, limit)
            except Exception as exc:
                log.warning("counting sockets in Redis failed (%s); counting here", exc)
            else:
                return False if ticket is None else ticket
        return None if self.per_ip.get(ip, 0) < limit else False

    def release(self, ip: str, ticket: str | None) -> None:
        """Give back an admitted socket's place that never became a client."""
        if ticket is not None and self.shared is not None:
            self.shared.release(ip, ticket)

    def add(self, client: Client) -> None:
        self.clients.add(client)
        self.by_user[client.user_id].add(client)
        self.per_ip[client.ip] += 1
        if client.token_digest is not None:
            self.digests[client.token_digest] += 1
        if client.caps is not None:
            self.capped.add(client)
        Client.epoch += 1
        due = asyncio.get_running_loop().time() + self.interval
        self._schedule_beat(client, math.ceil(due / self.tick))
        COLLECTOR.opened_one()

    def remove(self, client: Client) -> None:
        if client not in self.clients:
            return
        self.clients.discard(client)
        self.by_user[client.user_id].discard(client)
        if not self.by_user[client.user_id]:
            del self.by_user[client.user_id]
        self.everyone.discard(client)
        self.capped.discard(client)
        for repo_id in client.subscriptions:
            self.by_repo[repo_id].discard(client)
            if not self.by_repo[repo_id]:
                del self.by_repo[repo_id]
        self.per_ip[client.ip] -= 1
        if self.per_ip[client.ip] <= 0:
            del self.per_ip[client.ip]
        digest = client.token_digest
        if digest is not None:
            self.digests[digest] -= 1
            if self.digests[digest] <= 0:
                del self.digests[digest]
        self.release(client.ip, client.ticket)
        client.drop()  # a new epoch
        self._kept.clear()  # holds no removed client
        self.beats.get(client.beat, set()).discard(client)
        if client.resumer is not None:
            client.resumer.cancel()
        COLLECTOR.closed_one()

    def subscribe(self, client: Client, repo_id: int) -> None:
        if repo_id not in client.subscriptions:
            client.subscriptions += (repo_id,)
        self.by_repo[repo_id].add(client)
        Client.epoch += 1

    def unsubscribe(self, client: Client, repo_id: int) -> None:
        client.subscriptions = tuple(r for r in client.subscriptions if r != repo_id)
        self.by_repo.get(repo_id, set()).discard(client)
        Client.epoch += 1

    def subscribe_all(self, client: Client, on: bool = True) -> None:
        """Follow (or stop following) every repository the user may read, new ones too."""
        client.everything = on
        if on:
            self.everyone.add(client)
        else:
            self.everyone.discard(client)
        Client.epoch += 1

    def send(self, client: Client, message: dict[str, Any]) -> None:
        """Send one message to one client, dropping the client if it cannot keep up."""
        text = json.dumps(message)
        self._offer(client, text_frame(text), text)

    def _offer(
        self, client: Client, frame: bytes, text: str | None, messages: int | None = None
    ) -> None:
        self.out.flush()  # what the fan-out staged goes first
        self._deliver(client, frame, text, messages)

    def _deliver(
        self, client: Client, frame: bytes, text: str | None, messages: int | None = None
    ) -> None:
        if not client.put(frame, text, messages):
            # A client that falls behind is dropped; it never stalls the others.
            log.warning("websocket client %s fell behind; dropping it", client.username)
            self._end(client, WSCloseCode.POLICY_VIOLATION, b"too slow")

    def _schedule_beat(self, client: Client, tick: int) -> None:
        client.beat = tick
        self.beats[tick].add(client)

    async def beat_loop(self) -> None:
        """Ping every socket every interval from its connect; drop one silent for two."""
        loop = asyncio.get_running_loop()
        per_interval = math.ceil(self.interval / self.tick)
        while True:
            await asyncio.sleep(self.tick)
            now = loop.time()
            for tick in sorted(t for t in self.beats if t * self.tick <= now):
                for client in self.beats.pop(tick):
                    if client not in self.clients:  # dropped by a client before it here
                        continue
                    if now - client.last_seen > 2 * self.interval:
                        self._end(client, WSCloseCode.GOING_AWAY, b"heartbeat timeout")
                        continue
                    # Straight to the socket (_deliver, not _offer): a ping carries no
                    # state, so it need not wait for, or force out, a fan-out round.
                    transport = client.direct
                    if (
                        transport is not None
                        and transport.get_write_buffer_size() <= HIGH_WATER
                        and not transport.is_closing()
                    ):
                        transport.write(PING_BOTH)  # as put() would, without its checks
                        WS_MESSAGES.n += 1
                    elif client.compress:  # its ping message is compressed on its own
                        self._deliver(client, PING_FRAME, PING_TEXT)
                        if client in self.clients:  # not dropped as too slow just now
                            self._deliver(client, PING_CONTROL, None)
                    else:
                        self._deliver(client, PING_BOTH, None, 1)
                    if client in self.clients:
                        self._schedule_beat(client, tick + per_interval)

    def set_web(self, user_id: int, on: bool) -> None:
        """A user turned web notifications on or off: their open sockets follow at once."""
        for client in self.by_user.get(user_id, ()):
            client.web = on
        Client.epoch += 1

    def revoke(
        self, user_id: int, digests: set[bytes] | None = None, keep: bytes | None = None
    ) -> int:
        """Close a user's sockets opened with digests (all when None) but keep: 4001."""
        ended = [
            c
            for c in self.by_user.get(user_id, ())
            if (digests is None or c.token_digest in digests)
            and (keep is None or c.token_digest != keep)
        ]
        for client in ended:
            self._end(client, REVOKED, b"token revoked")
        return len(ended)

    def _end(self, client: Client, code: int, message: bytes) -> None:
        """Drop a client at once: nothing queued or published later reaches it."""
        transport = client.transport  # remove() forgets it
        self.remove(client)
        task = asyncio.get_running_loop().create_task(_close(client.ws, transport, code, message))
        self._closers.add(task)
        task.add_done_callback(self._closers.discard)

    async def recheck(self, repo_id: int, repository: dict[str, str], tell: bool = True) -> None:
        """After a visibility, collaborator or existence change: unsubscribe who may not read."""
        cluster = self.app.get(CLUSTER) if tell else None
        if cluster is not None:
            # Every process rechecks its own sockets; told before this answer goes out,
            # so the others refuse the lost reader from the moment the caller hears.
            cluster.tell("recheck", repo=repo_id, repository=repository)
            await cluster.flushed()
        subscribed = self.by_repo.get(repo_id)
        if not subscribed:
            return
        audience = await self.app[STORE].repos.audience(repo_id)
        readers = audience[0] if audience is not None else set()
        if readers is None:  # public
            return
        for client in list(subscribed):
            if client.user_id not in readers:
                self.unsubscribe(client, repo_id)
                self.send(
                    client,
                    {"type": "unsubscribed", "repository": repository, "reason": "access revoked"},
                )

    def inbox(self, user_id: int, public: bool, message: dict[str, Any], tell: bool = True) -> None:
        """An inbox message (a thread changed, the unread count) to one user's own sockets.

        Told to the other processes too (their sockets of the user); a socket of a token
        limited to some repositories or without notifications:read gets none, as the count
        covers every repository.
        """
        cluster = self.app.get(CLUSTER) if tell else None
        if cluster is not None:
            cluster.tell("inbox", user=user_id, public=public, message=message)
        clients = self.by_user.get(user_id)
        if not clients:
            return
        text = json.dumps(message)
        frame = text_frame(text)
        for client in list(clients):
            caps = client.caps
            if caps is not None and not (
                caps.repositories is None
                and decide_action(caps, "notifications.read").ok
                and (public or decide_action(caps, "repo.read").ok)
            ):
                continue
            if client.live and client in self.clients:
                self._offer(client, frame, text)

    async def sweep(self) -> None:
        """Close sockets whose token no longer authenticates anyone."""
        digests = list(self.digests)
        if not digests:
            return
        live = await self.app[STORE].users.live_digests(digests)
        if all(d in live for d in digests):
            return  # the usual answer: no socket walked
        for client in [
            c for c in self.clients if c.token_digest is not None and c.token_digest not in live
        ]:
            self._end(client, REVOKED, b"token revoked")

    async def sweep_loop(self, interval: float = SWEEP_SECONDS) -> None:
        """sweep() every interval, for the life of the app."""
        while True:
            await asyncio.sleep(interval)
            try:
                await self.sweep()
            except Exception:
                log.exception("websocket token sweep failed")

    async def on_event(self, event: Event) -> None:
        """Deliver an event to watchers and subscribers who may read the repository now."""
        if not self.clients or event.repo_id is None:
            self.cursor = int(event.id)
            return
        if self.out.writing:
            # Events handled in one loop turn go out together; once their sockets are
            # being written, the next waits (the bus paces writers by this handler).
            await self.out.idle()
        repo_id = int(event.repo_id)
        audience = await self.app[STORE].repos.audience(repo_id)
        # From here to the cursor update nothing awaits: a resume that ends meanwhile
        # either replayed this event or is live in time to get it here, never both.
        targets, plan = self._targets(event, audience) if audience is not None else ([], None)
        self.cursor = int(event.id)
        if not targets:
            return
        # Encoded once: the same frame bytes go to every socket (a compressed one
        # compresses the text itself).
        text = json.dumps({"type": "notification", "notification": event.to_dict()})
        self.out.stage(text_frame(text), text, targets, plan)

    def _targets(self, event: Event, audience: Audience) -> tuple[list[Client], Plan | None]:
        """The live clients an event goes to (watchers and subscribers who may read it),
        with their write plan when kept.

        A public repository's event goes to the same clients as its last one while no
        client changed (Client.epoch) and the audience is the same object (the store
        keeps it until access or watchers change): kept, with its Plan, so an event to
        10,000 sockets touches none of their Client objects here. A private or capped
        event is decided per socket each time.
        """
        if audience.readers is not None or not event.public or self.capped:
            return self._find(event, audience), None
        if self._kept_epoch != Client.epoch:
            self._kept.clear()
            self._kept_epoch = Client.epoch
        kept = self._kept.get(event.repo_number)
        if kept is not None and kept[0] is audience:
            return kept[1], kept[2]
        found = self._find(event, audience)
        plan = Plan.of(found)
        kept_map = self._kept
        # Bounded: each entry holds a list of clients, and a quiet epoch may see events
        # of many public repositories.
        if len(kept_map) >= KEPT_MOST and event.repo_number not in kept_map:
            del kept_map[next(iter(kept_map))]  # the oldest: insertion order
        kept_map[event.repo_number] = (audience, found, plan)
        return found, plan

    def _find(self, event: Event, audience: Audience) -> list[Client]:
        """The live clients an event goes to: watchers and subscribers who may read it."""
        targets: set[Client] = self.by_repo.get(event.repo_number, set())
        watching = [self.by_user[u] for u in audience.watchers if u in self.by_user]
        if self.everyone:
            watching.append(self.everyone)
        if watching:
            targets = targets.union(*watching)
        if audience.readers is not None or not event.public:
            # Private now, or then: checked against access as it is now (and was then).
            found = [c for c in targets if c.live and c.web and audience.may_read(c.user_id, event)]
        else:
            # A list, not the set itself: a client dropped while sending leaves the set.
            found = [c for c in targets if c.live and c.web]
        if not self.capped:
            return found
        # A scoped or limited credential's socket gets what its caps allow (policy).
        return [
            c for c in found if c.caps is None or may_receive(c.caps, event.type, event.repo_id)
        ]

    def resume(self, client: Client, after: int) -> None:
        """Replay the events a client missed after `after`, then go live: no gap, no repeat."""
        if client.resumer is not None:
            client.resumer.cancel()
        client.set_live(False)
        client.resumer = asyncio.get_running_loop().create_task(self._replay(client, after))

    async def _replay(self, client: Client, after: int) -> None:
        store = self.app[STORE]
        try:
            pruned = await store.events.pruned_through()
            if after < pruned:
                self.send(
                    client,
                    {
                        "type": "resync",
                        "lastEventId": str(self.cursor),
                        "reason": f"events up to {pruned} were pruned "
                        "(events.retention_days): read the state again",
                    },
                )
                client.set_live(True)
                return
            if self.shared is not None:
                # What other processes committed before this resume belongs in its
                # replay, not after "resumed": catch up to the log's head first.
                head = max(after, await store.events.last_id())
                if head > self.cursor:
                    self.app[BUS].heard(head)
                    await self._reach(head)
            cursor = min(after, self.cursor)
            while True:
                target = self.cursor
                while cursor < target:
                    batch = [
                        e
                        for e in await store.events.after(cursor, REPLAY_BATCH)
                        if int(e.id) <= target
                    ]
                    if not batch:
                        break
                    for event in batch:
                        cursor = int(event.id)
                        if event.repo_id is None:
                            continue
                        # Waits for room first: a replay may be longer than the live queue.
                        if client.backlog is not None and len(client.backlog) > QUEUE_SIZE // 2:
                            await client.drained()
                        # Who may read is asked after the wait, per event (the store caches
                        # it and drops it when access changes): a replay held up by a slow
                        # reader must not go on with access as it was when it began.
                        audience = await store.repos.audience(int(event.repo_id))
                        if audience is not None and _wants(client, event, audience):
                            self.send(
                                client, {"type": "notification", "notification": event.to_dict()}
                            )
                if cursor >= self.cursor:  # nothing awaited since the check: live from here
                    client.set_live(True)
                    break
            self.send(client, {"type": "resumed", "lastEventId": str(cursor)})
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("resuming websocket client %s failed", client.username)
            self._end(client, WSCloseCode.INTERNAL_ERROR, b"resume failed")

    async def _reach(self, after: int) -> None:
        """Wait (briefly) for the fan-out to pass an id a client got from another process.

        Replaying from our own, older cursor would repeat what the client has; live
        events up to `after` would too. Commits elsewhere reach this process within
        milliseconds, so this waits at most REACH_SECONDS, asking the log once.
        """
        loop = asyncio.get_running_loop()
        start = loop.time()
        asked = False
        while self.cursor < after and loop.time() - start < REACH_SECONDS:
            await asyncio.sleep(0.01)
            if not asked and loop.time() - start > 0.1:  # a pulse lost on the way?
                asked = True
                self.app[BUS].heard(await self.app[STORE].events.last_id())

    async def close_all(self) -> None:
        """Close every socket with GOING_AWAY (server shutdown)."""
        self.closing = True
        clients = list(self.clients)
        for client in clients:
            self.remove(client)
        await asyncio.gather(
            *(c.ws.close(code=WSCloseCode.GOING_AWAY, message=b"server shutdown") for c in clients),
            return_exceptions=True,
        )


HUB = web.AppKey("ws_hub", Hub)


async def hub_ctx(app: web.Application) -> AsyncIterator[None]:
    """Subscribe the hub to the bus for the life of the app."""
    app[HUB].cursor = app[BUS].last_id
    unsubscribe = app[BUS].subscribe(app[HUB].on_event, name="websocket-hub", pace=PACE)
    sweeper = asyncio.get_running_loop().create_task(app[HUB].sweep_loop())
    beater = asyncio.get_running_loop().create_task(app[HUB].beat_loop())
    yield
    sweeper.cancel()
    beater.cancel()
    unsubscribe()
    await app[HUB].close_all()


async def close_sockets(app: web.Application) -> None:
    """on_shutdown: sockets first, so their handlers end and shutdown can finish."""
    await app[HUB].close_all()
