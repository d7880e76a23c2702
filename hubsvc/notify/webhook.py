"""The chat webhook: events into the durable outbox, and the task that delivers them."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any

import aiohttp
from aiohttp import web

from .. import __version__
from ..events.shape import Event
from ..keys import BUS, CONFIG, STORE
from ..tasks import BACKGROUND
from .messages import chat_message
from .netcheck import HookResolver, HostRules, Refused, check_url
from .render import render

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
EXCERPT_CHARS = 1000  # of a receiver's answer, shown with the delivery
READ_LIMIT = 65536  # bytes of an answer read at most
MAX_RETRY_AFTER = 3600.0  # a 429's Retry-After is honoured up to an hour


@dataclass
class Attempt:
    """What one POST came to."""

    status: int | None
    error: str | None
    retry_after: float | None
    duration_ms: int
    excerpt: str | None


async def post(
    session: aiohttp.ClientSession,
    url: str,
    body: bytes,
    headers: dict[str, str],
    timeout: float,
    rules: HostRules | None = None,
) -> Attempt:
    """One POST, redirects not followed; with rules, the destination is checked first."""
    started = time.monotonic()
    status = retry_after = excerpt = error = None
    try:
        if rules is not None:
            await check_url(rules, url)  # a literal address never reaches the resolver
        async with session.post(
            url,
            data=body,
            headers=headers,
            timeout=aiohttp.ClientTimeout(total=timeout),
            allow_redirects=False,
        ) as resp:
            status = resp.status
            data = b""
            while len(data) < READ_LIMIT:
                chunk = await resp.content.read(READ_LIMIT - len(data))
                if not chunk:
                    break
                data += chunk
            excerpt = data.decode("utf-8", "replace")[:EXCERPT_CHARS] or None
            retry_after = retry_after_seconds(resp.headers.get("Retry-After"))
            if 300 <= status < 400:
                error = (
                    f"HTTP {status}: redirects are not followed (Location: "
                    f"{resp.headers.get('Location', 'none')[:300]})"
                )
    except TimeoutError:
        error = f"timed out after {timeout:g} s"
    except (Refused, ValueError) as exc:
        error = str(exc)[:500]
    except aiohttp.ClientError as exc:
        error = f"{type(exc).__name__}: {exc}"[:500]
    return Attempt(status, error, retry_after, int((time.monotonic() - started) * 1000), excerpt)


def judge(
    attempt: Attempt, attempts: int, base: float, cap: float
) -> tuple[str, float | None, str | None]:
    """(outcome, retry_at, error) of an attempt, the attempts count including it.

    2xx: delivered. 3xx and 4xx other than 408/429: failed for good, the receiver
    refused this body (sending it again won't help) and the next one goes. Else a
    retry after a doubling delay up to cap, or after a 429's Retry-After.
    """
    status = attempt.status
    if status is not None and 200 <= status < 300:
        return "delivered", None, None
    error = attempt.error or f"HTTP {status}"
    if status is not None and 300 <= status < 500 and status not in (408, 429):
        return "failed", None, error
    delay = min(cap, base * 2 ** (attempts - 1))
    if status == 429 and attempt.retry_after is not None:
        delay = min(MAX_RETRY_AFTER, attempt.retry_after)
    return "pending", time.time() + delay, error


def _session(rules: HostRules | None = None) -> aiohttp.ClientSession:
    connector = (
        aiohttp.TCPConnector(resolver=HookResolver(rules), limit=0)
        if rules
        else aiohttp.TCPConnector(limit=0)
    )
    return aiohttp.ClientSession(
        connector=connector, headers={"User-Agent": f"hubsvc-webhook/{__version__}"}
    )


class WebhookSender:
    """Delivers the chat webhook's outbox in order, with the delivery rules of judge()."""

    def __init__(self, app: web.Application) -> None:
        self.app = app
        self.url = app[CONFIG]["chat"]["webhook_url"]
        self.secret = app[CONFIG]["chat"]["webhook_secret"]
        self.base_delay = float(app[CONFIG]["chat"]["retry_seconds"])
        hooks = app[CONFIG]["webhooks"]
        self.timeout = float(hooks["timeout_seconds"])
        self.max_delay = float(hooks["max_retry_seconds"])
        # A message is given up after failing this long (the receiver is gone, not down).
        self.give_up_after = float(hooks["disable_after_hours"]) * 3600
        self.session: aiohttp.ClientSession | None = None
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None

    @property
    def enabled(self) -> bool:
        return bool(self.url)

    async def start(self) -> None:
        # The administrator's own URL: the host rules of repository hooks don't apply.
        self.session = _session()
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
        if repo is None or repo["visibility"] != "public" or not event.public:
            # The chat channel is shared; private repositories, and what happened while
            # a repository was private, never reach it.
            return
        body = json.dumps(chat_message(event, self.app[CONFIG].base_url))
        # The outbox row and the cursor move together: after a crash the sender goes on
        # from the first event it had not queued, so none is lost and none is doubled.
        await self.app[STORE].outbox.enqueue(
            event_id=event.id,
            event_type=event.type,
            repo_id=repo["id"],
            payload=body,
            cursor=CURSOR,
        )
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
                except TimeoutError:
                    pass
                continue
            try:
                await self.deliver(row)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("delivery %s crashed; it stays queued", row["id"])
                await asyncio.sleep(1)

    async def post(
        self, body: bytes, headers: dict[str, str]
    ) -> tuple[int | None, str | None, float | None]:
        """One POST: (status, error, Retry-After seconds)."""
        attempt = await self._post(body, headers)
        return attempt.status, attempt.error, attempt.retry_after

    async def _post(self, body: bytes, headers: dict[str, str]) -> Attempt:
        assert self.session is not None
        headers = {"Content-Type": "application/json", **headers}
        if self.secret:
            headers["X-Hub-Signature-256"] = sign(self.secret, body)
        return await post(self.session, self.url, body, headers, self.timeout)

    async def deliver(self, row: dict[str, Any]) -> str:
        """Try one queued delivery and record the outcome."""
        attempt = await self._post(
            row["payload"].encode(),
            {"X-Hubsvc-Delivery": row["guid"], "X-Hubsvc-Event": row["event_type"]},
        )
        attempts = row["attempts"] + 1
        outcome, retry_at, error = judge(attempt, attempts, self.base_delay, self.max_delay)
        if outcome == "pending" and time.time() - _epoch(row["created_at"]) > self.give_up_after:
            outcome, retry_at = "failed", None
        await self.app[STORE].outbox.record_attempt(
            row["id"],
            status_code=attempt.status,
            error=error,
            duration_ms=attempt.duration_ms,
            outcome=outcome,
            retry_at=retry_at,
        )
        if outcome != "delivered":
            log.warning(
                "webhook delivery %s attempt %s: %s (%s)", row["id"], attempts, error, outcome
            )
        return outcome


def _epoch(iso_text: str) -> float:
    return datetime.fromisoformat(iso_text.replace("Z", "+00:00")).timestamp()


WEBHOOK = web.AppKey("webhook_sender", WebhookSender)


async def webhook_ctx(app: web.Application) -> AsyncIterator[None]:
    """Start the sender and its bus subscription; stop both on shutdown."""
    sender = app[WEBHOOK]
    await sender.start()
    # A webhook newly configured starts from now, and from then on its position is
    # durable: a crash before its first message leaves nothing behind.
    cursor = (
        await app[STORE].events.start_cursor(CURSOR, app[BUS].last_id) if sender.enabled else None
    )
    unsubscribe = app[BUS].subscribe(sender.on_event, name=CURSOR, after=cursor)
    try:
        yield
    finally:
        # Requests have finished by now; let what they started reach the outbox first.
        await app[BACKGROUND].close()
        await app[BUS].drain()
        unsubscribe()
        await sender.stop()


class HookWorkers:
    """One task per active repository hook, so a dead or slow receiver delays no other.

    Each task reads its repository's events after the hook's cursor, queues those the hook
    matches (rows and cursor in one transaction), and delivers its queue in log order.
    """

    collect_batch = 500  # events read from the log at a time
    send_batch = 100  # deliveries sent before their outcomes are written at once

    def __init__(self, app: web.Application) -> None:
        self.app = app
        hooks = app[CONFIG]["webhooks"]
        self.rules = HostRules(hooks["allowed_hosts"])
        self.timeout = float(hooks["timeout_seconds"])
        self.base_delay = float(hooks["retry_seconds"])
        self.max_delay = float(hooks["max_retry_seconds"])
        self.disable_after = float(hooks["disable_after_hours"]) * 3600
        self.session: aiohttp.ClientSession | None = None
        self.tasks: dict[int, asyncio.Task] = {}
        self.wakes: dict[int, asyncio.Event] = {}
        self.repo_of: dict[int, int] = {}

    async def start(self) -> None:
        """Start a task for every active hook, and hear of every commit of events."""
        self.session = _session(self.rules)
        for hook_id, repo_id in await self.app[STORE].hooks.active_ids():
            self.run_hook(hook_id, repo_id)
        self.app[STORE].db.event_listeners.append(self.on_commit)

    async def stop(self) -> None:
        """Stop every task (what they had not sent stays queued in the database)."""
        listeners = self.app[STORE].db.event_listeners
        if self.on_commit in listeners:
            listeners.remove(self.on_commit)
        tasks = list(self.tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self.session is not None:
            await self.session.close()

    def on_commit(self, events: list[Event]) -> None:
        """Wake the hooks of the repositories the events are about."""
        repos = {int(e.repo_id) for e in events if e.repo_id}
        for hook_id, repo_id in self.repo_of.items():
            if repo_id in repos:
                self.wakes[hook_id].set()

    def run_hook(self, hook_id: int, repo_id: int) -> None:
        """Make sure the hook's task runs, and have it look at its queue now."""
        self.repo_of[hook_id] = repo_id
        wake = self.wakes.setdefault(hook_id, asyncio.Event())
        wake.set()
        task = self.tasks.get(hook_id)
        if task is None or task.done():
            self.tasks[hook_id] = asyncio.get_running_loop().create_task(self._run(hook_id))

    def stop_hook(self, hook_id: int) -> None:
        """End the hook's task (made inactive or deleted)."""
        task = self.tasks.pop(hook_id, None)
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        self.wakes.pop(hook_id, None)
        self.repo_of.pop(hook_id, None)

    def _render(self, hook: dict[str, Any], event: Event) -> str:
        return json.dumps(
            render(event, hook["format"], self.app[CONFIG].base_url), separators=(",", ":")
        )

    async def send(self, hook: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
        """One attempt at a delivery: its outcome, ready for HookStore.record."""
        assert self.session is not None
        body = row["payload"].encode()
        headers = {
            "Content-Type": "application/json",
            "X-Hubsvc-Delivery": row["guid"],
            "X-Hubsvc-Event": row["event_type"],
            "X-Hubsvc-Hook-Id": str(hook["id"]),
        }
        if hook["secret"]:
            headers["X-Hub-Signature-256"] = sign(hook["secret"], body)
        attempt = await post(self.session, hook["url"], body, headers, self.timeout, self.rules)
        outcome, retry_at, error = judge(
            attempt, row["attempts"] + 1, self.base_delay, self.max_delay
        )
        return {
            "id": row["id"],
            "outcome": outcome,
            "retry_at": retry_at,
            "error": error,
            "status": attempt.status,
            "duration_ms": attempt.duration_ms,
            "excerpt": attempt.excerpt,
        }

    async def ping(self, hook: dict[str, Any]) -> dict[str, Any]:
        """Send a ping now and record it as a delivery of the hook."""
        store = self.app[STORE].hooks
        row = await store.add_ping(
            hook["id"], json.dumps(render(None, hook["format"], self.app[CONFIG].base_url))
        )
        result = await self.send(hook, row)
        if result["outcome"] == "pending":
            result.update(outcome="failed", retry_at=None)  # a ping is not retried
        await store.record(hook["id"], [result], None)
        return await store.delivery(hook["id"], row["id"])

    async def _run(self, hook_id: int) -> None:
        store = self.app[STORE].hooks
        wake = self.wakes[hook_id]
        while True:
            wake.clear()
            try:
                hook = await store.get(None, hook_id)
                if hook is None or not hook["active"]:
                    break
                read = await store.collect(hook_id, self._render, self.collect_batch)
                rows = await store.due(hook_id, self.send_batch)
                results, wait_until = [], None
                for row in rows:
                    if row["next_attempt_at"] > time.time():
                        wait_until = row["next_attempt_at"]  # in order: later ones wait too
                        break
                    result = await self.send(hook, row)
                    results.append(result)
                    if result["outcome"] == "pending":
                        wait_until = result["retry_at"]
                        log.warning(
                            "hook %s delivery %s: %s (retrying)",
                            hook_id,
                            row["id"],
                            result["error"],
                        )
                        break
                reason = await store.record(hook_id, results, self.disable_after)
                if reason is not None:
                    log.warning("hook %s set inactive: %s", hook_id, reason)
                    break
                more = read == self.collect_batch or (
                    wait_until is None and len(rows) == self.send_batch
                )
                if more:
                    continue
                if wait_until is None and not rows:
                    await wake.wait()
                elif wait_until is not None:
                    try:
                        await asyncio.wait_for(wake.wait(), max(0.0, wait_until - time.time()))
                    except TimeoutError:
                        pass
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("hook %s worker failed; trying again in a second", hook_id)
                await asyncio.sleep(1)
        if self.tasks.get(hook_id) is asyncio.current_task():
            self.stop_hook(hook_id)


HOOKS = web.AppKey("hook_workers", HookWorkers)


async def hooks_ctx(app: web.Application) -> AsyncIterator[None]:
    """Run the repository hooks' workers while the server runs."""
    await app[HOOKS].start()
    try:
        yield
    finally:
        await app[HOOKS].stop()
