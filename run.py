"""Entry point: `python run.py [--config FILE] [--host H] [--port P] [--data-dir DIR]`."""

from __future__ import annotations

import argparse
import logging
import sys

from aiohttp import web

from hubsvc.app import create_app
from hubsvc.config import ConfigError, load_config
from hubsvc.logs import AccessLogger, JsonAccessLogger, setup_logging


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="hubsvc: repository hosting service API")
    parser.add_argument("--config", help="TOML configuration file")
    parser.add_argument("--host", help="address to listen on (server.host)")
    parser.add_argument("--port", type=int, help="port to listen on (server.port)")
    parser.add_argument("--data-dir", help="database and repositories (storage.data_dir)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    setup_logging()
    try:
        config = load_config(args.config, {
            "server.host": args.host, "server.port": args.port,
            "storage.data_dir": args.data_dir,
        })
        app = create_app(config)
    except ConfigError as exc:
        print(f"hubsvc: configuration error: {exc}", file=sys.stderr)
        return 2
    server = config["server"]
    logging.getLogger("hubsvc").info("listening on %s:%s, data in %s", server["host"],
                                      server["port"], config.data_dir)
    web.run_app(app, host=server["host"], port=server["port"], print=None,
                access_log_class=JsonAccessLogger if server["access_log_json"] else AccessLogger,
                shutdown_timeout=10)
    return 0


if __name__ == "__main__":
    sys.exit(main())
