"""GET /metrics of a real server process, read with prometheus-client's own parser after
real traffic (an API read, a push and a clone with stock git, a WebSocket), and refused
to everyone without the metrics secret, administrators and their tokens included."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import time
import urllib.error
import urllib.request

import aiohttp
import pytest
from prometheus_client.parser import text_string_to_metric_families

from hubsvc.app import create_app

from .conftest import make_config
from .server import ROOT, ServerProcess, free_port, seed_owner

SECRET = "metrics-secret-0123456789"
GIT_ENV = {
    **os.environ,
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "T",
    "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "T",
    "GIT_COMMITTER_EMAIL": "t@example.com",
}


def fetch(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")


def scrape(url: str) -> dict[str, list]:
    """family name -> its samples, as Prometheus would read them."""
    status, text = fetch(url, {"Authorization": f"Bearer {SECRET}"})
    assert status == 200, text
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


def value(families: dict, family: str, sample: str, **labels: str) -> float:
    """The one sample of family named sample whose labels include labels (0: none yet)."""
    found = [
        s.value
        for s in families.get(family, [])
        if s.name == sample and labels.items() <= s.labels.items()
    ]
    assert len(found) <= 1, (family, labels, found)
    return found[0] if found else 0.0


def git(*args: str, cwd=None) -> None:
    subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True)


async def socket_traffic(server: ServerProcess, token: str) -> int:
    """A WebSocket subscribed to owner/proj, held while an issue is opened: messages read."""
    async with aiohttp.ClientSession() as session:
        ws = await session.ws_connect(f"ws://127.0.0.1:{server.port}/ws?token={token}")
        got = [await ws.receive_json(timeout=10)]
        assert got[0]["type"] == "connected"
        await ws.send_json({"type": "subscribe", "repository": {"owner": "owner", "name": "proj"}})
        got.append(await ws.receive_json(timeout=10))
        headers = {"Authorization": f"Bearer {token}"}
        status, _ = await asyncio.to_thread(
            server.request, "POST", "/api/repositories/owner/proj/issues", {"title": "t"}, headers
        )
        assert status == 201
        while got[-1].get("type") != "notification":
            got.append(await ws.receive_json(timeout=10))
        families = await asyncio.to_thread(scrape, server.url + "/metrics")
        # Read while the socket is open: the gauge counts it.
        assert value(families, "hubsvc_websocket_connections", "hubsvc_websocket_connections") >= 1
        await ws.close()
        return len(got)


def test_metrics_after_real_traffic_and_refused_without_the_secret(tmp_path):
    metrics_port = free_port()
    server = ServerProcess(
        tmp_path / "data",
        {"metrics": {"token": SECRET, "port": metrics_port}},
    ).start()
    try:
        headers, url = seed_owner(server)
        before = scrape(server.url + "/metrics")
        # An API read, a push and a clone with stock git, a WebSocket.
        status, _ = server.request("GET", "/api/repositories/owner/proj", headers=headers)
        assert status == 200
        work = tmp_path / "work"
        work.mkdir()
        git("init", "-q", "-b", "main", cwd=work)
        (work / "README").write_text("hello\n")
        git("add", "README", cwd=work)
        git("commit", "-qm", "first", cwd=work)
        git("push", "-q", url, "main", cwd=work)
        git("clone", "-q", url, str(tmp_path / "clone"))
        token = headers["Authorization"].split()[1]
        read = asyncio.run(socket_traffic(server, token))
        after = scrape(server.url + "/metrics")
        # The same on the listener of its own.
        beside = scrape(f"http://127.0.0.1:{metrics_port}/metrics")

        http = "hubsvc_http_request_duration_seconds"
        repo = {"method": "GET", "route": "/api/repositories/{owner}/{name}", "status": "200"}
        assert (
            value(after, http, http + "_count", **repo)
            == value(before, http, http + "_count", **repo) + 1
        )
        assert value(after, http, http + "_bucket", le="+Inf", **repo) >= 1
        # Route templates, never raw paths.
        routes = {s.labels["route"] for s in after[http]}
        assert "/api/repositories/owner/proj" not in routes
        assert "/{owner}/{name}/git-receive-pack" in routes

        for service in ("git-receive-pack", "git-upload-pack"):
            ok = {"service": service, "transport": "http"}
            assert (
                value(
                    after,
                    "hubsvc_git_operations",
                    "hubsvc_git_operations_total",
                    outcome="ok",
                    **ok,
                )
                >= 1
            )
            assert (
                value(
                    after, "hubsvc_git_bytes", "hubsvc_git_bytes_total", direction="received", **ok
                )
                > 0
            )
            assert (
                value(after, "hubsvc_git_bytes", "hubsvc_git_bytes_total", direction="sent", **ok)
                > 0
            )
            duration = "hubsvc_git_operation_duration_seconds"
            assert value(after, duration, duration + "_count", **ok) >= 1
        sent = "hubsvc_websocket_messages_sent"
        assert value(after, sent, sent + "_total") - value(before, sent, sent + "_total") >= read
        # The push and the issue are events: the head moved; the consumers keep up.
        head = value(after, "hubsvc_event_log_head", "hubsvc_event_log_head")
        assert head > value(before, "hubsvc_event_log_head", "hubsvc_event_log_head")
        lag = {s.labels["consumer"] for s in after["hubsvc_consumer_lag_events"]}
        assert {"email-notify", "pull-sync", "hooks"} <= lag
        for queue in ("outbox", "hooks", "mail"):
            assert value(after, "hubsvc_queue_pending", "hubsvc_queue_pending", queue=queue) == 0
            assert value(after, "hubsvc_queue_failed", "hubsvc_queue_failed", queue=queue) == 0
        transactions = "hubsvc_db_transaction_duration_seconds"
        for kind in ("read", "write"):
            grew = value(after, transactions, transactions + "_count", kind=kind)
            assert grew > value(before, transactions, transactions + "_count", kind=kind)
        assert value(after, "hubsvc_lease_held", "hubsvc_lease_held") == 1
        assert value(after, "hubsvc_db_connections_max", "hubsvc_db_connections_max") >= 1
        assert "hubsvc_redis_up" not in after  # no Redis configured: no such figure
        assert value(after, "process_start_time_seconds", "process_start_time_seconds") > 0
        assert value(after, "process_resident_memory_bytes", "process_resident_memory_bytes") > 0
        assert set(beside) == set(after)

        # Refused to everyone else, with the same 404 as a path that does not exist.
        status, pat = server.request(
            "POST", "/api/users/me/tokens", {"name": "all", "scopes": ["admin"]}, headers
        )
        assert status == 201, pat
        # The first account is an administrator: the admin routes answer it.
        assert server.request("GET", "/api/admin/deliveries", headers=headers)[0] == 200
        for who in (
            {},
            headers,  # the administrator's sign-in token
            {"Authorization": f"Bearer {pat['secret']}"},  # an admin-scoped token
            {"Authorization": "Bearer not-the-secret"},
            {"Authorization": f"Basic {SECRET}"},
        ):
            status, body = fetch(server.url + "/metrics", who)
            assert (status, "hubsvc_" in body) == (404, False), (who, status, body[:200])
        status, _ = fetch(f"http://127.0.0.1:{metrics_port}/metrics", headers)
        assert status == 404  # the token, when set, is asked on the listener too
    finally:
        assert server.stop() == 0


async def test_without_a_token_metrics_is_not_on_the_api_port(client, alice):
    """No [metrics] token (the default): 404 on the API's port, whoever asks."""
    for who in ({}, alice.headers, {"Authorization": "Bearer "}):
        resp = await client.get("/metrics", headers=who)
        assert resp.status == 404, await resp.text()
        assert (await resp.json()) == {"error": "not found"}


def test_postgres_and_redis_link_state_lag_and_pool(tmp_path, postgres_url):
    """On PostgreSQL with a Redis of the test's own: the pool, the consumers' lag, and
    hubsvc_redis_up turning 0 once that Redis is stopped (the process keeps answering)."""
    if shutil.which("redis-server") is None:
        if os.environ.get("HUBSVC_TEST_REDIS_URL"):
            pytest.fail("HUBSVC_TEST_REDIS_URL is set but redis-server is not on PATH")
        pytest.skip("needs redis-server on PATH for a Redis the test may stop")
    redis_port = free_port()
    redis = subprocess.Popen(
        ["redis-server", "--port", str(redis_port), "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    server = None
    try:
        import redis as redis_client

        link = redis_client.Redis(port=redis_port)
        for _ in range(100):
            try:
                link.ping()
                break
            except redis_client.ConnectionError:
                time.sleep(0.05)
        link.close()
        server = ServerProcess(
            tmp_path / "data",
            {
                "metrics": {"token": SECRET},
                "database": {"url": postgres_url, "pool_size": 4},
                "redis": {"url": f"redis://127.0.0.1:{redis_port}/0"},
            },
        ).start()
        headers, _ = seed_owner(server)
        status, _ = server.request(
            "POST", "/api/repositories/owner/proj/issues", {"title": "t"}, headers
        )
        assert status == 201
        up = scrape(server.url + "/metrics")
        assert value(up, "hubsvc_redis_up", "hubsvc_redis_up") == 1
        assert value(up, "hubsvc_db_connections_max", "hubsvc_db_connections_max") == 4
        assert value(up, "hubsvc_db_connections_in_use", "hubsvc_db_connections_in_use") >= 0
        assert value(up, "hubsvc_event_log_head", "hubsvc_event_log_head") >= 1
        consumers = {s.labels["consumer"] for s in up["hubsvc_consumer_lag_events"]}
        assert {"email-notify", "chat-notify", "pull-sync", "hooks"} <= consumers
        transactions = "hubsvc_db_transaction_duration_seconds"
        assert value(up, transactions, transactions + "_count", kind="write") > 0
        redis.terminate()
        redis.wait(10)
        down = scrape(server.url + "/metrics")
        assert value(down, "hubsvc_redis_up", "hubsvc_redis_up") == 0
        assert value(down, "hubsvc_database_up", "hubsvc_database_up") == 1
    finally:
        if server is not None:
            server.stop()
        if redis.poll() is None:
            redis.kill()
            redis.wait(10)


def promtool() -> str:
    """promtool (Debian's prometheus package): a skip in one line, a failure under .ci/run."""
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("HUBSVC_TEST_PROMTOOL"):
            pytest.fail("HUBSVC_TEST_PROMTOOL is set but promtool is not on PATH")
        pytest.skip("needs promtool (apt-get install prometheus)")
    return found


def test_readme_scrape_config_and_alerts_pass_promtool(tmp_path):
    """README's scrape config and alert rules as Prometheus reads them; the alerts fire on
    series that should fire them (tests/promtool/alerts_test.yml)."""
    tool = promtool()
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("\n## Operating\n") : readme.index("\n## The API at a glance\n")]
    config, rules = re.findall(r"```yaml\n(.*?)```", section, re.S)
    token = tmp_path / "token"
    token.write_text(SECRET)
    (tmp_path / "prometheus.yml").write_text(
        config.replace("/etc/prometheus/hubsvc-metrics-token", str(token))
    )
    (tmp_path / "rules.yml").write_text(rules)
    shutil.copy(ROOT / "tests" / "promtool" / "alerts_test.yml", tmp_path / "alerts_test.yml")
    for args in (
        ["check", "config", "prometheus.yml"],
        ["check", "rules", "rules.yml"],
        ["test", "rules", "alerts_test.yml"],
    ):
        done = subprocess.run([tool, *args], cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0, (args, done.stdout, done.stderr)


async def test_the_exposition_passes_promtool_lint(tmp_path, aiohttp_client):
    """What /metrics answers follows Prometheus's naming rules (promtool check metrics)."""
    tool = promtool()
    app = create_app(make_config(tmp_path, metrics__token=SECRET))
    client = await aiohttp_client(app)
    await client.get("/api/users/nobody")
    resp = await client.get("/metrics", headers={"Authorization": f"Bearer {SECRET}"})
    assert resp.status == 200
    text = await resp.text()
    assert "hubsvc_http_request_duration_seconds_bucket" in text
    done = subprocess.run([tool, "check", "metrics"], input=text, capture_output=True, text=True)
    assert done.returncode == 0 and not done.stdout.strip(), (done.stdout, done.stderr)
