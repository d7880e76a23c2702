"""The OpenAPI document describes every route, and only routes that exist."""

from __future__ import annotations

import re


def _app_operations(app) -> set[tuple[str, str]]:
    found = set()
    for route in app.router.routes():
        if route.method in ("HEAD", "OPTIONS", "*"):
            continue
        info = route.resource.get_info()
        found.add((info.get("formatter") or info.get("path"), route.method.lower()))
    return found


async def test_document_matches_the_routes(client):
    resp = await client.get("/api/openapi.json")
    spec = await resp.json()
    assert spec["openapi"].startswith("3.")
    documented = {(path, method) for path, ops in spec["paths"].items() for method in ops}
    assert documented == _app_operations(client.app)


async def test_operations_have_answers_and_errors(client):
    spec = await (await client.get("/api/openapi.json")).json()
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            assert op["summary"], (path, method)
            assert "500" in op["responses"] and "429" in op["responses"]
            assert any(
                code.startswith("2") or code in ("101", "304") for code in op["responses"]
            ), (path, method)
            if "security" in op:
                assert "401" in op["responses"]
    sign_up = spec["paths"]["/auth/sign-up"]["post"]
    assert "requestBody" in sign_up and "201" in sign_up["responses"]
    assert "SignUp" in spec["components"]["schemas"]


async def test_a_credential_refused_anywhere_is_documented(client, alice):
    """Every operation lists 401 and 403: any credential is checked, and a token's scopes
    or the chat bot's allow-list can refuse any route, public ones too."""
    spec = await (await client.get("/api/openapi.json")).json()
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            assert {"401", "403"} <= set(op["responses"]), (method, path)
            assert {"bearer": []} in op["security"], (method, path)
    resp = await client.post(
        "/api/users/me/tokens",
        json={"name": "narrow", "scopes": ["issues:read"]},
        headers=alice.headers,
    )
    narrow = {"Authorization": f"Bearer {(await resp.json())['secret']}"}
    # A public operation, a scope the token lacks: 403; a token that is not one: 401.
    resp = await client.get("/api/users/alice", headers=narrow)
    assert resp.status == 403, await resp.text()
    resp = await client.get("/api/users/alice", headers={"Authorization": "Bearer nope"})
    assert resp.status == 401, await resp.text()


def _allows(schema: dict, value: object) -> bool:
    """Whether value fits the few JSON Schema keywords path parameters use."""
    if schema["type"] == "integer":
        return isinstance(value, int) and schema["minimum"] <= value <= schema["maximum"]
    return isinstance(value, str) and re.search(schema.get("pattern", ""), value) is not None


def _path_parameter(spec: dict, path: str, method: str, name: str) -> dict:
    params = spec["paths"][path][method]["parameters"]
    return next(p["schema"] for p in params if p["in"] == "path" and p["name"] == name)


async def test_path_parameters_say_what_the_handlers_accept(client, alice):
    """Numbers and ids are integers, commits hex, names as validated, kinds enums; a value
    the document refuses is one the service refuses (404), one it allows reaches the data."""
    spec = await (await client.get("/api/openapi.json")).json()
    resp = await client.post(
        "/api/repositories", json={"name": "proj", "autoInit": True}, headers=alice.headers
    )
    assert resp.status == 201, await resp.text()
    base = "/api/repositories/alice/proj"
    resp = await client.post(f"{base}/issues", json={"title": "one"}, headers=alice.headers)
    assert resp.status == 201, await resp.text()
    commits = await (await client.get(f"{base}/commits", headers=alice.headers)).json()
    oid = commits["commits"][0]["oid"]
    issue = "/api/repositories/{owner}/{name}/issues/{number}"
    diff = "/api/repositories/{owner}/{name}/commits/{oid}/diff"
    cases = [
        (issue, "number", 1, f"{base}/issues/1", True),
        (issue, "number", 0, f"{base}/issues/0", False),
        (issue, "number", -1, f"{base}/issues/-1", False),
        (issue, "number", "x", f"{base}/issues/x", False),
        (issue, "owner", "alice", f"{base}/issues/1", True),
        (issue, "name", "proj", f"{base}/issues/1", True),
        (diff, "oid", oid, f"{base}/commits/{oid}/diff", True),
        (diff, "oid", oid[:7], f"{base}/commits/{oid[:7]}/diff", True),
        (diff, "oid", "main", f"{base}/commits/main/diff", False),
    ]
    for path, name, value, url, valid in cases:
        schema = _path_parameter(spec, path, "get", name)
        assert _allows(schema, value) is valid, (path, name, value, schema)
        resp = await client.get(url, headers=alice.headers)
        assert (resp.status == 200) is valid, (url, resp.status, await resp.text())
    assert _path_parameter(spec, "/api/users/me/tokens/{id}", "delete", "id")["type"] == "integer"
    pulls = "/api/repositories/{owner}/{name}/pulls/{number}.{kind}"
    assert _path_parameter(spec, pulls, "get", "kind")["enum"] == ["diff", "patch"]
    ui = _path_parameter(spec, "/ui/{file}", "get", "file")["enum"]
    resp = await client.get(f"/ui/{ui[0]}")
    assert resp.status == 200 and "app.js" in ui


def _resolve(spec: dict, ref: str) -> dict:
    """An operationRef (#/paths/<escaped path>/<method>) as (path, operation)."""
    _, _, escaped, method = ref.split("/")
    path = escaped.replace("~1", "/").replace("~0", "~")
    return path, spec["paths"][path][method]


async def test_links_lead_from_what_is_made_to_what_uses_it(client, alice):
    """Each link names an operation of the document and fills its path from the request
    or the answer; followed by hand, create → read works."""
    spec = await (await client.get("/api/openapi.json")).json()
    made = spec["paths"]["/api/repositories"]["post"]["responses"]["201"]["links"]
    repo = "/api/repositories/{owner}/{name}"
    for method in ("get", "patch", "delete"):
        path, _ = _resolve(spec, made[method]["operationRef"])
        assert path == repo
        assert made[method]["parameters"] == {
            "owner": "$response.body#/repo/owner/username",
            "name": "$response.body#/repo/name",
        }
    count = 0
    for ops in spec["paths"].values():
        for op in ops.values():
            for response in op["responses"].values():
                for link in response.get("links", {}).values():
                    path, _ = _resolve(spec, link["operationRef"])
                    assert set(link["parameters"]) <= set(re.findall(r"{(\w+)}", path)), link
                    count += 1
    assert count > 100
    # POST issues → GET the issue: the number from the answer, owner and name from the path.
    link = spec["paths"][repo + "/issues"]["post"]["responses"]["201"]["links"]["get"]
    assert link["parameters"]["number"] == "$response.body#/issue/number"
    resp = await client.post(
        "/api/repositories", json={"name": "proj", "autoInit": True}, headers=alice.headers
    )
    resp = await client.post(
        "/api/repositories/alice/proj/issues", json={"title": "one"}, headers=alice.headers
    )
    number = (await resp.json())["issue"]["number"]
    resp = await client.get(f"/api/repositories/alice/proj/issues/{number}", headers=alice.headers)
    assert resp.status == 200, await resp.text()


async def test_a_body_is_required_where_an_empty_one_is_refused(client, alice):
    """An empty body reads as {}: optional where every field is (schemathesis found PATCH
    and PUT operations taking no body that the document said required one)."""
    spec = await (await client.get("/api/openapi.json")).json()
    settings = spec["paths"]["/api/users/me/settings"]["patch"]["requestBody"]
    assert settings["required"] is False
    resp = await client.patch("/api/users/me/settings", headers=alice.headers)
    assert resp.status == 200, await resp.text()
    create = spec["paths"]["/api/repositories"]["post"]["requestBody"]
    assert create["required"] is True
    resp = await client.post("/api/repositories", headers=alice.headers)
    assert resp.status == 400, await resp.text()


async def test_a_chat_id_in_a_path_is_any_text(client, alice):
    """A link's status for an id longer than a link's may be: not linked, as documented."""
    spec = await (await client.get("/api/openapi.json")).json()
    path = "/api/chat/link/status/{chatId}"
    assert _path_parameter(spec, path, "get", "chatId") == {"type": "string", "minLength": 1}
    resp = await client.get("/api/chat/link/status/" + "0" * 65, headers=alice.headers)
    assert resp.status == 404, await resp.text()
