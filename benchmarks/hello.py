"""The baseline: a hello-world aiohttp app with one JSON route, `GET /hello`.

    python benchmarks/hello.py --port P [--host H] [--access-log hubsvc|off]
                               [--loop auto|asyncio|uvloop]

It runs the way run.py runs hubsvc: `web.run_app` in one process, the same event loop
(`--loop`, like hubsvc's [server] event_loop: uvloop where installed by default), the JSON body built the same way as hubsvc's `rest.json_response`. By
default it logs every request exactly as hubsvc does (`--access-log hubsvc`): the same
`setup_logging()` handler, format and request-id filter, and the same `AccessLogger`
class, imported from hubsvc.web.logs, so one formatted line per request reaches stderr in
both processes and the ratio measures the service's own work, not the logging cost.
`--access-log off` turns the access log off, to see what logging costs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for hubsvc.web.logs

from hubsvc.web.logs import AccessLogger, setup_logging

routes = web.RouteTableDef()


@routes.get("/hello")
async def hello(request: web.Request) -> web.Response:
    """{"hello": "world"}."""
    return web.Response(
        body=json.dumps({"hello": "world"}, separators=(",", ":")).encode(),
        content_type="application/json",
    )


def new_event_loop(choice: str) -> asyncio.AbstractEventLoop:
    """hubsvc.app.new_event_loop's choice, without importing the app (its memory would
    count in the baseline's RSS)."""
    if choice == "asyncio":
        return asyncio.new_event_loop()
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="hello-world aiohttp baseline")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8081)
    parser.add_argument(
        "--access-log",
        choices=("hubsvc", "off"),
        default="hubsvc",
        help="log every request like hubsvc does (default), or not at all",
    )
    parser.add_argument(
        "--loop",
        choices=("auto", "asyncio", "uvloop"),
        default="auto",
        help="the event loop, chosen as hubsvc's [server] event_loop is (auto)",
    )
    args = parser.parse_args(argv)
    loop = new_event_loop(args.loop)
    setup_logging()
    app = web.Application()
    app.router.add_routes(routes)
    if args.access_log == "hubsvc":
        web.run_app(
            app,
            host=args.host,
            port=args.port,
            print=None,
            access_log_class=AccessLogger,
            shutdown_timeout=10,
            loop=loop,
        )
    else:
        web.run_app(
            app,
            host=args.host,
            port=args.port,
            print=None,
            access_log=None,
            shutdown_timeout=10,
            loop=loop,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
