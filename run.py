"""Entry point: `python run.py [--config FILE] [--host H] [--port P] [--data-dir DIR] [COMMAND]`.

Without a command it serves; a command (create-user, reset-password, make-admin,
revoke-admin, backup, restore, check) runs once and exits: 0 ok, 1 failure, 2 usage.
`bot` runs the companion chat bot instead (hubsvc/bot/).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import sys

from hubsvc.app import create_app, new_event_loop
from hubsvc.cli import parse_args, run
from hubsvc.config import ConfigError, load_config
from hubsvc.git.hook_fifos import HooksUnusable
from hubsvc.notify.collector import COLLECTOR
from hubsvc.startup import (
    StartupError,
    check_data_dir,
    check_listen,
    claim_data_dir,
    claim_database,
    describe,
)
from hubsvc.web.drain import serve
from hubsvc.web.logs import access_logger, setup_logging


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
        return run(args, config)
    try:
        config = load_config(
            args.config,
            {
                "server.host": args.host,
                "server.port": args.port,
                "storage.data_dir": args.data_dir,
            },
        )
        setup_logging(json_lines=config.json_logs)
        # Checked before anything is said or migrated: a busy port was a traceback
        # after "listening" (and after the database had been opened).
        check_listen(config["server"]["host"], config["server"]["port"])
        ssh = config["ssh"]
        if ssh["port"] and not ssh["reuse_port"]:
            check_listen(config["server"]["host"], ssh["port"], "[ssh] port; 0 turns SSH off")
        metrics = config["metrics"]
        if metrics["port"]:
            check_listen(metrics["host"], metrics["port"], "[metrics] port; 0: no listener")
        check_data_dir(config.data_dir)
        claim_data_dir(config.data_dir, several=bool(config["redis"]["url"]))
        claim_database(config["database"]["url"], several=bool(config["redis"]["url"]))
        app = create_app(config)
        loop = new_event_loop(config["server"]["event_loop"])
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

    def listening() -> None:
        # Started: what is alive now (modules, routes, schemas, the app) lives as long as
        # the process. Out of the collector's view, a full collection under load scans
        # only what requests made; it scanned it all, pauses of 17 to 190 ms (measured
        # with gc.callbacks under wrk, issue 34).
        gc.collect()
        gc.freeze()
        # Sockets opened from now on go out of its view in steps (notify/collector.py).
        COLLECTOR.enable()
        # Said once the socket accepts connections, after the start-up hooks (migrations,
        # the event log, the leases): said earlier, it promised too soon.
        logging.getLogger("hubsvc").info(
            "listening on %s:%s, data in %s", server["host"], server["port"], config.data_dir
        )

    asyncio.set_event_loop(loop)
    try:
        # Until SIGTERM or SIGINT, then up to [server] drain_seconds finishing what is
        # in flight (hubsvc/web/drain.py).
        loop.run_until_complete(
            serve(
                app,
                server["host"],
                server["port"],
                server["drain_seconds"],
                listening,
                access_log_class=access_logger(
                    config.json_logs, config["server"]["trusted_proxies"]
                ),
            )
        )
    except HooksUnusable as exc:  # found once the app starts, with its hooks' folder
        print(f"hubsvc: {exc}", file=sys.stderr)
        return 2
    finally:
        _close_loop(loop)
    return 0


def _close_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what is left, as web.run_app does, and close the loop."""
    left = [task for task in asyncio.all_tasks(loop) if not task.done()]
    for task in left:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.run_until_complete(loop.shutdown_default_executor())
    asyncio.set_event_loop(None)
    loop.close()


if __name__ == "__main__":
    sys.exit(main())
