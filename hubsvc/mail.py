"""Plain-text e-mail over SMTP, or into <data_dir>/outbox/ when no SMTP server is configured."""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import smtplib
import ssl
import time
from email.message import EmailMessage
from email.utils import formatdate, make_msgid
from pathlib import Path

from .config import Config

log = logging.getLogger("hubsvc.mail")

SMTP_TIMEOUT = 30  # seconds for connecting and for each SMTP command
IMPLICIT_TLS_PORT = 465  # RFC 8314 submission over TLS from the first byte


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


def _send_smtp(mail: dict, message: EmailMessage) -> None:
    """Deliver over SMTP (blocking: runs in a worker thread)."""
    host, port = mail["smtp_host"], mail["smtp_port"]
    context = ssl.create_default_context()
    if port == IMPLICIT_TLS_PORT:
        smtp: smtplib.SMTP = smtplib.SMTP_SSL(host, port, timeout=SMTP_TIMEOUT, context=context)
    else:
        smtp = smtplib.SMTP(host, port, timeout=SMTP_TIMEOUT)
    with smtp:
        if mail["starttls"] and port != IMPLICIT_TLS_PORT:
            smtp.starttls(context=context)
        if mail["username"]:
            smtp.login(mail["username"], mail["password"])
        smtp.send_message(message)


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
    await asyncio.to_thread(_send_smtp, mail, message)
    log.info("sent a message to %s through %s:%s", to, mail["smtp_host"], mail["smtp_port"])
