"""The chat webhook: events into the durable outbox, and the task that delivers them."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
from email.utils import parsedate_to_datetime
from typing import Any, AsyncIterator

import aiohttp
from aiohttp import web

from .. import __version__
from ..events import Event
from ..keys import BUS, CONFIG, STORE
from ..tasks import BACKGROUND
from .messages import chat_message

log = logging.getLogger("hubsvc.webhook")


def sign(secret: str, body: bytes) -> str:
    """The X-Hub-Signature-256 value of a body."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def sign_inbound(secret: str, timestamp: str, body: bytes) -> str:
    """The X-Hub-Signature-256 an inbound request needs: over "<timestamp>." + body, as Slack's."""
    return sign(secret, timestamp.encode() + b"." + body)


def retry_after_seconds(value: str | None) -> float | None:
    """Retry-After as seconds, from either of its two forms."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


CURSOR = "chat-webhook"


class WebhookSender:
    """Delivers the outbox in order: retries with growing delays, honours 429 Retry-After."""

    timeout = 10.0          # seconds per attempt
    max_delay = 600.0
    max_retry_after = 3600.0
    max_attempts = 25       # with the cap above, about three hours of trying

    def __init__(self, app: web.Application) -> None:
        self.app = app
        self.url = app[CONFIG]["chat"]["webhook_url"]
        self.secret = app[CONFIG]["chat"]["webhook_secret"]
        self.base_delay = float(app[CONFIG]["chat"]["retry_seconds"])
        self.session: aiohttp.ClientSession | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.url)

    async def start(self) -> None:
        self.session = aiohttp.ClientSession(
            headers={"User-Agent": f"hubsvc-webhook/{__version__}"})
        if self.enabled:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self.session is not None:
            await self.session.close()

    async def on_event(self, event: Event) -> None:
        """Bus subscriber: queue the chat message of an event of a public repository."""
        if not self.enabled:
            return
        repo = await self.app[STORE].repos.by_id(int(event.repo_id)) if event.repo_id else None
        if repo is None or repo["visibility"] != "public":
            # The chat channel is shared; private repositories never reach it.
            return
        body = json.dumps(chat_message(event, self.app[CONFIG].base_url))
        # The outbox row and the cursor move together: after a crash the sender goes on
        # from the first event it had not queued, so none is lost and none is doubled.
        await self.app[STORE].outbox.enqueue(event_id=event.id, event_type=event.type,
                                             repo_id=repo["id"], payload=body, cursor=CURSOR)
        self._wake.set()

    def wake(self) -> None:
        """Look at the outbox again now (after a redelivery was queued)."""
        self._wake.set()

    async def _run(self) -> None:
        outbox = self.app[STORE].outbox
        while True:
            self._wake.clear()
            row = await outbox.next_pending()
            if row is None:
                await self._wake.wait()
                continue
            wait = row["next_attempt_at"] - time.time()
            if wait > 0:
                try:
                    await asyncio.wait_for(self._wake.wait(), wait)
                except asyncio.TimeoutError:
                    pass
                continue
            try:
                await self.deliver(row)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("delivery %s crashed; it stays queued", row["id"])
                await asyncio.sleep(1)

    async def post(self, body: bytes, headers: dict[str, str]) -> tuple[int | None, str | None,
                                                                      float | None]:
        """One POST: (status, error, Retry-After seconds)."""
        assert self.session is not None
        headers = {"Content-Type": "application/json", **headers}
        if self.secret:
            headers["X-Hub-Signature-256"] = sign(self.secret, body)
        try:
            async with self.session.post(self.url, data=body, headers=headers,
                                         timeout=aiohttp.ClientTimeout(total=self.timeout),
                                         allow_redirects=False) as resp:
                await resp.read()
                return resp.status, None, retry_after_seconds(resp.headers.get("Retry-After"))
        except asyncio.TimeoutError:
            return None, f"timed out after {self.timeout:g} s", None
        except aiohttp.ClientError as exc:
            return None, f"{type(exc).__name__}: {exc}"[:500], None

    async def deliver(self, row: dict[str, Any]) -> str:
        """Try one queued delivery and record the outcome."""
        started = time.monotonic()
        status, error, retry_after = await self.post(
            row["payload"].encode(), {"X-Hubsvc-Delivery": row["guid"],
                                      "X-Hubsvc-Event": row["event_type"]})
        elapsed = int((time.monotonic() - started) * 1000)
        attempts = row["attempts"] + 1
        retry_at = None
        if status is not None and 200 <= status < 300:
            outcome = "delivered"
        elif status is not None and 400 <= status < 500 and status != 429:
            outcome = "failed"  # the receiver refused this body; sending it again won't help
        elif attempts >= self.max_attempts:
            outcome = "failed"
        else:
            outcome = "pending"
            delay = min(self.max_delay, self.base_delay * 2 ** (attempts - 1))
            if status == 429 and retry_after is not None:
                delay = min(self.max_retry_after, max(delay, retry_after))
            retry_at = time.time() + delay
        if status is not None and error is None and outcome != "delivered":
            error = f"HTTP {status}"
        await self.app[STORE].outbox.record_attempt(
            row["id"], status_code=status, error=error, duration_ms=elapsed, outcome=outcome,
            retry_at=retry_at)
        if outcome != "delivered":
            log.warning("webhook delivery %s attempt %s: %s (%s)", row["id"], attempts,
                        error, outcome)
        return outcome


WEBHOOK = web.AppKey("webhook_sender", WebhookSender)


async def webhook_ctx(app: web.Application) -> AsyncIterator[None]:
    """Start the sender and its bus subscription; stop both on shutdown."""
    sender = app[WEBHOOK]
    await sender.start()
    cursor = await app[STORE].events.cursor(CURSOR) if sender.enabled else None
    unsubscribe = app[BUS].subscribe(sender.on_event, name=CURSOR, after=cursor)
    try:
        yield
    finally:
        # Requests have finished by now; let what they started reach the outbox first.
        await app[BACKGROUND].close()
        await app[BUS].drain()
        unsubscribe()
        await sender.stop()
