"""What a chat command is: its parameters, its reply, checking arguments, calling the service."""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ..notify.messages import PUSH_BLUE, RED
from .client import ApiClient, ServiceError, Unreachable, segment

log = logging.getLogger("hubsvc.bot")

PAGE_SIZE = 10
MAX_PAGE = 10000
SNIPPET = 200  # characters of a body or description shown in a list


@dataclass
class Field:
    name: str
    value: str
    inline: bool = False


@dataclass
class Reply:
    """What a command answers; the front ends only change its form."""

    title: str
    description: str = ""
    fields: list[Field] = field(default_factory=list)
    colour: int = PUSH_BLUE
    private: bool = False  # only the invoking user sees it
    url: str | None = None
    footer: str = ""


@dataclass(frozen=True)
class Param:
    name: str
    description: str
    required: bool = False
    choices: tuple[str, ...] = ()
    integer: bool = False  # a whole number from 1 to MAX_PAGE
    greedy: bool = False  # typed in the console, further plain words join it


@dataclass
class Call:
    """One invocation: the service client, the chat user, and whether they are linked."""

    api: ApiClient
    chat_id: str
    linked: bool | None = None  # learnt from the first read, so later ones ask once


@dataclass(frozen=True)
class Command:
    name: str
    description: str
    params: tuple[Param, ...]
    handler: Callable[[Call, dict[str, Any]], Awaitable[Reply]]
    private: bool = False  # always answered privately

    def usage(self) -> str:
        parts = [f"/{self.name}"]
        for p in self.params:
            shown = "|".join(p.choices) or ("N" if p.integer else p.name.upper())
            parts.append(f"<{p.name}>" if p.required else f"[{p.name}:{shown}]")
        return " ".join(parts)


class UsageError(Exception):
    """Arguments the command cannot take; the message says what to type."""


# Replies


def _cut(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _first_line(text: str) -> str:
    lines = (text or "").strip().splitlines()
    return lines[0] if lines else ""


def _sorry(text: str) -> Reply:
    return Reply(title="Sorry", description=text, colour=RED, private=True)


def _page_footer(command: str, args: dict[str, Any], page: int, more: bool) -> str:
    if not more:
        return f"Page {page}" if page > 1 else ""
    named = " ".join(f"{k}:{v}" for k, v in args.items() if v is not None and k != "page")
    return f"Page {page} · next: /{command} {named} page:{page + 1}"


def _since(iso: str | None) -> str:
    return (iso or "")[:10]


# Arguments

REPO_RE = re.compile(r"^([^/\s]+)/([^/\s]+)$")


def repository(value: str) -> tuple[str, str]:
    """owner/name from "owner/name", "owner/name.git" or a repository's web address."""
    text = value.strip()
    if text.startswith(("http://", "https://")):
        text = "/".join(urlsplit(text).path.strip("/").split("/")[:2])
    if text.endswith(".git"):
        text = text[:-4]
    match = REPO_RE.match(text)
    if not match:
        raise UsageError(
            f"Give the repository as owner/name, e.g. ada/tool (not {_cut(value, 100)!r})."
        )
    return match.group(1), match.group(2)


def check_args(command: Command, given: dict[str, Any]) -> dict[str, Any]:
    """Given arguments checked against the declaration: choices, whole numbers, required."""
    known = {p.name: p for p in command.params}
    unknown = [name for name in given if name not in known]
    if unknown:
        raise UsageError(f"/{command.name} takes no {unknown[0]!r}. Usage: {command.usage()}")
    args: dict[str, Any] = {}
    for p in command.params:
        value = given.get(p.name)
        if isinstance(value, str):
            value = value.strip() or None
        if value is None:
            if p.required:
                raise UsageError(f"/{command.name} needs {p.name}. Usage: {command.usage()}")
            args[p.name] = None
            continue
        if p.integer:
            try:
                value = int(value)
            except (TypeError, ValueError):
                value = 0
            if not 1 <= value <= MAX_PAGE:
                raise UsageError(f"{p.name} must be a whole number from 1 to {MAX_PAGE}.")
        elif p.choices:
            value = str(value).lower()
            if value not in p.choices:
                raise UsageError(f"{p.name} must be one of: {', '.join(p.choices)}.")
        args[p.name] = value
    return args


# The service's answers, in a few words


def _error_reply(exc: ServiceError | Unreachable, thing: str, linked: bool | None) -> Reply:
    """A failed call in a few polite words; linked=False adds the hint to link on a 404."""
    if isinstance(exc, Unreachable):
        return _sorry("The service can't be reached right now. Please try again in a little while.")
    status = exc.status
    if status == 404:
        text = f"{thing} wasn't found."
        if linked is False:
            text += " If it's private, link your account with /link to see it."
        return _sorry(text)
    if status == 403:
        return _sorry("You don't have permission to do that.")
    if status == 429:
        wait = exc.retry_after or 60
        return _sorry(
            f"That's a lot of requests at once. Please try again in {wait} second"
            f"{'s' if wait != 1 else ''}."
        )
    if status == 401:
        return _sorry(
            "The service refused the bot's key, so it can't do that. Please let "
            "whoever runs the bot know."
        )
    if status >= 500:
        return _sorry(
            f"The service ran into a problem (error {status}). Please try again in a moment."
        )
    if status >= 400:
        return _sorry(f"The service couldn't do that: {_cut(exc.message, 300)}")
    return _sorry(
        "The service sent an answer the bot couldn't read. Please let whoever runs the bot know."
    )


class _Failed(Exception):
    """A command's early answer (an error already turned into a reply)."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply


async def _read(
    call: Call,
    path: str,
    thing: str,
    params: dict[str, Any] | None = None,
    maybe_private: bool = True,
) -> tuple[dict[str, Any], bool]:
    """A read as the chat user (anonymous when not linked): (answer, linked).

    maybe_private: a 404 may mean the thing is private, so an unlinked user is told
    that linking could show it.
    """
    try:
        data, call.linked = await call.api.as_user(
            call.chat_id, "GET", path, params=params, linked=call.linked
        )
        return data, call.linked
    except ServiceError as exc:
        raise _Failed(_error_reply(exc, thing, exc.linked if maybe_private else None)) from None


async def _bot(
    call: Call, method: str, path: str, body: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A call of the chat link endpoints, with the bot key alone."""
    try:
        return await call.api.request(method, path, body=body)
    except ServiceError as exc:
        raise _Failed(_error_reply(exc, "That", None)) from None


# The commands


def _repo_path(owner: str, name: str) -> str:
    return f"/api/repositories/{segment(owner)}/{segment(name)}"
