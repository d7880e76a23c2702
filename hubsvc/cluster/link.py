"""The Redis connection a process shares with the others: pub/sub messages, one sender."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from ..config import ConfigError

log = logging.getLogger("hubsvc.cluster")

Handler = Callable[[dict[str, Any]], Awaitable[None] | None]
# Channels, after the prefix: the newest event id after a write; caches to drop.
EVENTS = "events"
CACHES = "caches"
RECONNECT_SECONDS = 0.5
# How often the link is pinged, and how long a ping may take before the link counts as
# down: a Redis that stopped answering without closing its connections is noticed too.
# (A stopped Redis closes them: that is noticed at once.) Generous, so that a busy
# machine's slow answer is not taken for an outage.
WATCH_SECONDS = 1.0
PING_TIMEOUT = 3.0
# Messages kept while the link is down. Past this many, they are replaced by one
# "missed" message: the others drop every cache, as after an outage of their own.
QUEUE_LIMIT = 10000


class Cluster:
    """One process's link to the others: publish messages, call handlers on theirs.

    Every key and channel name starts with the configured prefix. Messages are JSON
    objects with a kind; a process never handles its own (it acted before sending).
    While Redis cannot be reached the link is down (`up` False): messages wait in order
    and go out once it is back, and on_down / on_reconnect tell the process.
    """

    def __init__(self, url: str, prefix: str) -> None:
        try:  # only when [redis] url is set: one process needs no Redis
            import redis.asyncio
        except ImportError:
            raise ConfigError(
                "redis.url is set, but the redis package is missing: pip install 'hubsvc[redis]'"
            ) from None

        self.url = url
        self.prefix = prefix
        # Unique per start: a restarted process is a new member (its old entries expire).
        self.process_id = f"{os.getpid()}-{secrets.token_hex(4)}"
        from redis.asyncio.retry import Retry
        from redis.backoff import NoBackoff

        # One quick retry, not redis-py's ten with backoff: a request that asks Redis
        # while it is away must fall back at once, not after seconds of retries.
        self.redis = redis.asyncio.Redis.from_url(
            url, health_check_interval=10, socket_connect_timeout=2, retry=Retry(NoBackoff(), 1)
        )
        self._handlers: dict[str, list[Handler]] = {}
        # (channel, body), or None for a pulse; ("", "") ends the sender.
        self._outbox: deque[tuple[str, str] | None] = deque()
        self._wake = asyncio.Event()
        self._queued = self._sent = 0  # outbox items, for flushed()
        self._flush_waiters: list[tuple[int, asyncio.Future]] = []
        self._pulse: Callable[[], dict[str, Any]] | None = None
        self._pulsing = False
        self._tasks: list[asyncio.Task] = []
        self._subscribed = asyncio.Event()
        self.up = True  # whether Redis answers; False from the first failure until resubscribed
        self.down_since: float | None = None  # time.time() the link went down
        self._back = asyncio.Event()  # set while up
        self._back.set()
        # Called when the link goes down, and after the subscription is re-established
        # (messages may have been missed meanwhile).
        self.on_down: list[Callable[[], None]] = []
        self.on_reconnect: list[Callable[[], Awaitable[None]]] = []

    def key(self, *parts: object) -> str:
        """A Redis key or channel name under the prefix."""
        return ":".join([self.prefix, *map(str, parts)])

    def on(self, kind: str, handler: Handler) -> None:
        """Call handler(message) for every message of kind sent by another process."""
        self._handlers.setdefault(kind, []).append(handler)

    def tell(self, kind: str, **data: Any) -> None:
        """Send a message to the other processes, in order, without waiting."""
        channel = EVENTS if kind == "pulse" else CACHES
        body = json.dumps({"kind": kind, "from": self.process_id, **data})
        self._put((self.key(channel), body))

    def _put(self, item: tuple[str, str] | None) -> None:
        if len(self._outbox) >= QUEUE_LIMIT and item is not None and item[0]:
            self._collapse()
        self._queued += 1
        self._outbox.append(item)
        self._wake.set()

    def _collapse(self) -> None:
        """Too much queued while down: one message that makes the others drop every cache."""
        dropped = len(self._outbox)
        ending = ("", "") in self._outbox
        self._outbox.clear()
        self._pulsing = False
        self._sent += dropped  # counted as gone, for flushed()
        missed = json.dumps({"kind": "missed", "from": self.process_id})
        self._queued += 1
        self._outbox.append((self.key(CACHES), missed))
        if ending:
            self._queued += 1
            self._outbox.append(("", ""))
        log.warning("%d messages queued for Redis replaced by one 'drop every cache'", dropped)

    def mark_down(self, reason: object) -> None:
        """Redis failed to answer: down until the subscription is re-established."""
        if not self.up:
            return
        self.up = False
        self.down_since = time.time()
        self._back.clear()
        log.warning(
            "Redis link down (%s): limiting per process, re-reading who may read what, "
            "reading the event log's head every few seconds, queueing messages",
            str(reason) or type(reason).__name__,
        )
        for listener in self.on_down:
            try:
                listener()
            except Exception:
                log.exception("reacting to the Redis link going down failed")

    def _mark_up(self) -> None:
        if self.up:
            return
        down = time.time() - (self.down_since or time.time())
        self.up = True
        self.down_since = None
        self._back.set()
        log.warning(
            "Redis link back after %.1f s: caches dropped, %d queued messages to send",
            down,
            len(self._outbox),
        )

    async def flushed(self, timeout: float = 1.0) -> None:
        """Return once everything told so far is published (or after timeout seconds)."""
        # While the link is down, at once: the messages wait for the link, and the other
        # processes treat their caches as stale meanwhile.
        if self._sent >= self._queued or not self.up:
            return
        waiter = asyncio.get_running_loop().create_future()
        self._flush_waiters.append((self._queued, waiter))
        try:
            await asyncio.wait_for(waiter, timeout)
        except TimeoutError:
            log.warning("messages to the other processes are still queued after %.1f s", timeout)

    def pulse_with(self, make: Callable[[], dict[str, Any]]) -> None:
        """What a pulse (see pulse) carries: make() is called when it is sent."""
        self._pulse = make

    def pulse(self) -> None:
        """Something committed here: tell the others once, however many writes pile up."""
        if self._pulsing:
            return
        self._pulsing = True
        self._put(None)

    async def start(self, timeout: float = 5.0) -> None:
        """Connect, subscribe, and start the sender; fails when Redis does not answer."""
        await asyncio.wait_for(self.redis.ping(), timeout)
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._listen()),
            loop.create_task(self._send()),
            loop.create_task(self._watch()),
        ]
        await asyncio.wait_for(self._subscribed.wait(), timeout)

    async def stop(self) -> None:
        """Send what is queued, then close the connection."""
        self._put(("", ""))  # the sender ends here, after what is queued
        sender = self._tasks[1] if len(self._tasks) > 1 else None
        if sender is not None and self.up:  # while down, nothing would go out anyway
            try:
                await asyncio.wait_for(asyncio.shield(sender), 2)
            except (TimeoutError, Exception):
                pass
        if len(self._outbox) > 1:
            log.warning("stopping with %d messages Redis never took", len(self._outbox) - 1)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.redis.aclose()

    async def _send(self) -> None:
        while True:
            while not self._outbox:
                self._wake.clear()
                await self._wake.wait()
            item = self._outbox[0]
            if item is not None and not item[0]:
                return
            if item is None:
                self._pulsing = False  # from here on a new write needs a new pulse
                body = {"kind": "pulse", "from": self.process_id, **(self._pulse or dict)()}
                channel, body_text = self.key(EVENTS), json.dumps(body)
            else:
                channel, body_text = item
            try:
                await self.redis.publish(channel, body_text)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # Kept at the head of the queue, in order, until the link is back; the
                # pulse there is made again then, so writes meanwhile queue no more.
                if item is None:
                    self._pulsing = True
                self.mark_down(exc)
                await self._back.wait()
                continue
            if self._outbox and self._outbox[0] is item:  # not collapsed meanwhile
                self._outbox.popleft()
            self._sent += 1
            if self._flush_waiters:
                still = []
                for mark, waiter in self._flush_waiters:
                    if self._sent >= mark:
                        if not waiter.done():
                            waiter.set_result(None)
                    else:
                        still.append((mark, waiter))
                self._flush_waiters = still

    async def _watch(self) -> None:
        """Ping Redis every WATCH_SECONDS: the link is down once a ping fails."""
        while True:
            await asyncio.sleep(WATCH_SECONDS)
            if not self.up:
                continue  # the listener brings it back once it can subscribe again
            try:
                await asyncio.wait_for(self.redis.ping(), PING_TIMEOUT)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.mark_down(exc)

    async def _listen(self) -> None:
        channels = [self.key(EVENTS), self.key(CACHES)]
        first = True
        while True:
            pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(*channels)
                self._subscribed.set()
                if not first and not self.up:
                    # Whatever was said meanwhile is lost: the caches go before the link
                    # counts as up again (and before the queued messages go out).
                    for again in self.on_reconnect:
                        await again()
                    self._mark_up()
                first = False
                while self.up:
                    # A timeout, so that a link found down elsewhere (a failed ping or
                    # publish) is re-subscribed rather than waited on forever.
                    message = await pubsub.get_message(timeout=WATCH_SECONDS)
                    if message is not None and message["type"] == "message":
                        await self._dispatch(message["data"])
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.mark_down(exc)
                await asyncio.sleep(RECONNECT_SECONDS)
            finally:
                try:
                    await pubsub.aclose()
                except Exception:
                    pass

    async def _dispatch(self, data: bytes) -> None:
        try:
            message = json.loads(data)
        except ValueError:
            return
        if not isinstance(message, dict) or message.get("from") == self.process_id:
            return
        for handler in self._handlers.get(str(message.get("kind")), ()):
            try:
                result = handler(message)
                if result is not None:
                    await result
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("handling a %s message from another process failed", message["kind"])


def tell_servers(url: str, prefix: str, kind: str, **data: Any) -> None:
    """Send one message to the running servers, from a command (no event loop of its own).

    A command changes the database behind the servers' backs; with Redis they hear of it
    at once rather than when their caches expire. Best effort: a command never fails
    because Redis is away (the caches expire within seconds anyway).
    """
    import redis

    body = json.dumps({"kind": kind, "from": "command", **data})
    try:
        client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
        try:
            client.publish(f"{prefix}:{CACHES}", body)
        finally:
            client.close()
    except Exception as exc:
        log.warning("could not tell the servers through Redis (%s)", exc)
