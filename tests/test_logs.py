"""The plain access line written without a LogRecord is the line logging would write."""

from __future__ import annotations

import io
import logging
import re

from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from hubsvc.web import logs


def test_fast_access_line_matches_the_logging_format():
    root = logging.getLogger()
    saved = (root.handlers[:], root.level)
    logs.setup_logging()
    handler = logs._plain_handler
    stream = io.StringIO()
    handler.setStream(stream)
    try:
        access = logs.AccessLogger(logging.getLogger("aiohttp.access"), "")
        request = make_mocked_request("GET", "/health?token=secret")
        response = web.Response(text="{}", headers={"X-Request-Id": "abc123"})
        access.log(request, response, 0.0015)
        fast = stream.getvalue()
        logging.getLogger("aiohttp.access").info("%s", "X")  # the logging module's own line
        slow = stream.getvalue()[len(fast) :]
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)
        logs._plain_handler = None
    shape = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO aiohttp\.access \[-\] "
    assert re.fullmatch(shape + r'\S+ "GET /health" 200 \d+ 1\.5ms rid=abc123\n', fast), fast
    assert re.fullmatch(shape + "X\n", slow), slow
    assert "secret" not in fast  # the query string (it may carry a token) is left out
