"""JSON bodies are strictly typed: every field of every documented JSON body refuses every
other JSON type with 400 naming the field, and a refused request changes nothing."""

from __future__ import annotations

import copy
import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest
from marshmallow import ValidationError

from hubsvc.events.shape import EVENT_TYPES
from schemas.common import Base, Int

from .conftest import make_config
from .gitcli import git, remote
from .test_repos import create

BOT_KEY = "strict-types-bot-key"
PASSWORD = "correct horse"

# A valid body for each operation with a JSON body, giving every property (nested ones
# too) a value, so that one wrong field is the only thing wrong with a request.
VALID: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/auth/sign-up"): {
        "email": "newbie@example.com",
        "username": "newbie",
        "password": PASSWORD,
        "name": "Newbie",
    },
    ("POST", "/auth/sign-in"): {
        "email": "alice@example.com",
        "username": "alice",
        "password": PASSWORD,
    },
    ("PATCH", "/api/users/me/settings"): {
        "name": "Alice",
        "email": "alice@example.com",
        "bio": "b",
        "location": "l",
        "website": "https://example.com",
        "preferences": {
            "theme": "dark",
            "notifications": {"web": True, "chat": True, "email": True},
        },
        "currentPassword": PASSWORD,
    },
    ("POST", "/api/users/me/settings/preferences"): {
        "theme": "dark",
        "notifications": {"web": True, "chat": True, "email": True},
    },
    ("POST", "/api/repositories"): {
        "name": "other",
        "description": "d",
        "visibility": "private",
        "defaultBranch": "main",
        "autoInit": True,
        "owner": "acme",
    },
    ("PATCH", "/api/repositories/{owner}/{name}"): {
        "name": "renamed",
        "description": "d",
        "visibility": "private",
        "defaultBranch": "feature",
    },
    ("PUT", "/api/repositories/{owner}/{name}/collaborators/{username}"): {"permission": "admin"},
    ("POST", "/api/repositories/{owner}/{name}/fork"): {
        "name": "forked",
        "description": "d",
        "owner": "acme",
    },
    ("POST", "/api/repositories/{owner}/{name}/issues"): {
        "title": "t",
        "body": "b",
        "labels": ["bug"],
        "assignees": ["alice"],
        "milestone": 1,
    },
    ("PATCH", "/api/repositories/{owner}/{name}/issues/{number}"): {
        "title": "t",
        "body": "b",
        "state": "closed",
        "labels": ["bug"],
        "assignees": ["alice"],
        "milestone": 1,
    },
    ("POST", "/api/repositories/{owner}/{name}/issues/{number}/comments"): {"body": "c"},
    ("POST", "/api/repositories/{owner}/{name}/pulls"): {
        "title": "t",
        "body": "b",
        "head": "feature",
        "base": "main",
        "headRepository": {"owner": "alice", "name": "proj"},
        "assignees": ["alice"],
        "milestone": 1,
    },
    ("PATCH", "/api/repositories/{owner}/{name}/pulls/{number}"): {
        "title": "t",
        "body": "b",
        "state": "closed",
        "base": "main",
        "assignees": ["alice"],
        "milestone": 1,
    },
    ("POST", "/api/repositories/{owner}/{name}/pulls/{number}/comments"): {"body": "c"},
    ("PATCH", "/api/repositories/{owner}/{name}/issues/{number}/comments/{id}"): {"body": "c"},
    ("PATCH", "/api/repositories/{owner}/{name}/pulls/{number}/comments/{id}"): {"body": "c"},
    ("POST", "/api/repositories/{owner}/{name}/pulls/{number}/merge"): {
        "method": "squash",
        "message": "m",
        "sha": "0" * 40,
    },
    ("POST", "/api/webhooks/chat"): {
        "type": EVENT_TYPES[0],
        "repository": {"owner": "alice", "name": "proj"},
        "data": {"action": "opened"},
    },
    ("POST", "/api/chat/link/generate"): {"chatId": "chat-1", "serviceEmail": "alice@example.com"},
    ("POST", "/api/chat/link/verify"): {"token": "0" * 64, "serviceUserId": "1"},
    ("POST", "/api/chat/link/unlink"): {"chatId": "chat-1"},
    ("POST", "/api/chat/notifications/ack"): {"through": 1},
    ("POST", "/api/users/me/password"): {
        "currentPassword": PASSWORD,
        "newPassword": "another horse",
    },
    ("POST", "/api/users/me/tokens"): {
        "name": "ci",
        "expiresAt": "2099-01-01T00:00:00Z",
        "scopes": ["repo:read"],
        "repositories": ["alice/proj"],
    },
    ("POST", "/api/admin/users"): {
        "email": "made@example.com",
        "username": "made",
        "password": PASSWORD,
        "name": "Made",
        "isAdmin": False,
    },
    ("PATCH", "/api/admin/users/{username}"): {"disabled": False, "isAdmin": False},
    ("POST", "/api/repositories/{owner}/{name}/hooks"): {
        "url": "http://127.0.0.1:9/hook",
        "format": "json",
        "events": ["push"],
        "branches": "main",
        "secret": "s",
        "active": True,
    },
    ("PATCH", "/api/repositories/{owner}/{name}/hooks/{id}"): {
        "url": "http://127.0.0.1:9/hook",
        "format": "json",
        "events": ["push"],
        "branches": "main",
        "secret": "s",
        "active": False,
    },
}
VALID[("PUT", "/api/repositories/{owner}/{name}/branches/{branch}/protection")] = {
    "requiredStatusChecks": {"strict": True, "contexts": ["ci/test"]},
    "requiredPullRequestReviews": {
        "requiredApprovingReviewCount": 1,
        "requireCodeOwnerReviews": False,
    },
    "enforceAdmins": False,
    "allowForcePushes": False,
    "allowDeletions": False,
}
VALID[("POST", "/api/repositories/{owner}/{name}/statuses/{sha}")] = {
    "state": "success",
    "context": "ci/test",
    "targetUrl": "https://ci.example/1",
    "target_url": "https://ci.example/1",
    "description": "passed",
}
VALID[("POST", "/api/repositories/{owner}/{name}/pulls/{number}/reviews")] = {
    "event": "COMMENT",
    "body": "b",
    "comments": [{"path": "a.txt", "line": 1, "side": "RIGHT", "body": "c"}],
}
# A valid Ed25519 public key line (the type walk never reaches the parser's verdict).
_SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"
VALID[("POST", "/api/users/me/keys")] = {"title": "laptop", "key": _SSH_KEY}
VALID[("POST", "/api/repositories/{owner}/{name}/keys")] = {
    "title": "ci",
    "key": _SSH_KEY,
    "readOnly": True,
}
VALID[("POST", "/api/repositories/{owner}/{name}/pulls/{number}/requested_reviewers")] = {
    "reviewers": ["alice"],
    "teamReviewers": ["devs"],
}
VALID[("DELETE", "/api/repositories/{owner}/{name}/pulls/{number}/requested_reviewers")] = {
    "reviewers": ["alice"],
    "teamReviewers": ["devs"],
}
VALID[("PUT", "/api/notifications")] = {"lastReadAt": "2024-05-01T12:00:00Z"}
VALID[("PUT", "/api/notifications/threads/{id}/subscription")] = {"ignored": False}
VALID[("PUT", "/api/repositories/{owner}/{name}/issues/{number}/subscription")] = {"ignored": False}
_MILESTONE = {"title": "m", "description": "d", "dueOn": "2030-01-01T00:00:00Z", "state": "open"}
VALID[("POST", "/api/repositories/{owner}/{name}/milestones")] = _MILESTONE
VALID[("PATCH", "/api/repositories/{owner}/{name}/milestones/{number}")] = _MILESTONE
_LABEL = {"name": "ui", "color": "00ff00", "description": "d"}
VALID[("POST", "/api/repositories/{owner}/{name}/labels")] = _LABEL
VALID[("PATCH", "/api/repositories/{owner}/{name}/labels/{label}")] = _LABEL
VALID[("POST", "/api/repositories/{owner}/{name}/issues/{number}/reactions")] = {"content": "+1"}
VALID[("POST", "/api/repositories/{owner}/{name}/issues/{number}/comments/{id}/reactions")] = {
    "content": "+1"
}
_RELEASE = {
    "tagName": "v1",
    "targetCommitish": "main",
    "name": "n",
    "body": "b",
    "draft": False,
    "prerelease": False,
}
VALID[("POST", "/api/repositories/{owner}/{name}/releases")] = _RELEASE
VALID[("PATCH", "/api/repositories/{owner}/{name}/releases/{id}")] = _RELEASE
VALID[("POST", "/api/orgs")] = {"name": "neworg", "description": "d"}
VALID[("PATCH", "/api/orgs/{org}")] = {
    "description": "d",
    "displayName": "Acme",
    "requireTwoFactor": False,
}
VALID[("PUT", "/api/orgs/{org}/members/{username}")] = {"role": "member"}
VALID[("POST", "/api/orgs/{org}/teams")] = {
    "name": "other",
    "description": "d",
    "permission": "write",
}
VALID[("PATCH", "/api/orgs/{org}/teams/{team}")] = {
    "name": "renamed",
    "description": "d",
    "permission": "write",
}
VALID[("PUT", "/api/orgs/{org}/teams/{team}/repositories/{name}")] = {"permission": "write"}
_CREDENTIAL = {"id": "x", "rawId": "x", "type": "public-key", "response": {}}
VALID[("POST", "/api/users/me/2fa/webauthn/register/finish")] = {
    "credential": _CREDENTIAL,
    "name": "laptop",
}
VALID[("DELETE", "/api/users/me/2fa/webauthn/{id}")] = {"currentPassword": PASSWORD}
VALID[("POST", "/auth/sign-in/webauthn")] = {"challenge": "c"}
VALID[("POST", "/auth/sign-in/2fa")] = {"challenge": "c", "code": "123456"}
VALID[("POST", "/api/users/me/2fa/totp/confirm")] = {"code": "123456"}
VALID[("DELETE", "/api/users/me/2fa/totp")] = {"currentPassword": PASSWORD, "code": "123456"}
VALID[("POST", "/auth/sign-in/webauthn/finish")] = {"challenge": "c", "credential": _CREDENTIAL}
PATH_VALUES = {
    "org": "acme",
    "team": "devs",
    "owner": "alice",
    "name": "proj",
    "username": "bob",
    "branch": "main",
    "sha": "0" * 40,
    "label": "bug",
}
# The JSON types a property of each declared type must refuse, with values a lenient
# parser would take ("yes" and 1 as a boolean, "5" and 5.0 as an integer).
JSON_VALUES: dict[str, list[Any]] = {
    "string": ["x"],
    "integer": [5],
    "number": [1.5],
    "boolean": [True],
    "array": [[]],
    "object": [{}],
}
LENIENT: dict[str, list[Any]] = {
    "boolean": ["yes", "true", "on", "1", 1, 0],
    "integer": ["5", 5.0],
}


@pytest.fixture
def config(tmp_path):
    return make_config(tmp_path, chat__bot_key=BOT_KEY, webhooks__allowed_hosts=["127.0.0.1"])


@pytest.fixture
async def world(client, alice, bob, tmp_path):
    """alice/proj with branches main and feature, issue #1, pull request #2, chat link chat-1."""
    await create(client, alice, "proj", autoInit=True)
    work = tmp_path / "w"
    await git("clone", "-q", remote(client, alice, "alice", "proj"), str(work))
    await git("checkout", "-qb", "feature", cwd=work)
    (work / "f.txt").write_text("f\n")
    await git("add", "f.txt", cwd=work)
    await git("commit", "-qm", "feature", cwd=work)
    await git("push", "-q", "origin", "feature", cwd=work)
    resp = await client.post(
        "/api/repositories/alice/proj/issues", json={"title": "bug"}, headers=alice.headers
    )
    assert resp.status == 201
    resp = await client.post(
        "/api/repositories/alice/proj/pulls",
        json={"title": "pr", "head": "feature"},
        headers=alice.headers,
    )
    assert resp.status == 201
    for path in ("issues/1", "pulls/2"):  # comments 1 and 2
        resp = await client.post(
            f"/api/repositories/alice/proj/{path}/comments",
            json={"body": "c"},
            headers=alice.headers,
        )
        assert resp.status == 201
    bot = {"X-Chat-Bot-Key": BOT_KEY}
    resp = await client.post("/api/chat/link/generate", json={"chatId": "chat-1"}, headers=bot)
    token = (await resp.json())["token"]
    resp = await client.post(
        "/api/chat/link/verify",
        headers=alice.headers,
        json={"token": token, "serviceUserId": alice.id},
    )
    assert resp.status == 200, await resp.text()
    resp = await client.post("/api/orgs", json={"name": "acme"}, headers=alice.headers)
    assert resp.status == 201, await resp.text()
    resp = await client.post("/api/orgs/acme/teams", json={"name": "devs"}, headers=alice.headers)
    assert resp.status == 201, await resp.text()
    resp = await client.post(
        "/api/repositories/alice/proj/hooks",
        headers=alice.headers,
        json={"url": "http://127.0.0.1:9/hook", "active": False},
    )
    assert resp.status == 201, await resp.text()
    resp = await client.post(
        "/api/repositories/alice/proj/milestones", json={"title": "m1"}, headers=alice.headers
    )
    assert resp.status == 201, await resp.text()
    resp = await client.post(
        "/api/repositories/alice/proj/labels", json={"name": "bug"}, headers=alice.headers
    )
    assert resp.status == 201, await resp.text()
    resp = await client.post(  # release 1, a draft: no tag
        "/api/repositories/alice/proj/releases",
        json={"tagName": "v0", "draft": True},
        headers=alice.headers,
    )
    assert resp.status == 201, await resp.text()
    return {"owner": alice}


def _resolve(spec: dict, schema: dict) -> dict:
    """The schema behind $ref and allOf: [one] (a nested schema with a description), and
    anyOf: [$ref, {nullable}] (a nested schema that may be null)."""
    outer = {key: value for key, value in schema.items() if key not in ("$ref", "allOf", "anyOf")}
    if len(schema.get("allOf", ())) == 1:
        schema = schema["allOf"][0]
    choices = schema.get("anyOf", ())
    if len(choices) == 2 and any(c.get("nullable") for c in choices):
        outer["nullable"] = True
        schema = next(c for c in choices if "$ref" in c)
    while "$ref" in schema:
        schema = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return {**schema, **outer}


def _properties(spec: dict, schema: dict, prefix: tuple = ()) -> Iterator[tuple[tuple, dict]]:
    """(path, schema) of every property reachable in a body; array items as index 0."""
    schema = _resolve(spec, schema)
    for name, prop in schema.get("properties", {}).items():
        prop = _resolve(spec, prop)
        path = prefix + (name,)
        yield path, prop
        if prop.get("type") == "object":
            yield from _properties(spec, prop, path)
        elif prop.get("type") == "array" and "items" in prop:
            items = _resolve(spec, prop["items"])
            yield path + (0,), items
            if items.get("type") == "object":
                yield from _properties(spec, items, path + (0,))


def _wrong_values(prop: dict) -> list[Any]:
    """Every JSON value of another type than prop's (null too, unless prop is nullable)."""
    declared = prop["type"]
    wrong = [
        value
        for kind, values in JSON_VALUES.items()
        if kind != declared and not (kind == "integer" and declared == "number")
        for value in values
    ]
    if not prop.get("nullable"):
        wrong.append(None)
    return wrong + LENIENT.get(declared, [])


def _with(body: dict, path: tuple, value: Any) -> dict:
    """A copy of body with the property at path set to value."""
    changed = copy.deepcopy(body)
    target = changed
    for key in path[:-1]:
        if isinstance(key, int):
            # An array item: the array holds just the wrong one.
            target[:] = [copy.deepcopy(target[0]) if target else {}]
        target = target[key]
    if isinstance(path[-1], int):
        target[:] = [value]
    else:
        target[path[-1]] = value
    return changed


def _snapshot(db_path) -> dict[str, list]:
    """Every row of every table, read through a connection of its own."""
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
            # Renewed every two seconds by the server itself, whatever the requests do.
            if row[0] != "leases"
        ]
        return {
            table: sorted(conn.execute(f'SELECT * FROM "{table}"').fetchall(), key=repr)
            for table in tables
        }
    finally:
        conn.close()


async def _branches(client, user) -> dict:
    resp = await client.get("/api/repositories/alice/proj/branches", headers=user.headers)
    return {b["name"]: b["commit"]["oid"] for b in (await resp.json())["branches"]}


async def test_every_body_field_refuses_every_other_json_type(client, world, events, tmp_path):
    owner = world["owner"]
    spec = await (await client.get("/api/openapi.json")).json()
    operations = {
        (method.upper(), path): op["requestBody"]["content"]["application/json"]
        for path, ops in spec["paths"].items()
        for method, op in ops.items()
        if "application/json" in op.get("requestBody", {}).get("content", {})
    }
    # Every documented JSON body is walked: a new one needs a valid body here.
    assert set(operations) == set(VALID), set(operations) ^ set(VALID)
    db_path = tmp_path / "data" / "hubsvc.db"
    before, branches = _snapshot(db_path), await _branches(client, owner)
    repo_dirs = sorted(p.name for p in (tmp_path / "data").rglob("*.git"))
    sent = 0
    for (method, path), content in sorted(operations.items()):
        pull = "/pulls/" in path
        url = path.format(**PATH_VALUES, number="2" if pull else "1", id="2" if pull else "1")
        headers = (
            {**owner.headers, "X-Chat-Bot-Key": BOT_KEY}
            if path.endswith(("/generate", "/ack"))
            else owner.headers
        )
        walked = list(_properties(spec, content["schema"]))
        assert walked, (method, path)
        for prop_path, prop in walked:
            name = ".".join(str(key) for key in prop_path)
            if not isinstance(prop_path[-1], int):
                # The valid body gives every property, so only the wrong one is wrong.
                holder = VALID[method, path]
                for key in prop_path[:-1]:
                    holder = holder[key]
                assert prop_path[-1] in holder, f"{method} {path}: no valid value for {name}"
            for value in _wrong_values(prop):
                body = _with(VALID[method, path], prop_path, value)
                resp = await client.request(method, url, json=body, headers=headers)
                text = await resp.text()
                assert resp.status == 400, (method, path, name, value, resp.status, text)
                error = (await resp.json())["error"]
                assert error.startswith(name + ": "), (method, path, name, value, error)
                sent += 1
    assert sent > 300  # every field of every body, each with every wrong type
    # Refused requests changed nothing: no row, no ref, no repository, no event.
    assert _snapshot(db_path) == before
    assert await _branches(client, owner) == branches
    assert sorted(p.name for p in (tmp_path / "data").rglob("*.git")) == repo_dirs
    assert events.events == []


async def test_string_yes_is_not_a_boolean(client, alice):
    prefs = "/api/users/me/settings/preferences"
    resp = await client.post(prefs, json={"notifications": {"web": False}}, headers=alice.headers)
    assert (await resp.json())["preferences"]["notifications"]["web"] is False
    resp = await client.post(prefs, json={"notifications": {"web": "yes"}}, headers=alice.headers)
    assert resp.status == 400
    assert await resp.json() == {"error": "notifications.web: must be true or false"}
    for value in ("true", "on", "1", 1, 0, None):
        resp = await client.post(
            prefs, json={"notifications": {"web": value}}, headers=alice.headers
        )
        assert resp.status == 400, value
        assert (await resp.json())["error"].startswith("notifications.web: "), value
    resp = await client.patch(
        "/api/users/me/settings",
        headers=alice.headers,
        json={"preferences": {"notifications": {"web": "yes"}}},
    )
    assert resp.status == 400
    assert (await resp.json())["error"] == "preferences.notifications.web: must be true or false"
    settings = await (await client.get("/api/users/me/settings", headers=alice.headers)).json()
    assert settings["settings"]["preferences"]["notifications"]["web"] is False
    resp = await client.post(prefs, json={"notifications": "yes"}, headers=alice.headers)
    assert (await resp.json())["error"] == "notifications: must be an object"


async def test_query_parameters_still_parse_their_text(client, alice):
    await create(client, alice, "proj", autoInit=True)
    resp = await client.get(
        "/api/repositories/alice/proj/pulls",
        params={"limit": "5", "ignoreUnknown": "true", "other": "x"},
    )
    assert resp.status == 200, await resp.text()
    resp = await client.get(
        "/api/repositories/alice/proj/file", params={"path": "README.md", "return": "1"}
    )
    assert resp.status == 200 and not resp.content_type.startswith("application/json")
    resp = await client.get("/api/search", params={"q": "proj", "limit": "1", "offset": "0"})
    assert resp.status == 200


def test_integer_fields_take_only_json_integers():
    class Counted(Base):
        count = Int()

    for value in ("5", 5.0, 5.5, True, None, [5], {}):
        with pytest.raises(ValidationError):
            Counted().load({"count": value})
    assert Counted().load({"count": 5}) == {"count": 5}
