"""Smart-HTTP git hosting at /:owner/:name.git: clone, fetch and push with HTTP Basic."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import time

from aiohttp import web

from schemas.git import InfoRefsQuerySchema

from ..errors import ApiError, BadRequest, Forbidden, Unauthorized
from ..git.files import REPO_FILES
from ..git.protocol import SERVICES, advertise, answer_probe, serve_rpc
from ..git.slots import git_slot
from ..identity import Grant, Identity
from ..keys import AUTH, CONFIG, STORE
from ..policy import requires
from ..services.push_policy import PASSWORD, SESSION, TOKEN, Pusher
from ..services.push_timing import PushClock
from ..services.receiving import receiving
from ..web.auth import (
    BASIC_CACHE,
    check_password,
    current_user,
    is_personal_token,
    password_problem,
    user_for_token,
)
from ..web.openapi import doc
from ..web.permissions import load_repo
from ..web.ratelimit import SIGN_IN_LIMITER, sign_in_key

routes = web.RouteTableDef()
GIT_BASE = "/{owner}/{name}"


def _challenge(message: str = "authentication required") -> ApiError:
    error = Unauthorized(message)
    error.headers["WWW-Authenticate"] = 'Basic realm="hubsvc"'
    return error


async def _basic_user(request: web.Request) -> tuple[dict, Grant | None] | None:
    """The user of an HTTP Basic header (password or token as the password) and a scoped
    token's grant, else None."""
    header = request.headers.get("Authorization", "")
    if header[:6].lower() != "basic ":
        return None
    try:
        username, _, secret = base64.b64decode(header[6:].strip()).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        raise _challenge("malformed Basic credentials") from None
    # A personal access token (or a sign-in token) works as the password, so scripts and
    # CI need not hold the account's password.
    found = await user_for_token(request.app, secret) if secret else None
    if found is not None and found.user["username"].lower() == username.lower():
        return found.user, found.grant
    # bcrypt costs a quarter second, and git makes several requests per operation: a
    # verified pair is remembered under a digest (never in clear) with the password hash
    # it matched, and honoured only while the account still has that hash, so a password
    # reset ends it at once.
    digest = hashlib.sha256(f"{username.lower()}\0{secret}".encode()).digest()
    cache = request.app[BASIC_CACHE]
    user = await request.app[STORE].users.by_login(username) if username else None
    hit = cache.get(digest)
    if hit is not None and user is not None and hit[0]["password_hash"] == user["password_hash"]:
        return await _password_enough(request, _enabled(user)), None
    limiter = request.app.get(SIGN_IN_LIMITER)
    if limiter is not None:
        allowed, _, _ = await limiter.spend(sign_in_key(request, username, user))
        if not allowed:
            raise ApiError("too many failed sign-ins", 429)
    if password_problem(secret, new=False):
        raise _challenge("invalid credentials")  # no password is over 72 bytes
    rounds = request.app[CONFIG]["security"]["bcrypt_rounds"]
    if (
        not await check_password(secret, user["password_hash"] if user else None, rounds)
        or user is None
    ):
        raise _challenge("invalid credentials")
    cache.put(digest, user, int(time.time()) + 300)
    return await _password_enough(request, _enabled(user)), None


# Gitea's rule: where a second factor exists, the password alone no longer opens git.
PASSWORD_NOT_ENOUGH = (
    "two-factor authentication is on for this account, so its password does not work for "
    "git over HTTP: use a personal access token as the password (create one at "
    "POST /api/users/me/tokens or in the dashboard's settings), or SSH"
)


async def _password_enough(request: web.Request, user: dict) -> dict:
    """The user of a right password, unless they have a second factor (asked each time, so
    turning one on takes effect at once, remembered passwords included)."""
    if await request.app[STORE].two_factor.enabled(user["id"]):
        raise _challenge(PASSWORD_NOT_ENOUGH)
    return user


def _enabled(user: dict) -> dict:
    """The user, unless the account is disabled (403, said only after the password)."""
    if user["disabled"]:
        raise Forbidden("this account is disabled")
    return user


async def _git_repo(request: web.Request, need: str) -> dict:
    """The repository of a git URL, with GitHub's rules for who gets a challenge."""
    user = current_user(request)
    if user is None:
        basic = await _basic_user(request)
        if basic is not None:
            user, grant = basic
            request[AUTH] = Identity(user, "basic", personal=grant is not None, grant=grant)
    name = request.match_info["name"]
    name = name[:-4] if name.lower().endswith(".git") else name
    try:
        # The policy caps a scoped token: a read-only one clones and cannot push.
        action = "git.write" if need == "write" else "git.read"
        return await load_repo(request, need, name=name, action=action)
    except ApiError as exc:
        # Anonymous callers get the challenge for private, missing and push alike, so
        # git asks for credentials and existence does not leak.
        if user is None and exc.status in (401, 403, 404):
            raise _challenge() from None
        raise


def _service(request: web.Request, given: str | None) -> str:
    if given not in SERVICES:
        raise BadRequest("service must be git-upload-pack or git-receive-pack")
    return given


@routes.get(GIT_BASE + "/info/refs")
@doc(
    "Smart-HTTP ref advertisement (git clone/fetch/push)",
    public=True,
    tag="git-http",
    plain_errors=True,
    query=InfoRefsQuerySchema,
    responses={
        200: {
            "description": "pkt-line ref advertisement",
            "content": {
                f"application/x-{service}-advertisement": {"schema": {"type": "string"}}
                for service in ("git-upload-pack", "git-receive-pack")
            },
        }
    },
    errors=(400, 401, 403, 404, 503),
    description="`service` is git-upload-pack or git-receive-pack. An anonymous request for a "
    "private or missing repository gets 401 with a Basic challenge. Errors on the "
    "git routes are text/plain, the only kind git prints to its user. "
    "receive-pack advertises push options (`git push -o`) and refuses any update "
    "under refs/pull/ (the server's namespace, as on GitHub); upload-pack serves "
    "partial clones (`--filter=blob:none`) and lazy fetches of objects reachable "
    "from a ref. Each of the three git routes holds one of server.git_processes "
    "slots (server.git_processes_per_client per client) while git runs; past "
    "either cap the answer is 503 with Retry-After.",
)
@requires("git.read")
async def info_refs(request: web.Request) -> web.StreamResponse:
    service = _service(request, request.query.get("service"))
    repo = await _git_repo(request, "write" if service == "git-receive-pack" else "read")
    with git_slot(request):
        return await advertise(
            request,
            service,
            request.app[REPO_FILES].path(repo["id"]),
            request.app[CONFIG]["git"]["timeout_seconds"],
        )


@routes.post(GIT_BASE + "/git-upload-pack")
@doc(
    "Smart-HTTP fetch (clone and fetch)",
    public=True,
    tag="git-http",
    plain_errors=True,
    errors=(401, 403, 404, 408, 503, 504),
    description="git runs at most `[git] timeout_seconds`: a request body that has not "
    "arrived by then gets 408, git still busy 504, and an answer already under "
    "way is cut by closing the connection. 503 with Retry-After when "
    "server.git_processes (or the per-client cap) git processes already run.",
    body={"application/x-git-upload-pack-request": {"type": "string", "format": "binary"}},
    responses={
        200: {
            "description": "pack stream",
            "content": {"application/x-git-upload-pack-result": {"schema": {"type": "string"}}},
        }
    },
)
@requires("git.read")
async def upload_pack(request: web.Request) -> web.StreamResponse:
    repo = await _git_repo(request, "read")
    files = request.app[REPO_FILES]
    with git_slot(request):
        resp, _ = await serve_rpc(
            request,
            "git-upload-pack",
            files.path(repo["id"]),
            timeout=request.app[CONFIG]["git"]["timeout_seconds"],
            settings=files.fetch_settings(repo["id"]),
        )
    files.fetched()
    return resp


LFS_MESSAGE = "Git LFS is not supported by this server"


@routes.route("*", GIT_BASE + "/info/lfs/{tail:.*}")
@requires("public")
async def lfs(request: web.Request) -> web.Response:
    """Git LFS endpoints: 501 with the one line git-lfs prints (left out of the API document)."""
    # git-lfs prints the `message` of its batch API's error answer as the one line the
    # user reads; `error` keeps the body in this API's error shape as well.
    return web.Response(
        status=501,
        content_type="application/vnd.git-lfs+json",
        text=json.dumps({"message": LFS_MESSAGE, "error": LFS_MESSAGE}),
    )


@routes.post(GIT_BASE + "/git-receive-pack")
@doc(
    "Smart-HTTP push (write access)",
    public=True,
    tag="git-http",
    plain_errors=True,
    errors=(401, 403, 404, 408, 413, 429, 503, 504, 507),
    description="A push bringing a file over `[git] max_object_bytes` is refused whole (no "
    "ref moves); git prints `remote: error: <path> is … MiB; this server refuses "
    "files over … MiB` and `pre-receive hook declined`. A push over "
    "`[limits] push_bytes` is refused too. git runs at most `[git] "
    "timeout_seconds` (408 / 504 as for git-upload-pack); 503 with Retry-After "
    "when server.git_processes (or the per-client cap) git processes run, or "
    "the database is busy; 507 when the disk is full. To git itself "
    "(User-Agent `git/…`) every refusal but 401 and 404 is a 200 carrying git's "
    "fatal-error packet, so git prints `remote: <reason>` and exits non-zero "
    "(no ref moves) instead of `RPC failed; HTTP <status>`.",
    body={"application/x-git-receive-pack-request": {"type": "string", "format": "binary"}},
    responses={
        200: {
            "description": "report-status stream",
            "content": {"application/x-git-receive-pack-result": {"schema": {"type": "string"}}},
        }
    },
)
@requires("git.write")
async def receive_pack(request: web.Request) -> web.StreamResponse:
    clock = PushClock()
    repo = await _git_repo(request, "write")
    clock.mark("auth")
    probed = await answer_probe(request, "git-receive-pack")
    if probed is not None:
        return probed  # git's credential check before a large push: nothing to receive
    # The slot first: a push refused for want of one has written nothing. pushing: a
    # repository going public is pruned with no push half-way (RepoFiles.quiet).
    with git_slot(request):
        async with request.app[REPO_FILES].pushing(repo["id"]):
            return await _receive(request, repo, clock)


async def _receive(request: web.Request, repo: dict, clock: PushClock) -> web.StreamResponse:
    """Run git receive-pack under the push's bookkeeping (services.receiving)."""
    config, pusher = request.app[CONFIG], await _pusher(request)
    async with receiving(request.app, repo, current_user(request), pusher, clock) as push:
        resp, _ = await serve_rpc(
            request,
            "git-receive-pack",
            push.path,
            config["limits"]["push_bytes"],
            before_eof=push.record,
            hooks=push.hooks,
            timeout=config["git"]["timeout_seconds"],
            env=push.env,
            mark=clock.mark,
            body_in=push.body_in,
        )
    return resp


async def _pusher(request: web.Request) -> Pusher | None:
    """The push's credential, so the pre-receive hook's question finds it again."""
    identity = request.get(AUTH)
    if identity is None:
        return None
    user_id = identity.user["id"]
    if identity.token_digest is not None:  # a bearer token or the session cookie
        return Pusher(user_id, TOKEN if identity.personal else SESSION, identity.token_digest)
    if identity.via != "basic":
        return Pusher(user_id, identity.via)  # decide_push refuses what it cannot find again
    # HTTP Basic carried a password or a token as the password: the token cache (or the
    # database) says which, as it did for _basic_user a moment ago.
    try:
        header = request.headers.get("Authorization", "")[6:].strip()
        secret = base64.b64decode(header).decode().partition(":")[2]
    except (binascii.Error, UnicodeDecodeError):
        secret = ""
    found = await user_for_token(request.app, secret) if secret else None
    if found is not None and found.user["id"] == user_id:
        return Pusher(user_id, TOKEN if is_personal_token(secret) else SESSION, found.digest)
    return Pusher(user_id, PASSWORD, password_hash=identity.user["password_hash"])
