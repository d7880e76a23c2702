"""What every request passes, before its handler: id, body deadline, rate limit, errors, credentials.

It was six aiohttp middlewares (request_context, body_deadline, the rate limit, errors,
sessions, auth); each added a coroutine frame, a call through a partial and its own
lookups to every request, about a twentieth of a small read's time in all (py-spy under
wrk, benchmarks/README.md). The steps run in the same order, as plain calls.

Nor is it an aiohttp middleware any more: an application with any middleware gets one
more of aiohttp's own around every handler (`_fix_request_current_app`), and the chain
is looked up per request in a cache keyed by the handler and the applications, about
3 % of a /health answer's instructions (callgrind). `install` puts the routing and these
steps in the application's request handler instead, for every runner (run.py's and the
tests').
"""

from __future__ import annotations

import asyncio
import functools
import random
import time

from aiohttp import hdrs, web
from aiohttp.typedefs import Handler, Middleware
from aiohttp.web_urldispatcher import UrlMappingMatchInfo

from ..events.bus import paced_seconds
from ..keys import CONFIG, REQUEST_ID, STATE
from ..metrics import observe_request
from ..requestid import request_id_var
from ..requestid import valid as valid_request_id
from .auth import BOT_KEY_HEADER, auth_middleware, authenticate
from .deadlines import BodyWatch
from .errors import failure_answer
from .ratelimit import LIMITER, add_rate_headers, rate_limit_middleware
from .routing import Resolver


def install(app: web.Application, sessions: Middleware, health: Handler) -> None:
    """Make app route each request and pass it through the front steps, and give each
    answer its headers (as it is prepared); sessions is aiohttp-session's middleware,
    run only where a session is read or set; health answers a bare GET /health alone.

    Call it once the application's keys are set (the rate limiter is looked up here).
    """
    resolve = Resolver(app.router)
    state = app[STATE]
    # Set in create_app or not at all: the application is frozen once it serves.
    limited = LIMITER in app

    async def handle(request: web.Request) -> web.StreamResponse:
        """aiohttp's Application._handle for an application without middlewares, then front."""
        match_info = await resolve(request)
        match_info.add_app(app)
        match_info.freeze()
        request._match_info = match_info
        if request.headers.get(hdrs.EXPECT):
            answer = await match_info.expect_handler(request)
            await request.writer.drain()
            if answer is not None:
                return answer
        return await front(request, match_info)

    async def front(request: web.Request, match_info: UrlMappingMatchInfo) -> web.StreamResponse:
        """Give every request an id, kept for the logs and sent back as X-Request-Id."""
        incoming = request.headers.get("X-Request-Id", "")
        # An id only has to tell requests apart, not be unguessable: getrandbits costs a
        # fraction of uuid4's os.urandom system call, which showed in the profile.
        rid = incoming if valid_request_id(incoming) else f"{random.getrandbits(64):016x}"
        request[REQUEST_ID] = rid
        # Each request runs in a task of its own (aiohttp's), so in a context of its own:
        # what one request sets here, or in paced_seconds, the next one does not see.
        request_id_var.set(rid)
        started = time.perf_counter()
        status = 500
        try:
            response = await steps(request, match_info.handler)
            status = response.status
            return response
        except web.HTTPException as exc:  # an answer raised past the error answer
            status = exc.status
            raise
        except asyncio.CancelledError:
            status = 499  # the client hung up (as nginx logs it)
            raise
        finally:
            # By route template, never the raw path: one series per route, not per URL.
            resource = match_info.route.resource
            observe_request(
                request.method,
                resource.canonical if resource is not None else "unmatched",
                status,
                time.perf_counter() - started,
            )

    async def steps(request: web.Request, handler: Handler) -> web.StreamResponse:
        """The health shortcut, the body deadline, the rate limit, then guarded."""
        if request.path == "/health" and _bare_probe(request):
            # A monitor's poll carries nothing the later steps act on (no credentials,
            # cookie or body, and /health is never rate limited): the handler answers
            # alone. Should it fail, the whole chain answers again, for the one error
            # answer.
            try:
                return await health(request)
            except Exception:
                pass
        # Watch the body of every request that has one for idle gaps
        # (server.body_timeout_seconds).
        watch = (
            BodyWatch(request.content, request.app[CONFIG]["server"]["body_timeout_seconds"])
            if request.body_exists and not request.content.is_eof()
            else None
        )
        try:
            if not limited:
                return await guarded(request, handler)
            return await rate_limit_middleware(request, _then(guarded, handler))
        finally:
            if watch is not None:
                watch.cancel()

    async def guarded(request: web.Request, handler: Handler) -> web.StreamResponse:
        """Errors rendered as {"error": …} around the credential check and the handler."""
        try:
            # Sessions are read only from a `session` cookie and written only by /auth/
            # (sign-up, sign-in, sign-out); every other request (bearer clients, git,
            # /health) would pay for wrapping its answer for nothing.
            # (No Cookie header: no cookies to parse.)
            if (
                hdrs.COOKIE in request.headers and "session" in request.cookies
            ) or request.path.startswith("/auth/"):
                return await sessions(request, _then_auth(handler))
            await authenticate(request)
            return await handler(request)
        except Exception as exc:
            return failure_answer(request, exc)

    def answer_headers(request: web.Request, response: web.StreamResponse) -> None:
        """The rate-limit headers, X-Request-Id, Server-Timing, and `Connection: close`
        while draining; one step, where three hooks each cost a coroutine."""
        if limited:
            add_rate_headers(request, response)
        # The request's own context (see front): "-" where front did not run (an
        # `Expect: 100-continue` answered before it).
        rid = request_id_var.get()
        if rid != "-":
            response.headers["X-Request-Id"] = rid
        paced = paced_seconds.get()
        if paced:
            # How long the answer waited for the live fan-out to catch up (EventBus.paced).
            response.headers["Server-Timing"] = (
                f'fanout;dur={paced * 1000:.1f};desc="waited for the WebSocket fan-out"'
            )
        # A WebSocket's 101 keeps its `Connection: upgrade`: the hub closes it with 1001.
        if state.get("draining") and response.status != 101:
            response.force_close()
            # aiohttp wrote its headers before this hook: the header is set here too.
            response.headers["Connection"] = "close"

    class Request(web.Request):
        """aiohttp's request, giving each answer front's headers as it is prepared."""

        async def _prepare_hook(self, response: web.StreamResponse) -> None:
            # As an on_response_prepare hook did, first of them, but called here: through
            # the signal it cost two coroutines more a request (callgrind). The other
            # hooks (CORS) still run, after it, as they did.
            if self._match_info is not None:
                answer_headers(self, response)
                await web.Request._prepare_hook(self, response)

    # Where aiohttp's runners (AppRunner's, so run.py's and the tests' alike) look for
    # the application's request handler and request factory when they make their server.
    # Written straight into the instance: Application warns of any attribute set on it
    # in debug mode.
    vars(app)["_handle"] = handle
    vars(app)["_make_request"] = functools.partial(app._make_request, _cls=Request)


def _then(step: Middleware, handler: Handler) -> Handler:
    async def next_step(request: web.Request) -> web.StreamResponse:
        return await step(request, handler)

    return next_step


def _then_auth(handler: Handler) -> Handler:
    return _then(auth_middleware, handler)


def _bare_probe(request: web.Request) -> bool:
    """A GET or HEAD without body, credentials or cookies."""
    headers = request.headers
    return (
        request.method in ("GET", "HEAD")
        and not request.body_exists
        and "Authorization" not in headers
        and "Cookie" not in headers
        and BOT_KEY_HEADER not in headers
    )
