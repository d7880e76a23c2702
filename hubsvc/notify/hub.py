"""The WebSocket hub: who gets which event, one bounded queue and writer per client."""

from __future__ import annotations

import asyncio
import json
import logging
from collections import defaultdict
from collections.abc import AsyncIterator
from typing import Any, Literal

from aiohttp import WSCloseCode, web

from ..cluster.counts import SharedCounts
from ..events.shape import Event
from ..keys import BUS, CLUSTER, STORE
from ..store.access import Audience

log = logging.getLogger("hubsvc.ws")
QUEUE_SIZE = 256
REVOKED = 4001  # close code of a socket whose credential was revoked
# How often open sockets' tokens are checked against the database, for revocations this
# process did not make itself (run.py reset-password, an expiry): the token cache's life.
SWEEP_SECONDS = 5.0
REPLAY_BATCH = 500
# Writers wait while the fan-out has more than this many committed events left to send,
# so a burst of writes delays the writers, not every watcher's notifications.
PACE = 4
REACH_SECONDS = 2.0


class Client:
    """One connected socket: its user, subscriptions, queue and writer task."""

    def __init__(
        self,
        ws: web.WebSocketResponse,
        user: dict[str, Any],
        ip: str,
        transport: Any = None,
        token_digest: bytes | None = None,
    ) -> None:
        self.ws = ws
        self.token_digest = token_digest
        self.transport = transport
        self.sending = False
        self.user_id: int = user["id"]
        self.username: str = user["username"]
        self.ip = ip
        self.subscriptions: set[int] = set()
        # Subscribed to every repository the user may read (subscribe {all: true}).
        self.everything = False
        self.queue: asyncio.Queue[str | None] = asyncio.Queue(QUEUE_SIZE)
        self.writer: asyncio.Task | None = None
        # False while a resume replays the log: live events wait for the replay to end.
        self.live = True
        # The user's notifications.web preference: off, the socket gets no notification.
        self.web = bool(
            ((user.get("preferences") or {}).get("notifications") or {}).get("web", True)
        )
        self.resumer: asyncio.Task | None = None
        # Its entry in the count of sockets per address shared by every process, if any.
        self.ticket: str | None = None
        self.last_seen = asyncio.get_running_loop().time()

    def offer(self, text: str | None) -> bool:
        """Queue a message without waiting; False when the client has fallen behind."""
        try:
            self.queue.put_nowait(text)
            return True
        except asyncio.QueueFull:
            return False

    def can_send_now(self) -> bool:
        """Nothing queued, nothing in flight, and the socket's buffer is empty."""
        return (
            not self.sending
            and self.queue.empty()
            and self.transport is not None
            and not self.transport.is_closing()
            and self.transport.get_write_buffer_size() == 0
        )

    async def write_loop(self) -> None:
        while True:
            text = await self.queue.get()
            if text is None:
                return
            self.sending = True
            try:
                await self.ws.send_str(text)
            finally:
                self.sending = False


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
    )


class Hub:
    """Bus subscriber that fans events out to the sockets allowed to see them."""

    def __init__(self, app: web.Application) -> None:
        self.app = app
        self.clients: set[Client] = set()
        self.by_user: defaultdict[int, set[Client]] = defaultdict(set)
        self.by_repo: defaultdict[int, set[Client]] = defaultdict(set)
        self.everyone: set[Client] = set()  # the clients subscribed to all they may read
        self.per_ip: defaultdict[str, int] = defaultdict(int)
        self.closing = False
        self._closers: set[asyncio.Task] = set()
        # The newest event whose live recipients are settled: a resume replays up to it.
        self.cursor = 0
        # With several processes (set at start): sockets per address counted across all.
        self.shared: SharedCounts | None = None

    async def admit(self, ip: str, limit: int) -> str | Literal[False] | None:
        """Whether another socket from ip fits under limit: False if not, else its ticket.

        The ticket (None with one process) goes on the Client, so remove() releases it.
        """
        if self.shared is not None:
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
        client.writer = asyncio.get_running_loop().create_task(self._write(client))

    def remove(self, client: Client) -> None:
        if client not in self.clients:
            return
        self.clients.discard(client)
        self.by_user[client.user_id].discard(client)
        if not self.by_user[client.user_id]:
            del self.by_user[client.user_id]
        self.everyone.discard(client)
        for repo_id in client.subscriptions:
            self.by_repo[repo_id].discard(client)
            if not self.by_repo[repo_id]:
                del self.by_repo[repo_id]
        self.per_ip[client.ip] -= 1
        if self.per_ip[client.ip] <= 0:
            del self.per_ip[client.ip]
        self.release(client.ip, client.ticket)
        if client.writer is not None and not client.writer.done():
            client.offer(None) or client.writer.cancel()
        if client.resumer is not None:
            client.resumer.cancel()

    def subscribe(self, client: Client, repo_id: int) -> None:
        client.subscriptions.add(repo_id)
        self.by_repo[repo_id].add(client)

    def unsubscribe(self, client: Client, repo_id: int) -> None:
        client.subscriptions.discard(repo_id)
        self.by_repo.get(repo_id, set()).discard(client)

    def subscribe_all(self, client: Client, on: bool = True) -> None:
        """Follow (or stop following) every repository the user may read, new ones too."""
        client.everything = on
        if on:
            self.everyone.add(client)
        else:
            self.everyone.discard(client)

    async def _write(self, client: Client) -> None:
        try:
            await client.write_loop()
        except (ConnectionResetError, RuntimeError, asyncio.CancelledError):
            pass
        except Exception:
            log.exception("websocket writer for %s failed", client.username)

    def send(self, client: Client, message: dict[str, Any]) -> None:
        """Queue one message for one client, dropping it if it cannot keep up."""
        self._offer(client, json.dumps(message))

    def _offer(self, client: Client, text: str) -> None:
        if not client.offer(text):
            # A client that falls behind is dropped; it never stalls the others.
            log.warning("websocket client %s fell behind; dropping it", client.username)
            self.remove(client)
            asyncio.get_running_loop().create_task(
                client.ws.close(code=WSCloseCode.POLICY_VIOLATION, message=b"too slow")
            )

    def set_web(self, user_id: int, on: bool) -> None:
        """A user turned web notifications on or off: their open sockets follow at once."""
        for client in self.by_user.get(user_id, ()):
            client.web = on

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
        while not client.queue.empty():
            client.queue.get_nowait()
        self.remove(client)
        if client.writer is not None:
            client.writer.cancel()
        task = asyncio.get_running_loop().create_task(client.ws.close(code=code, message=message))
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

    async def sweep(self) -> None:
        """Close sockets whose token no longer authenticates anyone."""
        digests = list({c.token_digest for c in self.clients if c.token_digest is not None})
        if not digests:
            return
        live = await self.app[STORE].users.live_digests(digests)
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
        repo_id = int(event.repo_id)
        audience = await self.app[STORE].repos.audience(repo_id)
        # From here to the cursor update nothing awaits: a resume that ends meanwhile
        # either replayed this event or is live in time to get it here, never both.
        targets = self._targets(event, audience) if audience is not None else set()
        self.cursor = int(event.id)
        if not targets:
            return
        text = json.dumps({"type": "notification", "notification": event.to_dict()})
        for client in targets:
            if client not in self.clients:  # dropped or revoked while this one was sent
                continue
            if client.can_send_now():
                # With an empty buffer the frame goes straight to the socket without
                # waiting, which spares waking a writer task per client; anything
                # else keeps order by going through the queue.
                client.sending = True
                try:
                    await client.ws.send_str(text)
                except (ConnectionResetError, RuntimeError):
                    self.remove(client)
                finally:
                    client.sending = False
            else:
                self._offer(client, text)

    def _targets(self, event: Event, audience: Audience) -> set[Client]:
        """The live clients an event goes to: watchers and subscribers who may read it."""
        repo_id = event.repo_number
        targets: set[Client] = set(self.by_repo.get(repo_id, ())) | self.everyone
        for user_id in audience.watchers:
            targets |= self.by_user.get(user_id, set())
        if audience.readers is not None or not event.public:
            # Private now, or then: checked against access as it is now (and was then).
            targets = {c for c in targets if audience.may_read(c.user_id, event)}
        return {c for c in targets if c.live and c.web}

    def resume(self, client: Client, after: int) -> None:
        """Replay the events a client missed after `after`, then go live: no gap, no repeat."""
        if client.resumer is not None:
            client.resumer.cancel()
        client.live = False
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
                client.live = True
                return
            if self.shared is not None:
                # What other processes committed before this resume belongs in its
                # replay, not after "resumed": catch up to the log's head first.
                head = max(after, await store.events.last_id())
                if head > self.cursor:
                    self.app[BUS].heard(head)
                    await self._reach(head)
            cursor, audiences = min(after, self.cursor), {}
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
                        if event.repo_id not in audiences:
                            audiences[event.repo_id] = await store.repos.audience(
                                int(event.repo_id)
                            )
                        audience = audiences[event.repo_id]
                        if audience is not None and _wants(client, event, audience):
                            # Waits for room: a replay may be longer than the live queue.
                            await client.queue.put(
                                json.dumps(
                                    {"type": "notification", "notification": event.to_dict()}
                                )
                            )
                if cursor >= self.cursor:  # nothing awaited since the check: live from here
                    client.live = True
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
    yield
    sweeper.cancel()
    unsubscribe()
    await app[HUB].close_all()


async def close_sockets(app: web.Application) -> None:
    """on_shutdown: sockets first, so their handlers end and shutdown can finish."""
    await app[HUB].close_all()
