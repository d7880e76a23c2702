"""The terminal front end: commands typed as on Discord, replies printed as text.

    /issues ada/tool state:closed
    /search "parser bug" type:issues page:2

A word `name:value` whose name is one of the command's parameters sets it; other words
fill the parameters in order; quotes keep spaces. /help lists the commands; end of input
(Ctrl-D) ends it.
"""

from __future__ import annotations

import asyncio
import shlex
import sys
from typing import Any, TextIO

from .calls import Reply, UsageError
from .client import ApiClient
from .commands import COMMANDS, run_command


def parse_line(line: str) -> tuple[str, dict[str, Any]]:
    """A typed line as (command name, arguments by parameter name)."""
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"Could not read that line ({exc}); close your quotes.") from None
    name = words[0].lstrip("/").lower()
    command = COMMANDS.get(name)
    if command is None:
        raise UsageError(f"There is no command /{name}. Type /help for the list.")
    known = {p.name: p for p in command.params}
    args: dict[str, Any] = {}
    positional = iter(command.params)
    last = None
    for word in words[1:]:
        key, sep, value = word.partition(":")
        if sep and key in known:
            args[key] = value
            last = known[key]
            continue
        if last is not None and last.greedy and last.name in args:
            args[last.name] += " " + word
            continue
        for param in positional:
            if param.name not in args:
                args[param.name] = word
                last = param
                break
        else:
            raise UsageError(
                f"Too many words for /{command.name}; put text with spaces in "
                f"quotes. Usage: {command.usage()}"
            )
    return command.name, args


def help_text() -> str:
    lines = [
        "== Commands ==",
        "Typed as on Discord: name:value sets a parameter by name; quotes keep spaces.",
    ]
    for command in COMMANDS.values():
        lines += [f"  {command.usage()}", f"      {command.description}"]
    lines += ["  /help", "      this list"]
    return "\n".join(lines)


def render(reply: Reply) -> str:
    """A reply as plain text."""
    lines = [f"== {reply.title} =="]
    if reply.url and reply.url not in reply.description:
        lines.append(reply.url)
    if reply.description:
        lines.append(reply.description)
    for item in reply.fields:
        value = item.value.replace("\n", "\n    ")
        lines.append(f"* {item.name}: {value}" if item.inline else f"* {item.name}\n    {value}")
    if reply.footer:
        lines.append(f"-- {reply.footer}")
    if reply.private:
        lines.append("(only you can see this)")
    return "\n".join(lines)


async def answer(api: ApiClient, chat_id: str, line: str) -> str | None:
    """The text printed for one typed line (None for a blank or comment line)."""
    line = line.strip()
    if not line or line.startswith("#"):
        return None
    if line.lstrip("/").lower() in ("help", "?"):
        return help_text()
    try:
        name, args = parse_line(line)
    except UsageError as exc:
        return render(Reply(title="Sorry", description=str(exc), private=True))
    return render(await run_command(api, chat_id, name, args))


async def _client(api_base: str, bot_key: str) -> ApiClient:
    return ApiClient(api_base, bot_key)


def main(
    api_base: str,
    bot_key: str,
    chat_id: str,
    stdin: TextIO = sys.stdin,
    stdout: TextIO = sys.stdout,
) -> int:
    """Read lines until the end of input, answering each: 0, or 130 after Ctrl-C."""
    interactive = stdin.isatty()
    if interactive:
        print(
            f"hubsvc bot console at {api_base}, as chat user {chat_id}. "
            "/help lists the commands; Ctrl-D ends.",
            file=stdout,
        )
    # Lines are read on this thread, between commands, so Ctrl-C ends a wait for input
    # as promptly as a command in flight.
    with asyncio.Runner() as runner:
        api = runner.run(_client(api_base, bot_key))
        try:
            while True:
                if interactive:
                    try:
                        line = input("bot> ")
                    except EOFError:
                        print(file=stdout)
                        return 0
                else:
                    line = stdin.readline()
                    if not line:
                        return 0
                text = runner.run(answer(api, chat_id, line))
                if text is not None:
                    print(text + "\n", file=stdout, flush=True)
        except KeyboardInterrupt:
            print(file=stdout)
            return 130
        finally:
            runner.run(api.close())
