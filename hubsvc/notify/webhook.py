"""The chat webhook: events into the durable outbox, and the task that delivers them."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import Any

import aiohttp
from aiohttp import web

from .. import __version__
from ..events.shape import Event
from ..keys import BUS, CONFIG, STORE
from ..store.leases import LeaseLost
from ..store.queue import backoff
from .leader import LEADER, LEASE, Job
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
# A shared channel hears what changed, not every +1: reactions stay off it (GitHub sends
# no reaction webhook either); repository hooks that ask for them still get them.
CHAT_QUIET = frozenset({"reaction"})


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
    delay = backoff(attempts, base, cap)
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
        self._stopping = False

    @property
    def enabled(self) -> bool:
        return bool(self.url)

    async def start(self) -> None:
        """Open the HTTP session (every process: the administrators' test sends through it)."""
        # The administrator's own URL: the host rules of repository hooks don't apply.
        self.session = _session()

    async def stop(self) -> None:
        await self.end()
        if self.session is not None:
            await self.session.close()

    async def begin(self) -> None:
        """Start sending the outbox (on the lease holder)."""
        if self.enabled and self._task is None:
            self._stopping = False
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def end(self) -> None:
        """Stop sending: the attempt under way finishes and is recorded, then no other."""
        task, self._task = self._task, None
        if task is None:
            return
        self._stopping = True
        self._wake.set()
        _, pending = await asyncio.wait({task}, timeout=self.timeout + 2)
        for left in pending:
            left.cancel()
        await asyncio.gather(task, return_exceptions=True)
        if pending:  # cut off mid-attempt: released, sent again under the same id
            await self.app[STORE].outbox.settle_abandoned(time.time(), self.app[LEADER].holder)

    async def on_event(self, event: Event) -> None:
        """Bus subscriber: queue the chat message of an event of a public repository."""
        if not self.enabled or event.type in CHAT_QUIET:
            return
        repo = await self.app[STORE].repos.by_id(int(event.repo_id)) if event.repo_id else None
        if repo is None or repo["visibility"] != "public" or not event.public:
            # The chat channel is shared; private repositories, and what happened while
            # a repository was private, never reach it.
            return
        body = json.dumps(chat_message(event, self.app[CONFIG].base_url))
        # The outbox row and the cursor move together: after a crash the sender goes on
        # from the first event it had not queued, so none is lost and none is doubled
        # (nor queued again by the next lease holder: the cursor only moves forward).
        await self.app[STORE].outbox.enqueue(
            event_id=event.id,
            event_type=event.type,
            repo_id=repo["id"],
            payload=body,
            cursor=CURSOR,
        )
        self._wake.set()

    def wake(self) -> None:
        """Look at the outbox again now (after a redelivery was queued), wherever it is sent."""
        self._wake.set()
        self.app[LEADER].wake()

    def tick(self) -> None:
        """The lease holder's poll: look at the outbox (other processes queue into it)."""
        self._wake.set()

    async def _run(self) -> None:
        outbox, holder = self.app[STORE].outbox, self.app[LEADER].holder
        while not self._stopping:
            self._wake.clear()
            try:
                row = await outbox.next_pending()
                if row is None:
                    await self._wake.wait()
                    continue
                wait = row["next_attempt_at"] - time.time()
                if row["claimed_by"] is not None:
                    # Another process's attempt: the last holder finishing its send, or
                    # left by a process that died mid-way (then released, to be sent again).
                    if await outbox.settle_abandoned(time.time()):
                        continue
                    wait = 1.0
                if wait > 0:
                    try:
                        await asyncio.wait_for(self._wake.wait(), wait)
                    except TimeoutError:
                        pass
                    continue
                if await outbox.claim(row["id"], holder, LEASE, time.time()):
                    await self.deliver(row, holder)
            except asyncio.CancelledError:
                raise
            except LeaseLost:
                log.info("the chat webhook sender stops: another process holds the lease")
                return
            except Exception:
                log.exception("the chat webhook sender failed; trying again in a second")
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

    async def deliver(self, row: dict[str, Any], holder: str) -> str:
        """Try one queued delivery holder has claimed, and record the outcome."""
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
            holder=holder,
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
    """Open the sender; on the lease holder, its bus subscription and the outbox's sending."""
    sender = app[WEBHOOK]
    await sender.start()
    unsubscribe: Callable[[], None] | None = None

    async def begin() -> None:
        nonlocal unsubscribe
        if sender.enabled:
            # A webhook newly configured starts from now, and from then on its position
            # is durable: a crash before its first message leaves nothing behind.
            cursor = await app[STORE].events.start_cursor(CURSOR, app[BUS].last_id)
            unsubscribe = app[BUS].subscribe(sender.on_event, name=CURSOR, after=cursor)
        await sender.begin()

    async def end() -> None:
        nonlocal unsubscribe
        if unsubscribe is not None:
            unsubscribe()
            unsubscribe = None
        await sender.end()

    async def tick() -> None:
        sender.tick()

    app[LEADER].add(Job("chat webhook", begin, end, tick))
    try:
        yield
    finally:
        await sender.stop()


class HookWorkers:
    """One task per active repository hook, so a dead or slow receiver delays no other.

    Each task reads its repository's events after the hook's cursor, queues those the hook
    matches (rows and cursor in one transaction), and delivers its queue in log order.
    The tasks run on the lease holder only; each send is claimed first, under the lease.
    """

    collect_batch = 500  # events read from the log at a time
    send_batch = 100  # deliveries read from the queue at a time

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
        self.running = False  # the workers run here (this process holds the lease)
        self.stopping = False
        self.seen_head = 0  # the newest event the holder's poll has looked at

    async def start(self) -> None:
        """Open the HTTP session (every process: pings are sent where they are asked)."""
        self.session = _session(self.rules)

    async def stop(self) -> None:
        """Stop every task and close the session."""
        await self.end()
        if self.session is not None:
            await self.session.close()

    async def begin(self) -> None:
        """Start a task for every active hook, and hear of every commit of events."""
        self.running, self.stopping = True, False
        self.seen_head = await self.app[STORE].events.last_id()
        for hook_id, repo_id in await self.app[STORE].hooks.active_ids():
            self.run_hook(hook_id, repo_id)
        self.app[STORE].db.event_listeners.append(self.on_commit)

    async def end(self) -> None:
        """Stop every task: each finishes and records the send under way, then stops."""
        if not self.running:
            return
        self.running, self.stopping = False, True
        listeners = self.app[STORE].db.event_listeners
        if self.on_commit in listeners:
            listeners.remove(self.on_commit)
        for wake in self.wakes.values():
            wake.set()
        tasks = list(self.tasks.values())
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=self.timeout + 2)
            for task in pending:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if pending:  # cut off mid-attempt: released, sent again under the same id
                await self.app[STORE].hooks.settle_abandoned(
                    None, time.time(), self.app[LEADER].holder
                )
        self.tasks.clear()
        self.wakes.clear()
        self.repo_of.clear()

    def on_commit(self, events: list[Event]) -> None:
        """Wake the hooks of the repositories the events are about."""
        self.wake_repos({int(e.repo_id) for e in events if e.repo_id})

    def wake_repos(self, repos: set[int]) -> None:
        """Wake the hooks of these repositories."""
        for hook_id, repo_id in self.repo_of.items():
            if repo_id in repos:
                self.wakes[hook_id].set()

    async def tick(self) -> None:
        """The lease holder's poll: hooks made, events committed and redeliveries queued by
        the other processes."""
        store = self.app[STORE]
        active = dict(await store.hooks.active_ids())
        for hook_id, repo_id in active.items():
            task = self.tasks.get(hook_id)
            if task is None or task.done():
                self.run_hook(hook_id, repo_id)
        for hook_id in set(self.tasks) - set(active):
            self.wakes[hook_id].set()  # made inactive or deleted: the task sees it and ends
        head = await store.events.last_id()
        if head > self.seen_head:
            self.wake_repos(set(await store.events.repos_between(self.seen_head, head)))
            self.seen_head = head
        for hook_id in await store.hooks.due_hooks(time.time()):
            if hook_id in self.wakes:
                self.wakes[hook_id].set()

    def run_hook(self, hook_id: int, repo_id: int) -> None:
        """Make sure the hook's task runs, and have it look at its queue now.

        Where the workers do not run (another process holds the lease), the holder is
        told instead.
        """
        if not self.running:
            self.app[LEADER].wake()
            return
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
        store, holder = self.app[STORE].hooks, self.app[LEADER].holder
        row = await store.add_ping(
            hook["id"], json.dumps(render(None, hook["format"], self.app[CONFIG].base_url)), holder
        )
        result = await self.send(hook, row)
        if result["outcome"] == "pending":
            result.update(outcome="failed", retry_at=None)  # a ping is not retried
        await store.record(hook["id"], [result], None, holder)
        return await store.delivery(hook["id"], row["id"])

    async def _send_due(
        self, hook: dict[str, Any], rows: list[dict[str, Any]]
    ) -> tuple[float | None, str | None]:
        """Send the due rows in order until one must wait: (when to look again, disabled)."""
        store, holder = self.app[STORE].hooks, self.app[LEADER].holder
        for row in rows:
            if self.stopping:
                return None, None
            if row["claimed_by"] is not None:
                # Another process's attempt (a ping, or the last holder finishing its
                # send; one that died is released, to be sent again): the rest waits for it.
                if await store.settle_abandoned(hook["id"], time.time()):
                    return time.time(), None
                return time.time() + 1, None
            if row["next_attempt_at"] > time.time():
                return row["next_attempt_at"], None  # in order: later ones wait too
            if not await store.claim(row["id"], holder, LEASE, time.time()):
                return time.time() + 1, None
            result = await self.send(hook, row)
            reason = await store.record(hook["id"], [result], self.disable_after, holder)
            if reason is not None:
                return None, reason
            if result["outcome"] == "pending":
                log.warning(
                    "hook %s delivery %s: %s (retrying)", hook["id"], row["id"], result["error"]
                )
                return result["retry_at"], None
        return None, None

    async def _run(self, hook_id: int) -> None:
        store = self.app[STORE].hooks
        wake = self.wakes[hook_id]
        while not self.stopping:
            wake.clear()
            try:
                hook = await store.get(None, hook_id)
                if hook is None or not hook["active"]:
                    break
                read = await store.collect(hook_id, self._render, self.collect_batch)
                rows = await store.due(hook_id, self.send_batch)
                wait_until, reason = await self._send_due(hook, rows)
                if reason is not None:
                    log.warning("hook %s set inactive: %s", hook_id, reason)
                    break
                more = read == self.collect_batch or (
                    wait_until is None and len(rows) == self.send_batch
                )
                if more or self.stopping:
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
            except LeaseLost:
                log.info("hook %s worker stops: another process holds the lease", hook_id)
                break
            except Exception:
                log.exception("hook %s worker failed; trying again in a second", hook_id)
                await asyncio.sleep(1)
        if self.tasks.get(hook_id) is asyncio.current_task() and not self.stopping:
            self.stop_hook(hook_id)


HOOKS = web.AppKey("hook_workers", HookWorkers)


async def hooks_ctx(app: web.Application) -> AsyncIterator[None]:
    """Open the hooks' session; their workers run on the lease holder."""
    workers = app[HOOKS]
    await workers.start()
    app[LEADER].add(Job("repository hooks", workers.begin, workers.end, workers.tick))
    try:
        yield
    finally:
        await workers.stop()
