"""The Redis connection a process shares with the others: pub/sub messages, one sender."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

from ..config import ConfigError

log = logging.getLogger("hubsvc.cluster")

Handler = Callable[[dict[str, Any]], Awaitable[None] | None]
# Channels, after the prefix: the newest event id after a write; caches to drop.
EVENTS = "events"
CACHES = "caches"
RECONNECT_SECONDS = 0.5


class Cluster:
    """One process's link to the others: publish messages, call handlers on theirs.

    Every key and channel name starts with the configured prefix. Messages are JSON
    objects with a kind; a process never handles its own (it acted before sending).
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
        self.redis = redis.asyncio.Redis.from_url(url, health_check_interval=10)
        self._handlers: dict[str, list[Handler]] = {}
        self._outbox: asyncio.Queue[tuple[str, str] | None] = asyncio.Queue()
        self._queued = self._sent = 0  # outbox items, for flushed()
        self._flush_waiters: list[tuple[int, asyncio.Future]] = []
        self._pulse: Callable[[], dict[str, Any]] | None = None
        self._pulsing = False
        self._tasks: list[asyncio.Task] = []
        self._subscribed = asyncio.Event()
        # Called after the subscription is (re)established: messages may have been missed.
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
        self._queued += 1
        self._outbox.put_nowait(item)

    async def flushed(self, timeout: float = 1.0) -> None:
        """Return once everything told so far is published (or after timeout seconds)."""
        if self._sent >= self._queued:
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
        self._tasks = [loop.create_task(self._listen()), loop.create_task(self._send())]
        await asyncio.wait_for(self._subscribed.wait(), timeout)

    async def stop(self) -> None:
        """Send what is queued, then close the connection."""
        self._put(("", ""))  # the sender ends here, after what is queued
        sender = self._tasks[1] if len(self._tasks) > 1 else None
        if sender is not None:
            try:
                await asyncio.wait_for(asyncio.shield(sender), 2)
            except (TimeoutError, Exception):
                pass
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.redis.aclose()

    async def _send(self) -> None:
        while True:
            item = await self._outbox.get()
            if item is None:
                self._pulsing = False  # from here on a new write needs a new pulse
                body = {"kind": "pulse", "from": self.process_id, **(self._pulse or dict)()}
                item = (self.key(EVENTS), json.dumps(body))
            channel, body_text = item
            if not channel:
                return
            for attempt in range(3):
                try:
                    await self.redis.publish(channel, body_text)
                    break
                except asyncio.CancelledError:
                    raise
                except Exception:
                    if attempt == 2:
                        log.exception("could not publish to %s; the message is lost", channel)
                    else:
                        await asyncio.sleep(RECONNECT_SECONDS)
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

    async def _listen(self) -> None:
        channels = [self.key(EVENTS), self.key(CACHES)]
        first = True
        while True:
            pubsub = self.redis.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(*channels)
                self._subscribed.set()
                if not first:
                    log.warning("reconnected to Redis")
                    for again in self.on_reconnect:
                        await again()
                first = False
                while True:
                    message = await pubsub.get_message(timeout=None)
                    if message is not None and message["type"] == "message":
                        await self._dispatch(message["data"])
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("Redis subscription lost (%s); reconnecting", exc)
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
