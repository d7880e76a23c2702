"""The token bucket per client and its headers."""

from __future__ import annotations

from hubsvc.app import create_app
from hubsvc.ratelimit import TokenBucket, address_group

from .conftest import make_config


def test_bucket_refills_at_its_rate():
    now = [0.0]
    bucket = TokenBucket(3, 1.0, clock=lambda: now[0])
    assert [bucket.take("a")[0] for _ in range(4)] == [True, True, True, False]
    assert bucket.take("b")[0] is True  # keys are independent
    allowed, _, wait = bucket.take("a")
    assert not allowed and 0 < wait <= 1
    now[0] += 1.0
    assert bucket.take("a")[0] is True
    assert bucket.take("a")[0] is False


async def test_headers_on_every_answer_and_429_after_the_burst(aiohttp_client, tmp_path):
    config = make_config(tmp_path, rate_limit__enabled=True, rate_limit__burst=5,
                         rate_limit__per_minute=60)
    client = await aiohttp_client(create_app(config))
    seen = []
    for _ in range(5):
        resp = await client.get("/nothing-here")
        assert resp.status == 404
        assert resp.headers["RateLimit-Limit"] == "5"
        seen.append(int(resp.headers["RateLimit-Remaining"]))
        assert int(resp.headers["RateLimit-Reset"]) >= 0
    assert seen == [4, 3, 2, 1, 0]
    resp = await client.get("/health")
    assert resp.status == 429
    body = await resp.json()
    assert body["error"] == "too many requests"
    assert body["retryAfter"] == int(resp.headers["Retry-After"]) >= 1
    assert resp.headers["RateLimit-Remaining"] == "0"


async def test_forwarded_address_only_from_trusted_proxies(aiohttp_client, tmp_path):
    config = make_config(tmp_path, rate_limit__enabled=True, rate_limit__burst=2,
                         server__trusted_proxies=["127.0.0.0/8"])
    client = await aiohttp_client(create_app(config))
    for ip in ("203.0.113.1", "203.0.113.2"):
        for _ in range(2):
            assert (await client.get("/health", headers={"X-Forwarded-For": ip})).status == 200
    assert (await client.get("/health", headers={"X-Forwarded-For": "203.0.113.1"})).status == 429


async def test_forwarded_header_ignored_from_untrusted_peer(aiohttp_client, tmp_path):
    config = make_config(tmp_path, rate_limit__enabled=True, rate_limit__burst=2)
    client = await aiohttp_client(create_app(config))
    for n in range(2):
        assert (await client.get("/health", headers={"X-Forwarded-For": f"198.51.100.{n}"})).status == 200
    resp = await client.get("/health", headers={"X-Forwarded-For": "198.51.100.9"})
    assert resp.status == 429


async def test_disabled_means_no_limit(client):
    for _ in range(120):
        resp = await client.get("/health")
    assert resp.status == 200
    assert "RateLimit-Limit" not in resp.headers


async def test_chat_users_count_apart_only_with_a_valid_bot_key(aiohttp_client, tmp_path):
    config = make_config(tmp_path, rate_limit__enabled=True, rate_limit__burst=2,
                         chat__bot_key="k" * 32)
    client = await aiohttp_client(create_app(config))
    # A wrong key with rotating chat ids still spends the address's bucket.
    for n in range(2):
        await client.get("/health", headers={"X-Chat-Bot-Key": "wrong", "X-Chat-User-Id": str(n)})
    resp = await client.get("/health", headers={"X-Chat-Bot-Key": "wrong", "X-Chat-User-Id": "9"})
    assert resp.status == 429
    # The real key gets a bucket per chat user (9 is not linked, hence 401, not 429).
    resp = await client.get("/health", headers={"X-Chat-Bot-Key": "k" * 32, "X-Chat-User-Id": "9"})
    assert resp.status == 401 and resp.headers["RateLimit-Remaining"] == "1"


def test_pruning_drops_the_least_recently_used_buckets_only():
    now = [0.0]
    bucket = TokenBucket(2, 0.001, clock=lambda: now[0], max_keys=3)
    assert [bucket.take("attacker")[0] for _ in range(3)] == [True, True, False]
    bucket.take("b")
    bucket.take("c")
    assert bucket.take("attacker")[0] is False  # touched: now the most recent
    bucket.take("d")  # a fourth key: the idlest one ("b") goes, not every bucket
    assert len(bucket) == 3 and "b" not in bucket and "c" in bucket
    assert bucket.take("attacker")[0] is False  # its spent budget survived the pruning


def test_ipv6_addresses_are_grouped_by_their_prefix():
    assert address_group("2001:db8:1:2::1") == address_group("2001:db8:1:2:ffff::9") \
        == "2001:db8:1:2::/64"
    assert address_group("2001:db8:1:3::1") != address_group("2001:db8:1:2::1")
    assert address_group("2001:db8:1:2::1", 48) == "2001:db8:1::/48"
    assert address_group("203.0.113.7") == "203.0.113.7"
    assert address_group("::ffff:203.0.113.7") == "203.0.113.7"
    assert address_group("not-an-ip") == "not-an-ip"


async def test_request_limit_counts_an_ipv6_64_as_one_client(aiohttp_client, tmp_path):
    config = make_config(tmp_path, rate_limit__enabled=True, rate_limit__burst=2,
                         server__trusted_proxies=["127.0.0.0/8"])
    client = await aiohttp_client(create_app(config))
    for n in range(2):
        resp = await client.get("/health", headers={"X-Forwarded-For": f"2001:db8::{n + 1}"})
        assert resp.status == 200
    resp = await client.get("/health", headers={"X-Forwarded-For": "2001:db8::ff:1"})
    assert resp.status == 429
    resp = await client.get("/health", headers={"X-Forwarded-For": "2001:db8:0:1::1"})
    assert resp.status == 200
