"""Passwords, tokens, and the middleware that turns credentials into a signed-in user."""

from __future__ import annotations

import asyncio
import functools
import hashlib
import hmac
import secrets
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import bcrypt
from aiohttp import web
from aiohttp.typedefs import Handler
from aiohttp_session import get_session

from ..clients import client_ip
from ..errors import BadRequest, DatabaseBusy, DiskFull, Forbidden, NotFound, Unauthorized
from ..identity import Grant, Identity
from ..keys import AUTH, CONFIG, STORE
from ..policy import Caps, action_of, decide_action
from .tokens import TokenCache

WS_PATH = "/ws"
METRICS_PATH = "/metrics"


def metrics_secret_ok(request: web.BaseRequest, token: str) -> bool:
    """Whether the request carries `Authorization: Bearer <[metrics] token>` (none set: never)."""
    header = request.headers.get("Authorization", "")
    return bool(token) and hmac.compare_digest(header.encode(), f"Bearer {token}".encode())


SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# bcrypt reads only the first 72 bytes (bcrypt 5 refuses longer ones outright), so a
# longer password would be silently cut, or crash: it is refused up front everywhere.
PASSWORD_MIN_BYTES, PASSWORD_MAX_BYTES = 8, 72


def password_problem(password: str, new: bool = True) -> str | None:
    """Why password cannot be used (checked as UTF-8 bytes), or None; sign-in skips the minimum."""
    try:
        size = len(password.encode())
    except UnicodeEncodeError:  # a lone surrogate escape such as "\ud800"
        return "must be valid Unicode text"
    if size > PASSWORD_MAX_BYTES or (new and size < PASSWORD_MIN_BYTES):
        return f"must be {PASSWORD_MIN_BYTES} to {PASSWORD_MAX_BYTES} bytes"
    return None


def validate_password(password: str, new: bool = True) -> None:
    """400 naming the 8 to 72-byte limit; for sign-up, sign-in and password change alike."""
    problem = password_problem(password, new)
    if problem:
        raise BadRequest(f"password: {problem}")


@functools.lru_cache(maxsize=4)
def dummy_hash(rounds: int) -> bytes:
    """A bcrypt hash of the configured cost to check when no account matches.

    Same cost as a real account's hash, so a wrong username takes as long as a wrong
    password and the time does not tell which usernames exist.
    """
    return bcrypt.hashpw(b"not-a-password", bcrypt.gensalt(rounds))


# bcrypt's own threads: sign-ins never queue behind git reads or other blocking work.
_BCRYPT = ThreadPoolExecutor(4, thread_name_prefix="bcrypt")


async def _bcrypt(fn: Any, *args: Any) -> Any:
    return await asyncio.get_running_loop().run_in_executor(_BCRYPT, fn, *args)


async def hash_password(password: str, rounds: int) -> str:
    """bcrypt off the event loop."""
    hashed = await _bcrypt(bcrypt.hashpw, password.encode(), bcrypt.gensalt(rounds))
    return hashed.decode()


async def check_password(password: str, hashed: str | None, rounds: int) -> bool:
    """Constant-work password check; a missing account pays for a bcrypt of cost rounds."""
    target = hashed.encode() if hashed else await _bcrypt(dummy_hash, rounds)
    ok = await _bcrypt(bcrypt.checkpw, password.encode(), target)
    return ok and hashed is not None


def token_digest(token: str) -> bytes:
    """What the database keeps of a token."""
    return hashlib.sha256(token.encode()).digest()


def new_token() -> str:
    """An opaque token of 32 random bytes."""
    return secrets.token_urlsafe(32)


# Personal access tokens carry a prefix, as GitHub's ghp_ do: secret scanners can spot a
# leaked one, and the lookup knows which table to ask.
PAT_PREFIX = "hubsvc_pat_"
# lastUsedAt is written at most this often per token, not on every request.
PAT_TOUCH_SECONDS = 60


def new_personal_token() -> str:
    """A personal access token: the prefix and 32 random bytes."""
    return PAT_PREFIX + secrets.token_urlsafe(32)


def is_personal_token(token: str) -> bool:
    """Whether a token is a personal access token (by its prefix)."""
    return token.startswith(PAT_PREFIX)


def cookie_key(secret: str) -> bytes:
    """The 32 raw bytes aiohttp-session turns into its Fernet key, derived from the configured secret."""
    return hashlib.sha256(b"hubsvc-session:" + secret.encode()).digest()


TOKEN_CACHE = web.AppKey("token_cache", TokenCache)
# Git Basic credentials bcrypt accepted, kept a while: smart HTTP and the git rate limit
# both read it, so it lives here, below both.
BASIC_CACHE = web.AppKey("basic_cache", TokenCache)
PAT_TOUCHED = web.AppKey("pat_touched", dict)


class TokenHit(NamedTuple):
    """A live token: its user, its digest and, for a scoped personal token, its grant."""

    user: dict[str, Any]
    digest: bytes
    grant: Grant | None


async def user_for_token(app: web.Application, token: str) -> TokenHit | None:
    """The user of a live token, from the cache or the database."""
    digest = token_digest(token)
    personal = is_personal_token(token)
    cache = app[TOKEN_CACHE]
    hit = cache.get(digest)
    if hit is None:
        users = app[STORE].users
        found = await cache.load(
            digest,
            lambda: users.personal_token_owner(digest) if personal else users.token_owner(digest),
        )
        if found is None:
            return None
        hit = found
    await _touch(app, digest, personal)
    return TokenHit(hit[0], digest, hit[2] if len(hit) > 2 else None)


def _touch_due(app: web.Application, digest: bytes) -> bool:
    """Whether a token's use is to be recorded now (at most once a minute each); noted if so."""
    touched = app[PAT_TOUCHED]
    now = time.monotonic()
    if now - touched.get(digest, -PAT_TOUCH_SECONDS) < PAT_TOUCH_SECONDS:
        return False
    if len(touched) > 10000:
        touched.clear()
    touched[digest] = now
    return True


async def _touch(app: web.Application, digest: bytes, personal: bool) -> None:
    """Record a token's use (lastUsedAt, a session's lastSeenAt), at most once a minute each."""
    if _touch_due(app, digest):
        await _touch_now(app, digest, personal)


async def _touch_now(app: web.Application, digest: bytes, personal: bool) -> None:
    users = app[STORE].users
    try:
        await (users.touch_personal_token(digest) if personal else users.touch_token(digest))
    except (DiskFull, DatabaseBusy):
        # Bookkeeping only: a read must not fail on a full disk or a held write lock
        # (a minute later the next use tries again).
        pass


async def _credential(
    app: web.Application, token: str, via: str
) -> tuple[Identity, set[str] | None] | None:
    """The Identity of a live token used as via ("bearer" or "cookie") and the actions
    already allowed to it (None: not kept), or None for a dead token.

    The Identity is kept with the token's cache entry, so a request whose token is cached
    builds nothing: user_for_token's work (the lookup, the touch) without its objects.
    """
    digest = token_digest(token)
    cache = app[TOKEN_CACHE]
    kept = cache.kept(digest)
    if kept is not None:
        identity = kept.identities.get(via)
        if identity is not None:
            if _touch_due(app, digest):
                await _touch_now(app, digest, is_personal_token(token))
            return identity, kept.allowed[via]
    found = await user_for_token(app, token)
    if found is None:
        return None
    personal = via == "bearer" and is_personal_token(token)
    identity = Identity(found.user, via, found.digest, personal, found.grant if personal else None)
    kept = cache.kept(digest)
    # Only onto the entry the user was read from: one read since (after a revocation, an
    # account change) has a user of its own.
    if kept is None or kept.user is not found.user:
        return identity, None
    kept.identities[via] = identity
    return identity, kept.allowed.setdefault(via, set())


async def issue_token(
    request: web.Request, user: dict[str, Any], audit: Any = None
) -> tuple[str, int]:
    """Create a token for user, put it in the session cookie, return it with its expiry;
    audit: the security log's entry, written with the token."""
    config = request.app[CONFIG]
    token = new_token()
    expires = int(time.time()) + config["security"]["session_days"] * 86400
    digest = token_digest(token)
    await request.app[STORE].users.add_token(
        user["id"],
        digest,
        expires,
        client_ip(request) or None,
        request.headers.get("User-Agent"),
        audit=audit,
    )
    # Its first use need not write lastSeenAt again: the row was written now.
    request.app[PAT_TOUCHED][digest] = time.monotonic()
    session = await get_session(request)
    session["token"] = token
    return token, expires


def allowed_origin(request: web.Request) -> bool:
    """Whether Origin (or Referer) names the base URL, this host or a CORS origin."""
    config = request.app[CONFIG]
    origin = request.headers.get("Origin")
    if not origin:
        referer = request.headers.get("Referer")
        if not referer:
            # Browsers send Origin on every cross-site write; a request with neither
            # header is not from a page, so it cannot be a cross-site forgery.
            return True
        parts = urlsplit(referer)
        origin = f"{parts.scheme}://{parts.netloc}"
    allowed = {config.base_url.lower(), *(o.rstrip("/").lower() for o in config["cors"]["origins"])}
    host = request.headers.get("Host")
    if host:
        allowed.add(f"{request.scheme}://{host}".lower())
    return origin.rstrip("/").lower() in allowed


@web.middleware
async def auth_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Resolve a bearer token, the session cookie or the chat bot key; bad ones are 401."""
    await authenticate(request)
    return await handler(request)


async def authenticate(request: web.Request) -> None:
    """auth_middleware's work: request[AUTH] from the credential, once the route's action
    is within it (401 for a bad credential, 403 for an action beyond it)."""
    if request.path == METRICS_PATH:
        # Its own secret, never a user's credential: without it the route is not there
        # for anyone, administrators included (policy.SECRET_ONLY).
        if not metrics_secret_ok(request, request.app[CONFIG]["metrics"]["token"]):
            raise NotFound("not found")
        request[AUTH] = None
        return
    header = request.headers.get("Authorization", "")
    identity = None
    bearer = header[7:].strip() if header[:7].lower() == "bearer " else None
    if request.path == WS_PATH and request.query.get("token"):
        # A browser cannot set headers on a WebSocket upgrade: the token rides the query.
        bearer = request.query["token"]
    allowed = None
    if bearer is not None:
        got = await _credential(request.app, bearer, "bearer")
        if got is None:
            raise Unauthorized("invalid or expired token")
        identity, allowed = got
    elif "session" in request.cookies:
        session = await get_session(request)
        token = session.get("token")
        if token:
            got = await _credential(request.app, token, "cookie")
            if got is None:
                session.invalidate()
                raise Unauthorized("invalid or expired session")
            identity, allowed = got
            if request.method not in SAFE_METHODS and not allowed_origin(request):
                raise Forbidden("cross-origin request refused")
    if identity is None:
        identity = await _bot_identity(request)
    authorize(request, identity, allowed)
    request[AUTH] = identity


def caps_of(identity: Identity | None) -> Caps | None:
    """What the request's credential allows (None: anonymous, or all its user may do)."""
    if identity is None:
        return None
    if identity.via == "bot":
        return Caps("bot")
    if identity.personal:
        grant = identity.grant
        return Caps(
            "pat",
            grant.scopes if grant is not None else None,
            grant.repositories if grant is not None else None,
        )
    if identity.via == "basic":
        return Caps("basic")
    return None


def authorize(
    request: web.Request, identity: Identity | None, allowed: set[str] | None = None
) -> None:
    """Refuse what the route's declared action is beyond this credential (the policy's part
    that needs no resource; the repository's part is load_repo's); allowed: the actions
    already decided for it (kept with its token), added to."""
    match_info = request.match_info
    if match_info.http_exception is not None:
        return  # no route: the 404 or 405 answers for itself
    action = action_of(match_info.handler)
    if allowed is not None and action in allowed:
        return
    if action is None:
        if request.method == "OPTIONS":
            return  # aiohttp_cors's preflight: it answers headers, never data
        raise Forbidden("this route declares no action")  # the start-up check prevents it
    if action == "bot.key" and not bot_key_ok(request):
        raise Unauthorized("chat bot key required")
    if action == "admin" and identity is None:
        raise Unauthorized("authentication required")
    admin = identity is not None and is_admin(request, identity.user)
    decision = decide_action(caps_of(identity), action, is_admin=admin)
    if not decision.ok:
        if decision.status == 404:
            raise NotFound(decision.reason)
        raise Forbidden(decision.reason)
    # bot.key reads a header of this request as well: decided each time.
    if allowed is not None and action != "bot.key":
        allowed.add(action)


BOT_KEY_HEADER = "X-Chat-Bot-Key"
CHAT_USER_HEADER = "X-Chat-User-Id"
# The link endpoints take the chat id they act on from the body or the path, so there
# the bot key alone is the credential, whether or not X-Chat-User-Id is linked yet.
CHAT_LINK_PATHS = "/api/chat/link/"


def bot_key_ok(request: web.Request) -> bool:
    """True when X-Chat-Bot-Key equals the configured chat.bot_key (never when none is set)."""
    configured = request.app[CONFIG]["chat"]["bot_key"]
    given = request.headers.get(BOT_KEY_HEADER, "")
    return bool(configured and given) and hmac.compare_digest(given.encode(), configured.encode())


def require_bot(request: web.Request) -> None:
    """401 unless the request carries the chat bot's key."""
    if not bot_key_ok(request):
        raise Unauthorized("chat bot key required")


async def _bot_identity(request: web.Request) -> Identity | None:
    """The chat bot's credential: the bot key, and X-Chat-User-Id acting as its verified link."""
    if BOT_KEY_HEADER not in request.headers:
        return None
    if not bot_key_ok(request):
        raise Unauthorized("invalid chat bot key")
    chat_id = request.headers.get(CHAT_USER_HEADER, "")
    if not chat_id:
        return None
    # Looked up on every request, never cached, so an unlink takes effect at once.
    user = await request.app[STORE].chat.linked_user(chat_id)
    if user is not None and user["disabled"]:
        raise Unauthorized("account is disabled")
    if user is None:
        if request.path.startswith(CHAT_LINK_PATHS):
            return None
        raise Unauthorized("chat account is not linked")
    return Identity(user, "bot")


def current_user(request: web.Request) -> dict[str, Any] | None:
    """The signed-in user, or None."""
    identity = request.get(AUTH)
    return identity.user if identity else None


def require_identity(request: web.Request) -> Identity:
    """The request's credential, or 401."""
    identity = request.get(AUTH)
    if identity is None:
        raise Unauthorized("authentication required")
    return identity


def require_user(request: web.Request) -> dict[str, Any]:
    """The signed-in user, or 401."""
    identity = request.get(AUTH)
    if identity is None:
        raise Unauthorized("authentication required")
    return identity.user


def is_admin(request: web.Request, user: dict[str, Any]) -> bool:
    """Administrator by the account's flag (first account, CLI, API, security.admins)."""
    return bool(user["is_admin"]) and not user.get("disabled")


def require_admin(request: web.Request) -> dict[str, Any]:
    """The signed-in administrator, else 401/403."""
    user = require_user(request)
    if not is_admin(request, user):
        raise Forbidden("administrator only")
    return user
