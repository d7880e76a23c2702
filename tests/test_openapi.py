"""The OpenAPI document describes every route, and only routes that exist."""

from __future__ import annotations


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
