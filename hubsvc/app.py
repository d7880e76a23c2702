"""create_app(config): the one factory used by run.py and by the tests."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp_cors
from aiohttp import web
from aiohttp_session import session_middleware
from aiohttp_session.cookie_storage import EncryptedCookieStorage

from .api import account as account_api
from .api import admin as admin_api
from .api import audit as audit_api
from .api import auth as auth_api
from .api import chat as chat_api
from .api import chat_notices as chat_notices_api
from .api import compare as compare_api
from .api import docs as docs_api
from .api import events as events_api
from .api import git as git_api
from .api import hooks as hooks_api
from .api import issues as issues_api
from .api import meta as meta_api
from .api import metrics as metrics_api
from .api import milestones as milestones_api
from .api import notifications as notifications_api
from .api import orgs as orgs_api
from .api import passkeys as passkeys_api
from .api import protection as protection_api
from .api import pulls as pulls_api
from .api import reactions as reactions_api
from .api import release_assets as release_assets_api
from .api import releases as releases_api
from .api import repos as repos_api
from .api import reviews as reviews_api
from .api import search as search_api
from .api import sessions as sessions_api
from .api import smart_http
from .api import ssh_keys as ssh_keys_api
from .api import statuses as statuses_api
from .api import two_factor as two_factor_api
from .api import users as users_api
from .api import webhooks as webhooks_api
from .api import ws as ws_api
from .config import Config, ConfigError, ensure_secret
from .datadir import tighten
from .events.bus import EventBus
from .git.files import REPO_FILES, RepoFiles
from .git.hook_fifos import HOOK_FIFOS, HookFifos
from .git.pack_cache import PackCache
from .git.slots import make_slots
from .keys import BUS, CONFIG, STATE, STORE
from .notify.chat_dm import CHAT_NOTICES, Doorbell, chat_dm_ctx, wake_polls
from .notify.email import email_ctx
from .notify.hub import HUB, Hub, close_sockets, hub_ctx
from .notify.inbox import inbox_ctx
from .notify.leader import LEADER, Job, Leader
from .notify.mail import MAILER, Mailer, mail_ctx
from .notify.webhook import HOOKS, WEBHOOK, HookWorkers, WebhookSender, hooks_ctx, webhook_ctx
from .policy import action_of
from .services.crossing import cluster_ctx, join_cluster
from .services.maintenance import maintenance_ctx
from .services.pulls import MERGE_LOCKS, pull_sync_ctx
from .services.pushes import push_journal_ctx
from .services.recovery import recovery_ctx
from .site import pages as site_pages
from .ssh.server import SSH, SshService, ssh_closing, ssh_ctx
from .store import Store
from .tasks import BACKGROUND, Background
from .timeutil import iso
from .web import front
from .web.auth import (
    BASIC_CACHE,
    PAT_TOUCHED,
    TOKEN_CACHE,
    cookie_key,
)
from .web.drain import DRAINERS, Drainer
from .web.ratelimit import (
    GIT_LIMITER,
    LIMITER,
    SIGN_IN_LIMITER,
    TokenBucket,
)
from .web.tokens import TokenCache

log = logging.getLogger("hubsvc")


async def _store_ctx(app: web.Application) -> AsyncIterator[None]:
    store = app[STORE]
    await store.open()
    # The bus reads the log, and hears of each commit that wrote events to it.
    app[BUS].attach(store.events.after, await store.events.last_id())
    store.db.event_listeners.append(app[BUS].publish)
    store.db.pacers.append(app[BUS].paced)
    # security.admins names accounts that exist the first time a name is listed: each name
    # is applied once and then recorded, so whoever signs the name up later (or takes it
    # after the account is deleted) inherits nothing.
    granted, missing = await store.users.apply_admin_names(app[CONFIG]["security"]["admins"])
    if granted:
        log.info("security.admins made %s administrators", ", ".join(granted))
    for name in missing:
        log.warning(
            "security.admins lists %s, but no account has that name: nothing is "
            "granted, now or when someone signs it up. Create the account, then grant it "
            "with `python run.py make-admin %s`",
            name,
            name,
        )
    yield
    await asyncio.to_thread(app[REPO_FILES].close)
    await store.close()


async def _hook_fifos_ctx(app: web.Application) -> AsyncIterator[None]:
    """git's hooks, and the server's end of their question, tried once: no hooks, no start.

    First of the contexts: aiohttp cleans up none of them when one fails to start, so a
    failure here leaves nothing running (no store thread to hold the process up).
    """
    await asyncio.to_thread(app[REPO_FILES].prepare)
    fifos = app[HOOK_FIFOS]
    await fifos.start()
    try:
        await fifos.trial(app[REPO_FILES].hooks)
    except BaseException:
        await fifos.stop()
        raise
    yield
    await fifos.stop()


PRUNE_EVENTS_SECONDS = 3600
UPKEEP_SECONDS = 3600


async def _prune_events(app: web.Application) -> None:
    """Drop events past events.retention_days."""
    days = app[CONFIG]["events"]["retention_days"]
    await app[STORE].events.prune(iso(time.time() - days * 86400))


async def _upkeep(app: web.Application) -> None:
    """Prune finished deliveries, stale chat notices, expired sessions, the heartbeats of
    gone processes and the security log past [security] log_days; optimize."""
    days = app[CONFIG]["events"]["retention_days"]
    store = app[STORE]
    before = iso(time.time() - days * 86400)
    await store.upkeep.prune_deliveries(before)
    await store.upkeep.prune_chat_notices(before)
    await store.upkeep.prune_sessions(int(time.time()))
    await store.leases.prune(time.time() - 86400)
    await store.audit.prune(iso(time.time() - app[CONFIG]["security"]["log_days"] * 86400))
    await store.upkeep.optimize()


async def _events_tick(app: web.Application) -> None:
    """The lease holder's poll: events other processes committed wake its consumers."""
    app[BUS].heard(await app[STORE].events.last_id())


async def _bus_ctx(app: web.Application) -> AsyncIterator[None]:
    leader = app[LEADER]
    # On the lease holder: events pruned at start and hourly, upkeep hourly after start.
    leader.add(leader.every("event pruning", PRUNE_EVENTS_SECONDS, lambda: _prune_events(app)))
    leader.add(leader.every("database upkeep", UPKEEP_SECONDS, lambda: _upkeep(app), now=False))
    leader.add(Job("event log", _nothing, _nothing, lambda: _events_tick(app)))
    yield
    await app[BACKGROUND].close()
    await app[BUS].close()


async def _nothing() -> None:
    pass


async def _leader_ctx(app: web.Application) -> AsyncIterator[None]:
    """Last to start, first to stop: take part in the jobs lease once every job is known."""
    leader = app[LEADER]
    await leader.start()
    yield
    # Requests have finished by now; let what they started reach the queues first.
    await app[BACKGROUND].close()
    await app[BUS].drain()
    await leader.stop()


async def _mark_shutdown(app: web.Application) -> None:
    app[STATE]["shutting_down"] = True


async def _hand_off(app: web.Application) -> None:
    """on_shutdown: free the jobs lease now, so another process runs the jobs while this
    one finishes what is in flight (its heartbeat stays until it exits)."""
    await app[LEADER].hand_off()


def new_event_loop(choice: str = "auto") -> asyncio.AbstractEventLoop:
    """The loop [server] event_loop names: `auto` is uvloop's where installed, else asyncio's."""
    if choice == "asyncio":
        return asyncio.new_event_loop()
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise ConfigError(
                "server.event_loop is uvloop, but uvloop is not installed "
                "(pip install uvloop, or set it to auto)"
            ) from None
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def create_app(config: Config) -> web.Application:
    """Build the application: middlewares, routes, background tasks."""
    tighten(config.data_dir)  # also fixes the modes of an older install's files
    ensure_secret(config)
    security = config["security"]
    cookie = EncryptedCookieStorage(
        cookie_key(security["secret_key"]),
        cookie_name="session",
        httponly=True,
        samesite="Lax",
        path="/",
        secure=config.base_url.startswith("https://"),
        max_age=security["session_days"] * 86400,
    )
    app = web.Application(
        client_max_size=config["server"]["max_body_bytes"],
        # aiohttp's 8190-byte request line is shorter than the documented query limits
        # (a 4096-character path plus a branch, percent-encoded): those must reach us.
        # aiohttp has no header read timeout of its own, but its keep-alive timer runs
        # from the connection's start and from each answer until a whole request head
        # is in, and closes the connection when it fires: that is the header deadline.
        # Set here rather than in run.py so the tests' servers get it too.
        handler_args={
            "max_line_size": 65536,
            "keepalive_timeout": config["server"]["header_timeout_seconds"],
        },
    )
    app[CONFIG] = config
    app[STATE] = {}
    app[STORE] = Store(
        config.data_dir / "hubsvc.db",
        read_timeout_ms=config["database"]["read_timeout_ms"],
        write_timeout_ms=config["database"]["write_timeout_ms"],
        url=config["database"]["url"],
        pool_size=config["database"]["pool_size"],
    )
    app[BUS] = EventBus()
    app[LEADER] = Leader(app[STORE])
    app[BACKGROUND] = Background()
    app[TOKEN_CACHE] = TokenCache()
    app[PAT_TOUCHED] = {}
    app[BASIC_CACHE] = TokenCache(ttl=300)
    git_config = config["git"]
    app[REPO_FILES] = RepoFiles(
        config.data_dir / "repositories",
        pack_cache=PackCache(
            config.data_dir / "pack-cache",
            config.data_dir / "git-hooks" / "pack-objects-hook",
            git_config["pack_cache_mb"] << 20,
            git_config["pack_cache_minutes"] * 60,
            git_config["timeout_seconds"] + 60,
        ),
    )
    app[HOOK_FIFOS] = HookFifos(config.data_dir / "run")
    app[SSH] = SshService(app)
    app[MERGE_LOCKS] = defaultdict(asyncio.Lock)
    app[WEBHOOK] = WebhookSender(app)
    app[HOOKS] = HookWorkers(app)
    app[MAILER] = Mailer(app)
    app[HUB] = Hub(app)
    app[CHAT_NOTICES] = Doorbell()
    app[metrics_api.METRICS] = metrics_api.AppCollector(app)
    make_slots(app)
    limits = config["rate_limit"]
    if limits["enabled"]:
        app[LIMITER] = TokenBucket(
            limits["burst"], limits["per_minute"] / 60, max_keys=limits["max_keys"]
        )
        app[SIGN_IN_LIMITER] = TokenBucket(
            limits["sign_in_per_15_minutes"],
            limits["sign_in_per_15_minutes"] / 900,
            max_keys=limits["max_keys"],
        )
        app[GIT_LIMITER] = TokenBucket(
            limits["git_burst"], limits["git_per_minute"] / 60, max_keys=limits["max_keys"]
        )
    several = bool(config["redis"]["url"])
    if several:  # events, limits and revocations cross processes through Redis
        join_cluster(app)
    app.cleanup_ctx.extend(
        [
            _hook_fifos_ctx,
            _store_ctx,
            _bus_ctx,
            *([cluster_ctx] if several else []),
            pull_sync_ctx,
            webhook_ctx,
            hooks_ctx,
            mail_ctx,
            email_ctx,
            chat_dm_ctx,
            inbox_ctx,
            hub_ctx,
            push_journal_ctx,
            recovery_ctx,
            maintenance_ctx,
            metrics_api.metrics_ctx,
            _leader_ctx,
            # Stops first: its sessions end before the jobs they started are drained.
            ssh_ctx,
        ]
    )
    app.on_shutdown.extend([_mark_shutdown, _hand_off, close_sockets, wake_polls, ssh_closing])
    drainers: list[Drainer] = [app[SSH].drain]
    app[DRAINERS] = drainers
    # No middlewares: front's steps, in this order, run for each request (web/front.py):
    # the request id, the body deadline, the rate limit, errors, the session (only where
    # one is used) and the credential. Its answer hook comes before CORS's.
    front.install(app, session_middleware(cookie), meta_api.health)
    # Smart HTTP comes last: its /{owner}/{name}/… patterns must not shadow /api routes.
    for module in (
        meta_api,
        metrics_api,
        docs_api,
        events_api,
        auth_api,
        account_api,
        passkeys_api,
        two_factor_api,
        sessions_api,
        audit_api,
        ssh_keys_api,
        users_api,
        admin_api,
        repos_api,
        orgs_api,
        issues_api,
        pulls_api,
        milestones_api,
        reactions_api,
        release_assets_api,
        releases_api,
        search_api,
        chat_api,
        chat_notices_api,
        webhooks_api,
        hooks_api,
        protection_api,
        reviews_api,
        notifications_api,
        statuses_api,
        ws_api,
        git_api,
        compare_api,
        smart_http,
        site_pages,
    ):
        app.router.add_routes(module.routes)
    undeclared = undeclared_routes(app)
    if undeclared:
        # Every route declares its action: one without is outside the policy, so the
        # service refuses to start rather than guess what it needs.
        raise RuntimeError("routes without a declared action: " + ", ".join(undeclared))
    _setup_cors(app, config)
    return app


def undeclared_routes(app: web.Application) -> list[str]:
    """The routes whose handler declares no policy action (policy.requires)."""
    return sorted(
        f"{route.method} {route.resource.canonical}"
        for route in app.router.routes()
        if route.resource is not None
        and route.method not in ("HEAD", "OPTIONS")
        and action_of(route.handler) is None
    )


def _setup_cors(app: web.Application, config: Config) -> None:
    """CORS for the configured origins, added once after every route exists."""
    origins = config["cors"]["origins"]
    if not origins:
        return
    options = aiohttp_cors.ResourceOptions(
        allow_credentials=True,
        expose_headers="*",
        allow_headers="*",
        allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
        max_age=3600,
    )
    cors = aiohttp_cors.setup(app, defaults=dict.fromkeys(origins, options))
    for route in list(app.router.routes()):
        # "*" routes (git-lfs's, answered 501 to any method) are for git, not browsers.
        if route.method not in ("HEAD", "*"):
            cors.add(route)
    # aiohttp_cors answers only for the routes it knows: an unknown path (404), a wrong
    # method (405) or an error before any route matched would reach the browser without
    # the headers, and its script could not read the error. Added after aiohttp_cors's
    # hook, so it only fills in what that one left out.
    app.on_response_prepare.append(_cors_on_errors(frozenset(origins)))


_SIMPLE_HEADERS = frozenset(
    h.lower()
    for h in (
        "Cache-Control",
        "Content-Language",
        "Content-Type",
        "Expires",
        "Last-Modified",
        "Pragma",
    )
)


def _cors_on_errors(
    origins: frozenset[str],
) -> Callable[[web.Request, web.StreamResponse], Awaitable[None]]:
    """An on_response_prepare hook giving error answers the CORS headers of a configured origin."""

    async def add(request: web.Request, response: web.StreamResponse) -> None:
        origin = request.headers.get("Origin")
        if (
            response.status < 400
            or origin not in origins
            or "Access-Control-Allow-Origin" in response.headers
        ):
            return
        exposed = sorted(k for k in response.headers if k.lower() not in _SIMPLE_HEADERS)
        response.headers["Access-Control-Expose-Headers"] = ",".join(exposed)
        response.headers["Access-Control-Allow-Origin"] = origin
        response.headers["Access-Control-Allow-Credentials"] = "true"

    return add
