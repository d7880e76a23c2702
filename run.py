"""Entry point: `python run.py [--config FILE] [--host H] [--port P] [--data-dir DIR] [COMMAND]`.

Without a command it serves; a command (create-user, reset-password, make-admin,
revoke-admin, backup, restore, check) runs once and exits: 0 ok, 1 failure, 2 usage.
`bot` runs the companion chat bot instead (hubsvc/bot/).
"""

from __future__ import annotations

import argparse
import logging
import sys

from aiohttp import web

from hubsvc.cli import admin
from hubsvc.app import create_app, new_event_loop
from hubsvc.config import ConfigError, load_config
from hubsvc.web.logs import AccessLogger, JsonAccessLogger, setup_logging
from hubsvc.startup import StartupError, check_data_dir, check_listen, describe


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
    common.add_argument("--data-dir", default=argparse.SUPPRESS,
                        help="database and repositories (storage.data_dir)")
    commands = parser.add_subparsers(
        dest="command", metavar="COMMAND",
        title="administration commands (without one, the server starts)")
    password = "the password comes from HUBSVC_PASSWORD, else it is asked twice"
    create = commands.add_parser("create-user", parents=[common], help="create an account",
                                 description=f"Create an account; {password}.")
    create.add_argument("username")
    create.add_argument("email")
    create.add_argument("--name", help="display name (default: the username)")
    create.add_argument("--admin", action="store_true", help="make it an administrator")
    reset = commands.add_parser("reset-password", parents=[common],
                                help="set a new password and revoke the user's tokens",
                                description=f"Set a new password; {password}.")
    reset.add_argument("username")
    for name, text in (("make-admin", "grant administrator rights"),
                       ("revoke-admin", "revoke administrator rights")):
        commands.add_parser(name, parents=[common], help=text).add_argument("username")
    commands.add_parser(
        "backup", parents=[common], help="copy the database and repositories, while serving",
    ).add_argument("dest", metavar="DEST", help="a new or empty folder")
    restore = commands.add_parser("restore", parents=[common],
                                  help="replace the data folder with a backup (server stopped)")
    restore.add_argument("src", metavar="SRC", help="a folder written by backup")
    restore.add_argument("--force", action="store_true",
                         help="replace existing data (moved aside into pre-restore-*)")
    commands.add_parser("check", parents=[common],
                        help="database integrity and git fsck of every repository")
    bot = commands.add_parser("bot", parents=[common],
                              help="run the companion chat bot (Discord, or --console)",
                              description="Run the chat bot configured by [bot]: on Discord, "
                              "or with --console in this terminal.")
    bot.add_argument("--console", action="store_true",
                     help="read commands from standard input and print the replies")
    bot.add_argument("--as", dest="chat_id", metavar="CHAT_ID",
                     help="the chat user id the console acts as (needed with --console)")
    args = parser.parse_args(argv)
    if args.command == "bot" and args.console != bool(args.chat_id):
        bot.error("--console and --as CHAT_ID go together")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.command:
        discord_bot = args.command == "bot" and not args.console
        # Commands print their own results; only warnings from the libraries show (the
        # Discord bot runs on and logs what it does).
        setup_logging(logging.INFO if discord_bot else logging.WARNING)
        try:
            config = load_config(args.config, {"storage.data_dir": args.data_dir})
        except ConfigError as exc:
            print(f"hubsvc: configuration error: {exc}", file=sys.stderr)
            return 2
        if args.command == "bot":
            from hubsvc import bot
            return bot.run(args, config)
        return admin.run(args, config)
    try:
        config = load_config(args.config, {
            "server.host": args.host, "server.port": args.port,
            "storage.data_dir": args.data_dir,
        })
        setup_logging(json_lines=config["server"]["access_log_json"])
        # Checked before anything is said or migrated: a busy port was a traceback
        # after "listening" (and after the database had been opened).
        check_listen(config["server"]["host"], config["server"]["port"])
        check_data_dir(config.data_dir)
        app = create_app(config)
    except ConfigError as exc:
        print(f"hubsvc: configuration error: {exc}", file=sys.stderr)
        return 2
    except StartupError as exc:
        print(f"hubsvc: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a file in the data folder it cannot read or write
        print(f"hubsvc: cannot start: {describe(exc)}", file=sys.stderr)
        return 2
    server = config["server"]
    logging.getLogger("hubsvc").info("listening on %s:%s, data in %s", server["host"],
                                      server["port"], config.data_dir)
    web.run_app(app, host=server["host"], port=server["port"], print=None,
                access_log_class=JsonAccessLogger if server["access_log_json"] else AccessLogger,
                shutdown_timeout=10, loop=new_event_loop())
    return 0


if __name__ == "__main__":
    sys.exit(main())
