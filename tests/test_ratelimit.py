"""The token bucket per client and its headers."""

from __future__ import annotations

import base64

from hubsvc.app import create_app
from hubsvc.clients import address_group
from hubsvc.web.ratelimit import TokenBucket

from .conftest import make_config, sign_up
from .gitcli import git, remote
from .test_repos import create

MISSING = "/api/users/nobody"  # a cheap 404 that spends a token like any request


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
    config = make_config(
        tmp_path, rate_limit__enabled=True, rate_limit__burst=5, rate_limit__per_minute=60
    )
    client = await aiohttp_client(create_app(config))
    seen = []
    for _ in range(5):
        # Under /api/: a bare /name is a person's page now (the dashboard's HTML).
        resp = await client.get("/api/nothing-here")
        assert resp.status == 404
        assert resp.headers["RateLimit-Limit"] == "5"
        seen.append(int(resp.headers["RateLimit-Remaining"]))
        assert int(resp.headers["RateLimit-Reset"]) >= 0
    assert seen == [4, 3, 2, 1, 0]
    resp = await client.get("/api/users/nobody")
    assert resp.status == 429
    body = await resp.json()
    assert body["error"] == "too many requests"
    assert body["retryAfter"] == int(resp.headers["Retry-After"]) >= 1
    assert resp.headers["RateLimit-Remaining"] == "0"


async def test_forwarded_address_only_from_trusted_proxies(aiohttp_client, tmp_path):
    config = make_config(
        tmp_path,
        rate_limit__enabled=True,
        rate_limit__burst=2,
        rate_limit__per_minute=1,  # no refill between the requests, however slow
        server__trusted_proxies=["127.0.0.0/8"],
    )
    client = await aiohttp_client(create_app(config))
    for ip in ("203.0.113.1", "203.0.113.2"):
        for _ in range(2):
            assert (await client.get(MISSING, headers={"X-Forwarded-For": ip})).status == 404
    assert (await client.get(MISSING, headers={"X-Forwarded-For": "203.0.113.1"})).status == 429


async def test_forwarded_header_ignored_from_untrusted_peer(aiohttp_client, tmp_path):
    config = make_config(
        tmp_path, rate_limit__enabled=True, rate_limit__burst=2, rate_limit__per_minute=1
    )
    client = await aiohttp_client(create_app(config))
    for n in range(2):
        assert (
            await client.get(MISSING, headers={"X-Forwarded-For": f"198.51.100.{n}"})
        ).status == 404
    resp = await client.get(MISSING, headers={"X-Forwarded-For": "198.51.100.9"})
    assert resp.status == 429


async def test_disabled_means_no_limit(client):
    for _ in range(120):
        resp = await client.get(MISSING)
    assert resp.status == 404
    assert "RateLimit-Limit" not in resp.headers


async def test_chat_users_count_apart_only_with_a_valid_bot_key(aiohttp_client, tmp_path):
    config = make_config(
        tmp_path,
        rate_limit__enabled=True,
        rate_limit__burst=2,
        rate_limit__per_minute=1,  # at 60 a minute, a slow second refilled a token (CI)
        chat__bot_key="k" * 32,
    )
    client = await aiohttp_client(create_app(config))
    # A wrong key with rotating chat ids still spends the address's bucket.
    for n in range(2):
        await client.get(MISSING, headers={"X-Chat-Bot-Key": "wrong", "X-Chat-User-Id": str(n)})
    resp = await client.get(MISSING, headers={"X-Chat-Bot-Key": "wrong", "X-Chat-User-Id": "9"})
    assert resp.status == 429
    # The real key gets a bucket per chat user (9 is not linked, hence 401, not 429).
    resp = await client.get(MISSING, headers={"X-Chat-Bot-Key": "k" * 32, "X-Chat-User-Id": "9"})
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
    assert (
        address_group("2001:db8:1:2::1")
        == address_group("2001:db8:1:2:ffff::9")
        == "2001:db8:1:2::/64"
    )
    assert address_group("2001:db8:1:3::1") != address_group("2001:db8:1:2::1")
    assert address_group("2001:db8:1:2::1", 48) == "2001:db8:1::/48"
    assert address_group("203.0.113.7") == "203.0.113.7"
    assert address_group("::ffff:203.0.113.7") == "203.0.113.7"
    assert address_group("not-an-ip") == "not-an-ip"


async def test_request_limit_counts_an_ipv6_64_as_one_client(aiohttp_client, tmp_path):
    config = make_config(
        tmp_path,
        rate_limit__enabled=True,
        rate_limit__burst=2,
        rate_limit__per_minute=1,  # no refill between the requests, however slow
        server__trusted_proxies=["127.0.0.0/8"],
    )
    client = await aiohttp_client(create_app(config))
    for n in range(2):
        resp = await client.get(MISSING, headers={"X-Forwarded-For": f"2001:db8::{n + 1}"})
        assert resp.status == 404
    resp = await client.get(MISSING, headers={"X-Forwarded-For": "2001:db8::ff:1"})
    assert resp.status == 429
    resp = await client.get(MISSING, headers={"X-Forwarded-For": "2001:db8:0:1::1"})
    assert resp.status == 404


async def test_health_is_never_limited(aiohttp_client, tmp_path):
    config = make_config(
        tmp_path, rate_limit__enabled=True, rate_limit__burst=2, rate_limit__per_minute=1
    )
    client = await aiohttp_client(create_app(config))
    for _ in range(10):
        resp = await client.get("/health")
        assert resp.status == 200 and "RateLimit-Limit" not in resp.headers
        assert (await client.head("/health")).status == 200
    # Monitors polling it spent nothing of the address's budget.
    assert (await client.get(MISSING)).headers["RateLimit-Remaining"] == "1"


def _basic(username: str, secret: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{username}:{secret}".encode()).decode()}


async def _git_app(aiohttp_client, tmp_path, **limits):
    config = make_config(
        tmp_path,
        rate_limit__enabled=True,
        **{f"rate_limit__{key}": value for key, value in limits.items()},
    )
    client = await aiohttp_client(create_app(config))
    user = await sign_up(client, "ci")
    await create(client, user, "app", autoInit=True, visibility="private")
    return client, user


async def test_signed_in_git_has_its_own_budget(aiohttp_client, tmp_path):
    # Five API requests, then one a minute; the git budget is far larger.
    client, user = await _git_app(
        aiohttp_client, tmp_path, burst=5, per_minute=1, git_burst=100, git_per_minute=1
    )
    # Sign-up and create spent two of the five. CI clones as actions/checkout does: the
    # token in an extra header, so every request of the clone is signed in.
    auth = _basic(user.username, user.token)["Authorization"]
    for n in range(5):
        await git(
            "-c",
            f"http.extraHeader=Authorization: {auth}",
            "clone",
            "-q",
            remote(client, None, "ci", "app"),
            str(tmp_path / f"clone{n}"),
        )
    resp = await client.get("/api/users/me", headers=user.headers)
    assert resp.status == 200 and resp.headers["RateLimit-Remaining"] == "2"
    # The git answers count in the user's bucket: 5 clones x 3 requests (protocol v2:
    # refs, ls-refs, fetch), and this one.
    resp = await client.get(
        "/ci/app.git/info/refs?service=git-upload-pack", headers=_basic(user.username, user.token)
    )
    assert resp.status == 200
    assert resp.headers["RateLimit-Limit"] == "100" and resp.headers["RateLimit-Remaining"] == "84"
    # A password counts there too, once bcrypt accepted it (the first request).
    first = await client.get(
        "/ci/app.git/info/refs?service=git-upload-pack", headers=_basic("ci", user.password)
    )
    again = await client.get(
        "/ci/app.git/info/refs?service=git-upload-pack", headers=_basic("ci", user.password)
    )
    assert first.status == again.status == 200
    assert first.headers["RateLimit-Limit"] == "5" and again.headers["RateLimit-Limit"] == "100"


async def test_git_budget_spent_leaves_the_api_alone(aiohttp_client, tmp_path):
    client, user = await _git_app(
        aiohttp_client, tmp_path, burst=10, per_minute=1, git_burst=2, git_per_minute=1
    )
    url = "/ci/app.git/info/refs?service=git-upload-pack"
    statuses = [(await client.get(url, headers=_basic("ci", user.token))).status for _ in range(3)]
    assert statuses == [200, 200, 429]
    resp = await client.get("/api/users/me", headers=user.headers)
    assert resp.status == 200 and resp.headers["RateLimit-Remaining"] == "7"


async def test_a_push_past_the_git_budget_prints_why(aiohttp_client, tmp_path):
    client, user = await _git_app(
        aiohttp_client, tmp_path, burst=100, git_burst=6, git_per_minute=1
    )
    auth = ["-c", f"http.extraHeader=Authorization: {_basic('ci', user.token)['Authorization']}"]
    url = remote(client, None, "ci", "app")
    work = tmp_path / "w"
    await git(*auth, "clone", "-q", url, str(work))  # three requests (protocol v2)
    await git("commit", "-q", "--allow-empty", "-m", "one", cwd=work)
    await git(*auth, "push", "-q", "origin", "main", cwd=work)  # refs and POST: five
    before = await (
        await client.get("/api/repositories/ci/app/branches", headers=user.headers)
    ).json()
    await git("commit", "-q", "--allow-empty", "-m", "two", cwd=work)
    code, _, err = await git(*auth, "push", "origin", "main", cwd=work, check=False)
    # The refs take the last token; the POST is refused inside git's protocol, so git
    # prints the reason rather than "RPC failed; HTTP 429".
    assert code != 0 and "remote: too many requests" in err and "RPC failed" not in err, err
    after = await (
        await client.get("/api/repositories/ci/app/branches", headers=user.headers)
    ).json()
    assert after == before


async def test_anonymous_and_unproven_git_count_per_address(aiohttp_client, tmp_path):
    client, user = await _git_app(aiohttp_client, tmp_path, burst=5, per_minute=1, git_burst=100)
    url = "/ci/app.git/info/refs?service=git-upload-pack"
    # Anonymous, a made-up user and a wrong password: no bucket of their own.
    for headers in ({}, _basic("nobody", "guess-guess"), _basic("ci", "wrong password")):
        resp = await client.get(url, headers=headers)
        assert resp.status == 401 and resp.headers["RateLimit-Limit"] == "5"
    assert (await client.get(url, headers=_basic("ci", "wrong password"))).status == 429


async def test_a_fetch_past_the_git_budget_prints_why(aiohttp_client, tmp_path):
    client, user = await _git_app(
        aiohttp_client, tmp_path, burst=100, git_burst=4, git_per_minute=1
    )
    auth = ["-c", f"http.extraHeader=Authorization: {_basic('ci', user.token)['Authorization']}"]
    url = remote(client, None, "ci", "app")
    work = tmp_path / "w"
    await git(*auth, "clone", "-q", url, str(work))  # three requests (protocol v2)
    # The refs take the last token; the POST after them is refused inside git's protocol.
    code, _, err = await git(*auth, "fetch", "origin", cwd=work, check=False)
    assert code != 0 and "remote error: too many requests" in err, err
    assert "429" not in err and "expected" not in err, err
