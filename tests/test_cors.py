"""CORS for the configured origins only."""

from __future__ import annotations

from hubsvc.app import create_app

from .conftest import make_config


async def test_configured_origin_gets_cors_headers(aiohttp_client, tmp_path):
    config = make_config(tmp_path, cors__origins=["https://app.example"])
    client = await aiohttp_client(create_app(config))
    resp = await client.options(
        "/api/users/me",
        headers={
            "Origin": "https://app.example",
            "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "Authorization",
        },
    )
    assert resp.status == 200
    assert resp.headers["Access-Control-Allow-Origin"] == "https://app.example"
    resp = await client.get("/health", headers={"Origin": "https://app.example"})
    assert resp.headers["Access-Control-Allow-Origin"] == "https://app.example"
    resp = await client.get("/health", headers={"Origin": "https://evil.example"})
    assert "Access-Control-Allow-Origin" not in resp.headers


async def test_no_origins_no_cors(client):
    resp = await client.get("/health", headers={"Origin": "https://app.example"})
    assert "Access-Control-Allow-Origin" not in resp.headers
