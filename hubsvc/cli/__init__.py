"""The command line: its arguments, and one module per command group.

`run.py` parses with `parse_args` and, given a command, calls `run(args, config)`:
accounts (create-user, reset-password, make-admin, revoke-admin), backup and restore,
check, and the chat bot (bot). Account commands go through the same schemas and store
code as the API; backup, restore and check work on the data folder directly.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from ..config import Config
from .accounts import create_user, reset_password, reset_two_factor, set_admin
from .backup import backup, restore
from .check import check
from .common import CommandError, UsageError
from .moving import copy_database


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="hubsvc: repository hosting service API")
    parser.add_argument("--config", help="TOML configuration file")
    parser.add_argument("--host", help="address to listen on (server.host)")
    parser.add_argument("--port", type=int, help="port to listen on (server.port)")
    parser.add_argument("--data-dir", help="database and repositories (storage.data_dir)")
    # The two options that matter to commands are accepted after the command name too;
    # SUPPRESS keeps the subparser from resetting a value given before it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--config", default=argparse.SUPPRESS, help="TOML configuration file")
    common.add_argument(
        "--data-dir", default=argparse.SUPPRESS, help="database and repositories (storage.data_dir)"
    )
    commands = parser.add_subparsers(
        dest="command",
        metavar="COMMAND",
        title="administration commands (without one, the server starts)",
    )
    password = "the password comes from HUBSVC_PASSWORD, else it is asked twice"
    create = commands.add_parser(
        "create-user",
        parents=[common],
        help="create an account",
        description=f"Create an account; {password}.",
    )
    create.add_argument("username")
    create.add_argument("email")
    create.add_argument("--name", help="display name (default: the username)")
    create.add_argument("--admin", action="store_true", help="make it an administrator")
    reset = commands.add_parser(
        "reset-password",
        parents=[common],
        help="set a new password and revoke the user's tokens",
        description=f"Set a new password; {password}.",
    )
    reset.add_argument("username")
    commands.add_parser(
        "reset-2fa",
        parents=[common],
        help="turn off a user's two-factor authentication (a lost authenticator)",
    ).add_argument("username")
    for name, text in (
        ("make-admin", "grant administrator rights"),
        ("revoke-admin", "revoke administrator rights"),
    ):
        commands.add_parser(name, parents=[common], help=text).add_argument("username")
    commands.add_parser(
        "backup",
        parents=[common],
        help="copy the database and repositories, while serving",
    ).add_argument("dest", metavar="DEST", help="a new or empty folder")
    restore = commands.add_parser(
        "restore", parents=[common], help="replace the data folder with a backup (server stopped)"
    )
    restore.add_argument("src", metavar="SRC", help="a folder written by backup")
    restore.add_argument(
        "--force",
        action="store_true",
        help="replace existing data (moved aside into pre-restore-*)",
    )
    commands.add_parser(
        "check", parents=[common], help="database integrity and git fsck of every repository"
    )
    move = commands.add_parser(
        "copy-database",
        parents=[common],
        help="copy the SQLite database into an empty PostgreSQL one (server stopped)",
    )
    move.add_argument(
        "--to", required=True, metavar="URL", help="postgresql://… of an empty database"
    )
    bot = commands.add_parser(
        "bot",
        parents=[common],
        help="run the companion chat bot (Discord, or --console)",
        description="Run the chat bot configured by [bot]: on Discord, "
        "or with --console in this terminal.",
    )
    bot.add_argument(
        "--console",
        action="store_true",
        help="read commands from standard input and print the replies",
    )
    bot.add_argument(
        "--as",
        dest="chat_id",
        metavar="CHAT_ID",
        help="the chat user id the console acts as (needed with --console)",
    )
    args = parser.parse_args(argv)
    if args.command == "bot" and args.console != bool(args.chat_id):
        bot.error("--console and --as CHAT_ID go together")
    return args


def run(args: argparse.Namespace, config: Config) -> int:
    """Run one administration command; returns the exit code."""
    commands: dict[str, Callable[[], None]] = {
        "create-user": lambda: create_user(
            config, args.username, args.email, args.name, args.admin
        ),
        "reset-password": lambda: reset_password(config, args.username),
        "reset-2fa": lambda: reset_two_factor(config, args.username),
        "make-admin": lambda: set_admin(config, args.username, True),
        "revoke-admin": lambda: set_admin(config, args.username, False),
        "backup": lambda: backup(config, Path(args.dest)),
        "restore": lambda: restore(config, Path(args.src), args.force),
        "check": lambda: check(config),
        "copy-database": lambda: copy_database(config, args.to),
    }
    if args.command == "bot":
        # Imported only here: the Discord front end needs discord.py, an optional extra.
        from .. import bot

        return bot.run(args, config)
    try:
        commands[args.command]()
    except CommandError as exc:
        print(f"hubsvc: {exc}", file=sys.stderr)
        return 1
    except UsageError as exc:
        print(f"hubsvc: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("hubsvc: interrupted", file=sys.stderr)
        return 130
    return 0
