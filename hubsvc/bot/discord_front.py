"""The Discord front end: slash commands from the declarations, replies as embeds.

Needs discord.py (`pip install -e '.[bot]'`). Nothing here decides what a command does:
it registers COMMANDS as application commands, runs them through `run_command` for the
invoking Discord user, and turns each Reply into a `discord.Embed` within Discord's
limits, sent privately (ephemeral) when the Reply says so. Alongside, a notices.Pump
sends the service's chat notices as direct messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import sys
from collections.abc import Awaitable, Callable
from typing import Any, Literal, Optional

import aiohttp
import discord
from discord import app_commands

from .calls import MAX_PAGE, Command, Reply
from .client import ApiClient
from .commands import COMMANDS, run_command
from .notices import Pump, Undeliverable, notice_reply

log = logging.getLogger("hubsvc.bot")

# Discord's embed limits, in characters.
TITLE_MAX, DESCRIPTION_MAX, FIELDS_MAX = 256, 4096, 25
FIELD_NAME_MAX, FIELD_VALUE_MAX, FOOTER_MAX, TOTAL_MAX = 256, 1024, 2048, 6000
EMPTY = "—"  # Discord refuses empty field names and values
# Discord wants an answer within 3 seconds; slower commands show "thinking" first.
ANSWER_WITHIN = 2.0


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: limit - 1] + "…" if limit > 0 else ""


def _footer(text: str, hidden: int) -> str:
    if hidden:
        text = f"{hidden} more not shown" + (f" · {text}" if text else "")
    return _cut(text, FOOTER_MAX)


def to_embed(reply: Reply) -> discord.Embed:
    """The embed of a reply, cut to fit every one of Discord's limits."""
    title = _cut(reply.title or EMPTY, TITLE_MAX)
    description = _cut(reply.description, DESCRIPTION_MAX)
    fields = [
        (_cut(f.name or EMPTY, FIELD_NAME_MAX), _cut(f.value or EMPTY, FIELD_VALUE_MAX), f.inline)
        for f in reply.fields[:FIELDS_MAX]
    ]
    hidden = len(reply.fields) - len(fields)
    footer = _footer(reply.footer, hidden)

    def size() -> int:
        return (
            len(title)
            + len(description)
            + len(footer)
            + sum(len(name) + len(value) for name, value, _ in fields)
        )

    # 6,000 characters in all: the description gives way first, then the last fields.
    if size() > TOTAL_MAX:
        description = _cut(description, max(0, len(description) - (size() - TOTAL_MAX)))
    while size() > TOTAL_MAX and fields:
        fields.pop()
        hidden += 1
        footer = _footer(reply.footer, hidden)
    embed = discord.Embed(
        title=title,
        description=description or None,
        url=reply.url,
        colour=discord.Colour(reply.colour),
    )
    for name, value, inline in fields:
        embed.add_field(name=name, value=value, inline=inline)
    if footer:
        embed.set_footer(text=footer)
    return embed


async def respond(
    interaction: discord.Interaction, command: Command, work: Awaitable[Reply]
) -> None:
    """Send the reply of `work`, deferring first when it takes longer than Discord waits."""
    task = asyncio.ensure_future(work)
    done, _ = await asyncio.wait({task}, timeout=ANSWER_WITHIN)
    if task in done:
        reply = task.result()
        await interaction.response.send_message(embed=to_embed(reply), ephemeral=reply.private)
        return
    # The privacy of a deferred answer is fixed now; a reply that turns out private after
    # a public "thinking" message replaces it with a private follow-up.
    await interaction.response.defer(ephemeral=command.private, thinking=True)
    reply = await task
    if reply.private and not command.private:
        await interaction.delete_original_response()
        await interaction.followup.send(embed=to_embed(reply), ephemeral=True)
    else:
        await interaction.edit_original_response(embed=to_embed(reply))


def _annotation(param: Any) -> Any:
    if param.integer:
        kind: Any = app_commands.Range[int, 1, MAX_PAGE]
    elif param.choices:
        kind = Literal[param.choices]
    else:
        kind = str
    return kind if param.required else Optional[kind]  # noqa: UP045 - discord.py reads it at run time


def slash_command(
    command: Command,
    answer: Callable[[discord.Interaction, Command, dict[str, Any]], Awaitable[None]],
) -> app_commands.Command:
    """An application command built from a declaration; its callback calls answer."""

    async def callback(interaction: discord.Interaction, **kwargs: Any) -> None:
        await answer(interaction, command, kwargs)

    # discord.py reads the parameters from the callback's signature.
    callback.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter(
                "interaction",
                inspect.Parameter.POSITIONAL_OR_KEYWORD,
                annotation=discord.Interaction,
            ),
            *(
                inspect.Parameter(
                    p.name,
                    inspect.Parameter.KEYWORD_ONLY,
                    annotation=_annotation(p),
                    default=inspect.Parameter.empty if p.required else None,
                )
                for p in command.params
            ),
        ]
    )
    if command.params:
        app_commands.describe(**{p.name: p.description for p in command.params})(callback)
    return app_commands.Command(
        name=command.name, description=command.description, callback=callback
    )


class HubBot(discord.Client):
    """The Discord client: the command tree, synced at start-up, and the service client."""

    def __init__(
        self, api_base: str, bot_key: str, application_id: int, guild_id: int | None = None
    ) -> None:
        # Slash commands need no privileged intent; guilds keeps discord.py's cache whole.
        super().__init__(intents=discord.Intents(guilds=True), application_id=application_id)
        self.api_base, self.bot_key, self.guild_id = api_base, bot_key, guild_id
        self.api: ApiClient | None = None
        self.pump: asyncio.Task | None = None
        self.tree = app_commands.CommandTree(self)
        for command in COMMANDS.values():
            self.tree.add_command(slash_command(command, self.answer))

    async def answer(
        self, interaction: discord.Interaction, command: Command, args: dict[str, Any]
    ) -> None:
        assert self.api is not None
        await respond(
            interaction,
            command,
            run_command(self.api, str(interaction.user.id), command.name, args),
        )

    async def setup_hook(self) -> None:
        self.api = ApiClient(self.api_base, self.bot_key)
        if self.guild_id:
            # A guild's commands change at once; global ones can take a while to show.
            guild = discord.Object(id=self.guild_id)
            self.tree.copy_global_to(guild=guild)
            synced = await self.tree.sync(guild=guild)
            log.info("synced %d commands to guild %s", len(synced), self.guild_id)
        else:
            synced = await self.tree.sync()
            log.info("synced %d global commands", len(synced))
        if self.bot_key:  # the notices are the bot's alone: without its key, none to send
            self.pump = asyncio.get_running_loop().create_task(
                Pump(self.api, self.send_notice).run()
            )

    async def send_notice(self, notice: dict[str, Any]) -> None:
        """Send one chat notice as a direct message to its Discord user."""
        try:
            user_id = int(notice["chatId"])
        except ValueError:
            raise Undeliverable("the chat id is not a Discord user id") from None
        try:
            user = await self.fetch_user(user_id)
            await user.send(embed=to_embed(notice_reply(notice)))
        except (discord.Forbidden, discord.NotFound) as exc:
            # Direct messages closed, no shared server, or no such user: for good.
            raise Undeliverable(f"{type(exc).__name__}: {exc}") from exc

    async def on_ready(self) -> None:
        log.info("connected to Discord as %s, serving %s", self.user, self.api_base)

    async def close(self) -> None:
        if self.pump is not None:
            self.pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.pump
        if self.api is not None:
            await self.api.close()
        await super().close()


def main(token: str, application_id: str, api_base: str, bot_key: str, guild_id: str) -> int:
    """Run the Discord bot until stopped: 0, or 1 when Discord refuses or cannot be reached."""
    bot = HubBot(api_base, bot_key, int(application_id), int(guild_id) if guild_id else None)
    try:
        bot.run(token, log_handler=None)
    except discord.LoginFailure:
        print("hubsvc: Discord refused bot.token", file=sys.stderr)
        return 1
    except (aiohttp.ClientError, OSError) as exc:
        print(f"hubsvc: cannot reach Discord ({type(exc).__name__}: {exc})", file=sys.stderr)
        return 1
    return 0
