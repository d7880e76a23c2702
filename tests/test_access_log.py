"""The access log of a real server process names the client as the rate limits do."""

from __future__ import annotations

import http.client
import json

from .server import ServerProcess


def _get(server: ServerProcess, path: str, source: str, forwarded: str) -> int:
    """GET path from the loopback address `source`, with an X-Forwarded-For header."""
    conn = http.client.HTTPConnection(
        "127.0.0.1", server.port, timeout=10, source_address=(source, 0)
    )
    try:
        conn.request("GET", path, headers={"X-Forwarded-For": forwarded})
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()


def test_forwarded_address_logged_only_from_a_trusted_proxy(tmp_path):
    # 127.0.0.2 plays the proxy; 127.0.0.1 is a client that forges the header.
    server = ServerProcess(
        tmp_path / "data",
        {"server": {"access_log_json": True, "trusted_proxies": ["127.0.0.2/32"]}},
    ).start()
    try:
        assert _get(server, "/api/users/via-proxy", "127.0.0.2", "203.0.113.9") == 404
        assert _get(server, "/api/users/forged", "127.0.0.1", "198.51.100.7") == 404
        assert _get(server, "/api/users/chain", "127.0.0.2", "198.51.100.7, 203.0.113.10") == 404
    finally:
        assert server.stop() == 0
    entries = [json.loads(line) for line in server.logs().splitlines() if line.startswith("{")]
    remote = {e["path"]: e["remote"] for e in entries if "path" in e}
    assert remote["/api/users/via-proxy"] == "203.0.113.9"
    assert remote["/api/users/forged"] == "127.0.0.1"
    # The nearest address the proxy did not add itself is the client's.
    assert remote["/api/users/chain"] == "203.0.113.10"


def test_plain_lines_name_the_client_with_and_without_trusted_proxies(tmp_path):
    # run.py tells the plain access logger once whether any proxy is trusted.
    for proxies, expected in ((["127.0.0.2/32"], "203.0.113.9"), ([], "127.0.0.2")):
        server = ServerProcess(
            tmp_path / f"data{len(proxies)}", {"server": {"trusted_proxies": proxies}}
        ).start()
        try:
            assert _get(server, "/api/users/via-proxy", "127.0.0.2", "203.0.113.9") == 404
            assert _get(server, "/api/users/forged", "127.0.0.1", "198.51.100.7") == 404
        finally:
            assert server.stop() == 0
        lines = server.logs().splitlines()
        assert any(f'{expected} "GET /api/users/via-proxy" 404' in line for line in lines), lines
        assert any('127.0.0.1 "GET /api/users/forged" 404' in line for line in lines), lines
