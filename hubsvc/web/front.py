"""The one middleware every request passes: id, body deadline, rate limit, errors, credentials.

It was six aiohttp middlewares (request_context, body_deadline, the rate limit, errors,
sessions, auth); each added a coroutine frame, a call through a partial and its own
lookups to every request, about a twentieth of a small read's time in all (py-spy under
wrk, benchmarks/README.md). The steps run in the same order, as plain calls.
"""

from __future__ import annotations

import asyncio
import random
import time

from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from ..events.bus import paced_seconds
from ..keys import CONFIG, REQUEST_ID
from ..metrics import observe_request
from ..requestid import request_id_var
from ..requestid import valid as valid_request_id
from .auth import BOT_KEY_HEADER, auth_middleware, authenticate
from .deadlines import BodyWatch
from .drain import close_when_draining
from .errors import failure_answer
from .ratelimit import LIMITER, add_rate_headers, rate_limit_middleware


def front_middleware(sessions: Middleware, health: Handler) -> Middleware:
    """The middleware; sessions is aiohttp-session's, run only where a session is read or
    set; health answers a bare GET /health alone."""

    async def guarded(request: web.Request, handler: Handler) -> web.StreamResponse:
        """Errors rendered as {"error": …} around the credential check and the handler."""
        try:
            # Sessions are read only from a `session` cookie and written only by /auth/
            # (sign-up, sign-in, sign-out); every other request (bearer clients, git,
            # /health) would pay for wrapping its answer for nothing.
            if "session" in request.cookies or request.path.startswith("/auth/"):
                return await sessions(request, _then_auth(handler))
            await authenticate(request)
            return await handler(request)
        except Exception as exc:
            return failure_answer(request, exc)

    @web.middleware
    async def front(request: web.Request, handler: Handler) -> web.StreamResponse:
        """Give every request an id, kept for the logs and sent back as X-Request-Id."""
        incoming = request.headers.get("X-Request-Id", "")
        # An id only has to tell requests apart, not be unguessable: getrandbits costs a
        # fraction of uuid4's os.urandom system call, which showed in the profile.
        rid = incoming if valid_request_id(incoming) else f"{random.getrandbits(64):016x}"
        request[REQUEST_ID] = rid
        request_id_var.set(rid)
        paced_seconds.set(0.0)  # a keep-alive connection's requests share one task's context
        started = time.perf_counter()
        status = 500
        try:
            response = await steps(request, handler)
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
            resource = request.match_info.route.resource
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
            if request.app.get(LIMITER) is None:
                return await guarded(request, handler)
            return await rate_limit_middleware(request, _then(guarded, handler))
        finally:
            if watch is not None:
                watch.cancel()

    return front


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


async def answer_headers(request: web.Request, response: web.StreamResponse) -> None:
    """on_response_prepare: the rate-limit headers, X-Request-Id, Server-Timing, and
    `Connection: close` while draining; one hook, where three each cost a coroutine."""
    add_rate_headers(request, response)
    rid = request.get(REQUEST_ID)
    if rid:
        response.headers["X-Request-Id"] = rid
    paced = paced_seconds.get()
    if paced:
        # How long the answer waited for the live fan-out to catch up (EventBus.paced).
        response.headers["Server-Timing"] = (
            f'fanout;dur={paced * 1000:.1f};desc="waited for the WebSocket fan-out"'
        )
    close_when_draining(request, response)
