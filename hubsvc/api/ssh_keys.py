"""SSH keys: the signed-in user's keys, anyone's public keys, and repositories' deploy keys."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from schemas.keys import (
    DeployKeyCreateSchema,
    DeployKeyEnvelopeSchema,
    DeployKeyListSchema,
    KeyCreateSchema,
    KeyEnvelopeSchema,
    KeyListSchema,
    PublicKeyListSchema,
)

from ..errors import ApiError, Conflict, NotFound, Unprocessable
from ..keys import STORE
from ..policy import requires
from ..services import audit, ssh_keys
from ..sshkeys import KeyProblem, PublicKey, parse_public_key
from ..store.keys import MAX_KEYS, KeyTaken, TooManyKeys
from ..web.auth import current_user, require_user
from ..web.names import path_username
from ..web.openapi import doc
from ..web.permissions import load_repo
from ..web.rest import json_response, read_json

routes = web.RouteTableDef()

REPO_KEYS = "/api/repositories/{owner}/{name}/keys"
_ONE_PLACE = (
    f"At most {MAX_KEYS} keys per account and per repository (409). "
    "A key belongs to one account or one repository, never two: a key already on one "
    "is 422 saying where (your account, another account, or a repository you may read "
    "by name; one you may not read, or anyone else's account, only as another account's). "
)
_BAD_KEY = (
    "Ed25519, ECDSA (nistp256/384/521) and RSA of at least 2048 bits are taken; DSA, shorter "
    "RSA, certificates, a private key pasted by mistake and lines that do not parse are 422 "
    "with the reason. "
)


def key_json(row: dict[str, Any]) -> dict[str, Any]:
    """A key as the API answers it (deploy keys add readOnly)."""
    out = {
        "id": str(row["id"]),
        "title": row["title"],
        "key": row["key"],
        "fingerprint": row["fingerprint"],
        "createdAt": row["created_at"],
        "lastUsedAt": row["last_used_at"],
    }
    if row["repo_id"] is not None:
        out["readOnly"] = bool(row["read_only"])
    return out


def _parsed(line: str) -> PublicKey:
    try:
        return parse_public_key(line)
    except KeyProblem as problem:
        raise Unprocessable(f"key: {problem.reason}") from None


def _key_id(request: web.Request) -> int:
    raw = request.match_info["id"]
    if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
        raise NotFound("key not found")
    return int(raw)


async def _taken(request: web.Request, holder: dict[str, Any]) -> Unprocessable:
    """The 422 for a key already in use, naming its place only to who may know it."""
    user = current_user(request)
    if holder["user_id"] is not None:
        if user is not None and holder["user_id"] == user["id"]:
            return Unprocessable("key: already in use on your account")
        return Unprocessable("key: already in use by another account")
    repo = await request.app[STORE].repos.by_id(holder["repo_id"], user["id"] if user else 0)
    if repo is not None:
        full = f"{repo['owner_username']}/{repo['name']}"
        try:
            await load_repo(request, "read", repo["owner_username"], repo["name"], "repo.read")
        except ApiError:
            pass  # a private repository it may not read stays unnamed
        else:
            return Unprocessable(f"key: already in use as a deploy key of {full}")
    return Unprocessable("key: already in use by another account")


# The signed-in user's keys (registered before /api/users/{username}/keys: `me` is theirs)


@routes.get("/api/users/me/keys")
@doc("The signed-in user's SSH keys", responses={200: KeyListSchema}, tag="keys")
@requires("user.settings")
async def list_my_keys(request: web.Request) -> web.Response:
    user = require_user(request)
    rows = await request.app[STORE].keys.of_user(user["id"])
    return json_response({"keys": [key_json(r) for r in rows]})


@routes.post("/api/users/me/keys")
@doc(
    "Add an SSH key to the signed-in user's account",
    body=KeyCreateSchema,
    responses={201: KeyEnvelopeSchema},
    errors=(403, 409, 422),
    tag="keys",
    description="The key then signs in over SSH as the account, and commits signed with it "
    "(`gpg.format ssh`) show as verified when their committer e-mail is the account's. "
    + _BAD_KEY
    + _ONE_PLACE
    + "As making a token, it needs a signed-in session (a personal access token, a git "
    "password or the bot key is 403): a leaked token cannot plant a key. The account's "
    "e-mail is told of every key added or removed.",
)
@requires("user.keys")
async def add_my_key(request: web.Request) -> web.Response:
    user = require_user(request)
    data = await read_json(request, KeyCreateSchema())
    key = _parsed(data["key"])
    title = data["title"] or ssh_keys.default_title(key)
    try:
        row = await ssh_keys.add_user_key(request.app, user, title, key)
    except KeyTaken as taken:
        raise await _taken(request, taken.holder) from None
    except TooManyKeys:
        raise Conflict(f"an account holds at most {MAX_KEYS} keys") from None
    await audit.record(
        request, "ssh.key.added", user=user, data={"fingerprint": row["fingerprint"]}
    )
    return json_response({"key": key_json(row)}, status=201)


@routes.delete("/api/users/me/keys/{id}")
@doc(
    "Remove one of the signed-in user's SSH keys",
    responses={204: "removed"},
    errors=(404,),
    tag="keys",
    description="It stops signing in at once (an open SSH session of it is closed). Another "
    "user's key id answers 404.",
)
@requires("user.write")
async def delete_my_key(request: web.Request) -> web.Response:
    user = require_user(request)
    row = await ssh_keys.remove_user_key(request.app, user, _key_id(request))
    if row is None:
        raise NotFound("key not found")
    await audit.record(
        request, "ssh.key.removed", user=user, data={"fingerprint": row["fingerprint"]}
    )
    return web.Response(status=204)


@routes.get("/api/users/{username}/keys")
@doc(
    "A user's public SSH keys, as GitHub's /users/:username/keys",
    responses={200: PublicKeyListSchema},
    errors=(404,),
    public=True,
    tag="keys",
    description="Public keys are public: anyone may read them (to let someone in, or check "
    "who signed a commit). Only `id` and `key`; titles and dates are the owner's.",
)
@requires("user.read")
async def list_public_keys(request: web.Request) -> web.Response:
    user = await request.app[STORE].users.by_username(path_username(request))
    if user is None:
        raise NotFound("user not found")
    rows = await request.app[STORE].keys.of_user(user["id"])
    return json_response({"keys": [{"id": str(r["id"]), "key": r["key"]} for r in rows]})


# Deploy keys


@routes.get(REPO_KEYS)
@doc(
    "A repository's deploy keys (admins)",
    responses={200: DeployKeyListSchema},
    errors=(401, 403, 404),
    tag="keys",
)
@requires("repo.admin")
async def list_deploy_keys(request: web.Request) -> web.Response:
    require_user(request)
    repo = await load_repo(request, "admin")
    rows = await request.app[STORE].keys.of_repo(repo["id"])
    return json_response({"keys": [key_json(r) for r in rows]})


@routes.post(REPO_KEYS)
@doc(
    "Add a deploy key to a repository (admins)",
    body=DeployKeyCreateSchema,
    responses={201: DeployKeyEnvelopeSchema},
    errors=(401, 403, 404, 409, 422),
    tag="keys",
    description="A deploy key reaches this repository only, over SSH: it clones, and pushes "
    "only when `readOnly` is false (default true, as on GitHub). " + _BAD_KEY + _ONE_PLACE,
)
@requires("repo.admin")
async def add_deploy_key(request: web.Request) -> web.Response:
    require_user(request)
    repo = await load_repo(request, "admin")
    data = await read_json(request, DeployKeyCreateSchema())
    key = _parsed(data["key"])
    title = data["title"] or ssh_keys.default_title(key)
    try:
        row = await ssh_keys.add_deploy_key(request.app, repo, title, key, data["readOnly"])
        await audit.record(
            request,
            "repo.deploy-key.added",
            repo=repo,
            data={"fingerprint": row["fingerprint"], "readOnly": bool(row["read_only"])},
        )
    except KeyTaken as taken:
        raise await _taken(request, taken.holder) from None
    except TooManyKeys:
        raise Conflict(f"a repository holds at most {MAX_KEYS} deploy keys") from None
    return json_response({"key": key_json(row)}, status=201)


@routes.delete(REPO_KEYS + "/{id}")
@doc(
    "Remove a deploy key (admins)",
    responses={204: "removed"},
    errors=(401, 403, 404),
    tag="keys",
    description="It stops working at once. A key id of another repository answers 404.",
)
@requires("repo.admin")
async def delete_deploy_key(request: web.Request) -> web.Response:
    require_user(request)
    repo = await load_repo(request, "admin")
    row = await ssh_keys.remove_deploy_key(request.app, repo, _key_id(request))
    if row is not None:
        await audit.record(
            request, "repo.deploy-key.removed", repo=repo, data={"fingerprint": row["fingerprint"]}
        )
    if row is None:
        raise NotFound("key not found")
    return web.Response(status=204)
