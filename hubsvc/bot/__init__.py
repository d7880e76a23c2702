"""The companion chat bot: `python run.py bot` (Discord) or `bot --console --as CHAT_ID`.

A client of the service API like any other: commands.py holds what each slash command
does, client.py the HTTP calls, discord_front.py and console.py the two ways in.
"""

from __future__ import annotations

import argparse
import sys

from ..config import Config, ConfigError

DISCORD_KEYS = ("token", "application_id", "api_base")


def settings(config: Config, console: bool) -> dict[str, str]:
    """The [bot] settings, with bot_key falling back to chat.bot_key; raises on a gap."""
    bot = dict(config["bot"])
    missing = [f"bot.{key}" for key in (("api_base",) if console else DISCORD_KEYS) if not bot[key]]
    if missing:
        what = "the console bot" if console else "the Discord bot"
        env = ", ".join("HUBSVC_" + m.replace(".", "_").upper() for m in missing)
        raise ConfigError(
            f"{', '.join(missing)}: required to start {what} (set in [bot] or as {env})"
        )
    bot["bot_key"] = bot["bot_key"] or config["chat"]["bot_key"]
    return bot


def run(args: argparse.Namespace, config: Config) -> int:
    """Start the bot; returns the exit code (2 for a configuration gap)."""
    try:
        bot = settings(config, args.console)
    except ConfigError as exc:
        print(f"hubsvc: configuration error: {exc}", file=sys.stderr)
        return 2
    if args.console:
        from . import console

        return console.main(bot["api_base"], bot["bot_key"], args.chat_id)
    try:
        from . import discord_front
    except ImportError:
        print("hubsvc: the Discord bot needs discord.py: pip install -e '.[bot]'", file=sys.stderr)
        return 2
    return discord_front.main(
        bot["token"], bot["application_id"], bot["api_base"], bot["bot_key"], bot["guild_id"]
    )
