"""The docs page and its assets come from this server only."""

from __future__ import annotations

import re


async def test_docs_page_loads_only_local_assets(client):
    resp = await client.get("/api/docs")
    assert resp.status == 200 and resp.content_type == "text/html"
    html = await resp.text()
    assert "http://" not in html and "https://" not in html
    for src in re.findall(r'(?:src|href)="([^"]+)"', html):
        asset = await client.get(src)
        assert asset.status == 200, src
        assert len(await asset.read()) > 0
    init = await (await client.get("/api/docs/init.js")).text()
    assert "/api/openapi.json" in init
    assert "default-src 'self'" in resp.headers["Content-Security-Policy"]


async def test_static_names_are_a_fixed_list(client):
    for name in ("index.html", "..%2f..%2fsetup.cfg", "swagger-initializer.js", "x"):
        resp = await client.get(f"/api/docs/static/{name}")
        assert resp.status == 404
        assert "error" in await resp.json()
