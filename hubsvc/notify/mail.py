"""Plain-text e-mail over SMTP, or into <data_dir>/outbox/ when no SMTP server is configured."""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import smtplib
import ssl
import time
from collections.abc import AsyncIterator
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from pathlib import Path

from aiohttp import web

from ..config import Config, starttls_mode
from ..keys import CONFIG, STORE
from ..store.queue import backoff
from .leader import LEADER, Job

log = logging.getLogger("hubsvc.mail")

SMTP_TIMEOUT = 30  # seconds for connecting and for each SMTP command
IMPLICIT_TLS_PORT = 465  # RFC 8314 submission over TLS from the first byte
SETTLE_SECONDS = 5.0  # how often the holder looks for messages a dead process left claimed


def build_message(config: Config, to: str, subject: str, body: str) -> EmailMessage:
    """A plain-text message from the configured sender."""
    sender = config["mail"]["from"]
    message = EmailMessage()
    message["From"] = sender
    message["To"] = to
    message["Subject"] = subject
    message["Date"] = formatdate(localtime=False, usegmt=True)
    message["Message-ID"] = make_msgid(domain=sender.rpartition("@")[2] or "localhost")
    message.set_content(body)
    return message


def _send_smtp(mail: dict, recipient: str, message: bytes) -> None:
    """Deliver over SMTP (blocking: runs in a worker thread)."""
    host, port = mail["smtp_host"], mail["smtp_port"]
    context = ssl.create_default_context()
    if port == IMPLICIT_TLS_PORT:
        smtp: smtplib.SMTP = smtplib.SMTP_SSL(host, port, timeout=SMTP_TIMEOUT, context=context)
    else:
        smtp = smtplib.SMTP(host, port, timeout=SMTP_TIMEOUT)
    with smtp:
        mode = starttls_mode(mail["starttls"])
        if port != IMPLICIT_TLS_PORT and mode != "never":
            smtp.ehlo()
            # auto: a plain relay that offers no STARTTLS still gets the message.
            if mode == "always" or smtp.has_extn("starttls"):
                smtp.starttls(context=context)
                smtp.ehlo()
        if mail["username"]:
            smtp.login(mail["username"], mail["password"])
        smtp.sendmail(mail["from"], [recipient], message)


def _permanent(exc: Exception) -> bool:
    """An SMTP 5xx answer: sending the same message again would be refused again."""
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        return all(500 <= code < 600 for code, _ in exc.recipients.values())
    return isinstance(exc, smtplib.SMTPResponseException) and 500 <= exc.smtp_code < 600


def _write_outbox(folder: Path, message: EmailMessage) -> Path:
    """Write the message as an .eml file readable by its owner only (blocking)."""
    folder.mkdir(parents=True, exist_ok=True)
    name = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{secrets.token_hex(4)}.eml"
    path = folder / name
    temp = folder / f".{name}.tmp"
    # The message may hold a one-time link: never world-readable, never seen half-written.
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(message.as_bytes())
    os.replace(temp, path)
    return path


async def send_mail(config: Config, to: str, subject: str, body: str) -> None:
    """Send a plain-text e-mail, or write it to the outbox folder without an SMTP host."""
    message = build_message(config, to, subject, body)
    mail = config["mail"]
    if not mail["smtp_host"]:
        path = await asyncio.to_thread(_write_outbox, config.data_dir / "outbox", message)
        log.info("no SMTP server configured: wrote a message to %s into %s", to, path)
        return
    await asyncio.to_thread(_send_smtp, mail, to, message.as_bytes())
    log.info("sent a message to %s through %s:%s", to, mail["smtp_host"], mail["smtp_port"])


class _Unshown(bytes):
    """A message's bytes that say nothing in a repr (aiosqlite's debug log prints arguments)."""

    def __repr__(self) -> str:
        return f"<message of {len(self)} bytes>"


class Mailer:
    """E-mail through a durable queue: tried at once, then retried like webhooks.

    Each message is a row first; a failure is retried after 2, 4, 8… s (webhooks.
    retry_seconds, up to webhooks.max_retry_seconds) up to mail.max_attempts, and an SMTP
    5xx answer is final. Failures show in GET /api/admin/deliveries.
    """

    def __init__(self, app: web.Application) -> None:
        self.app = app
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None
        self._inflight: set[int] = set()
        self._stopping = False

    async def begin(self) -> None:
        """Send what is due, and retry, from the queue (on the lease holder)."""
        if self.app[CONFIG]["mail"]["smtp_host"] and self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def end(self) -> None:
        """Stop looking at the queue (an attempt under way in it finishes first)."""
        task, self._task = self._task, None
        if task is None:
            return
        self._stopping = True
        self._wake.set()
        _, pending = await asyncio.wait({task}, timeout=SMTP_TIMEOUT + 2)
        for left in pending:
            left.cancel()
        await asyncio.gather(task, return_exceptions=True)
        self._stopping = False
        if pending:  # cut off mid-attempt: released, sent again under the same id
            await self.app[STORE].mail.settle_abandoned(time.time(), self.app[LEADER].holder)

    def tick(self) -> None:
        """The lease holder's poll: look at the queue (any process may queue into it)."""
        self._wake.set()

    async def send(self, to: str, subject: str, body: str) -> None:
        """Queue a message and make its first attempt now (no SMTP host: the outbox folder)."""
        await self.send_all([(to, subject, body)])

    async def send_all(
        self, messages: list[tuple[str, str, str]], cursor: tuple[str, int] | None = None
    ) -> None:
        """Queue (to, subject, body)s and try each now; with cursor (name, event id), the
        consumer's mark moves in the transaction that queues them: none is queued twice."""
        config, store = self.app[CONFIG], self.app[STORE]
        if not config["mail"]["smtp_host"]:
            for to, subject, body in messages:
                await send_mail(config, to, subject, body)
            if cursor is not None:
                await store.events.set_cursor(*cursor)
            return
        raws = [
            (to, subject, _Unshown(build_message(config, to, subject, body).as_bytes()))
            for to, subject, body in messages
        ]
        ids = await store.mail.enqueue(raws, cursor)
        for mail_id, (to, _, raw) in zip(ids, raws):
            await self.attempt({"id": mail_id, "recipient": to, "message": raw, "attempts": 0})

    async def attempt(self, row: dict) -> str:
        """One try at a queued message, claimed first so no other process sends it too;
        records the outcome. Any process may try the messages it queued itself."""
        if row["id"] in self._inflight:
            return "pending"
        self._inflight.add(row["id"])
        holder = self.app[LEADER].holder
        try:
            if not await self.app[STORE].mail.claim(row["id"], holder):
                return "pending"  # another process is sending it
            config = self.app[CONFIG]
            mail, hooks = config["mail"], config["webhooks"]
            attempts = row["attempts"] + 1
            retry_at = error = None
            try:
                await asyncio.to_thread(_send_smtp, mail, row["recipient"], row["message"])
                outcome = "delivered"
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"[:500]
                if _permanent(exc) or attempts >= mail["max_attempts"]:
                    outcome = "failed"
                else:
                    outcome = "pending"
                    # The webhooks' pacing, as the class says: one backoff, one setting.
                    retry_at = time.time() + backoff(
                        attempts,
                        float(hooks["retry_seconds"]),
                        float(hooks["max_retry_seconds"]),
                    )
            await self.app[STORE].mail.record(
                row["id"], outcome=outcome, error=error, retry_at=retry_at, holder=holder
            )
            if outcome == "delivered":
                log.info(
                    "sent a message to %s through %s:%s",
                    row["recipient"],
                    mail["smtp_host"],
                    mail["smtp_port"],
                )
            else:
                log.warning(
                    "could not send message %s (attempt %s, %s): %s",
                    row["id"],
                    attempts,
                    "retrying" if outcome == "pending" else "given up",
                    error,
                )
            return outcome
        finally:
            self._inflight.discard(row["id"])
            self._wake.set()

    async def _run(self) -> None:
        store = self.app[STORE].mail
        settle_at = 0.0
        while not self._stopping:
            self._wake.clear()
            try:
                if time.monotonic() >= settle_at:  # now and then: a write, not every look
                    settle_at = time.monotonic() + SETTLE_SECONDS
                    await store.settle_abandoned(time.time())
                for row in await store.due(time.time()):
                    if self._stopping:
                        break
                    await self.attempt(row)
                next_at = await store.next_at()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("the mail queue failed; trying again in a second")
                next_at = time.time() + 1
            timeout = None if next_at is None else max(0.05, next_at - time.time())
            try:
                await asyncio.wait_for(self._wake.wait(), timeout)
            except TimeoutError:
                pass


MAILER = web.AppKey("mailer", Mailer)


async def mail_ctx(app: web.Application) -> AsyncIterator[None]:
    """The mail queue's sending and retries run on the lease holder."""
    mailer = app[MAILER]

    async def tick() -> None:
        mailer.tick()

    app[LEADER].add(Job("mail queue", mailer.begin, mailer.end, tick))
    try:
        yield
    finally:
        await mailer.end()
