"""What a request's shape decides is kept: its route by (method, path), its loaded query."""

from __future__ import annotations

from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from marshmallow import fields, post_load

from hubsvc.web import rest
from hubsvc.web.rest import read_query, shared
from hubsvc.web.routing import Resolver
from schemas.common import Base

from .conftest import sign_up
from .test_repos import create


def _router() -> web.UrlDispatcher:
    app = web.Application()

    async def one(request: web.Request) -> web.Response:
        return web.Response(text="one")

    async def two(request: web.Request) -> web.Response:
        return web.Response(text="two")

    app.router.add_get("/r/{owner}/{name}/file", one)
    app.router.add_get("/r/{owner}/{name}/tree", two)
    app.freeze()
    return app.router


async def test_a_kept_route_gives_each_request_its_own_match(monkeypatch):
    router = _router()
    asked = []
    real = router.resolve

    async def counted(request):
        asked.append(request.path)
        return await real(request)

    monkeypatch.setattr(router, "resolve", counted)
    resolve = Resolver(router)
    first = await resolve(make_mocked_request("GET", "/r/alice/tool/file"))
    first["owner"] = "changed by a handler"
    again = await resolve(make_mocked_request("GET", "/r/alice/tool/file?x=1"))
    assert dict(again) == {"owner": "alice", "name": "tool"}
    assert again.route is first.route
    assert asked == ["/r/alice/tool/file"]  # the second came from memory
    other = await resolve(make_mocked_request("GET", "/r/bob/tool/file"))
    assert dict(other) == {"owner": "bob", "name": "tool"}
    tree = await resolve(make_mocked_request("GET", "/r/alice/tool/tree"))
    assert tree.route is not first.route


async def test_404_and_405_are_asked_each_time_and_the_memory_is_bounded(monkeypatch):
    router = _router()
    resolve = Resolver(router, most=2)
    for _ in range(2):
        missing = await resolve(make_mocked_request("GET", "/nowhere"))
        assert missing.http_exception.status == 404
        wrong = await resolve(make_mocked_request("POST", "/r/a/b/file"))
        assert wrong.http_exception.status == 405
    assert resolve._kept == {}
    for owner in ("a", "b", "c"):
        await resolve(make_mocked_request("GET", f"/r/{owner}/x/file"))
    assert list(resolve._kept) == [("GET", "/r/b/x/file"), ("GET", "/r/c/x/file")]


class _Query(Base):
    path = fields.String(required=True)
    page = fields.Integer(load_default=1)


class _Listy(Base):
    tags = fields.String(load_default="")

    @post_load
    def _split(self, data, **_):
        data["tags"] = data["tags"].split(",")  # a list: the handler may change it
        return data


async def test_a_loaded_query_is_kept_by_its_string_and_handed_out_fresh(monkeypatch):
    schema = shared(_Query)
    loads = []
    real = rest.load
    monkeypatch.setattr(rest, "load", lambda s, d, **k: loads.append(d) or real(s, d, **k))
    first = read_query(make_mocked_request("GET", "/x?path=a%2Fb&page=2"), schema)
    assert first == {"path": "a/b", "page": 2}
    first["page"] = 99  # a handler changing its copy
    again = read_query(make_mocked_request("GET", "/x?path=a%2Fb&page=2"), schema)
    assert again == {"path": "a/b", "page": 2}
    assert len(loads) == 1
    # Another string is loaded, failures included, each time.
    for _ in range(2):
        try:
            read_query(make_mocked_request("GET", "/x?page=zz"), schema)
        except Exception as exc:
            assert getattr(exc, "status", None) == 400
        else:
            raise AssertionError("a bad query loaded")
    assert len(loads) == 3
    # A schema made for one request, or an answer holding a list, is never kept.
    read_query(make_mocked_request("GET", "/x?path=c"), _Query())
    read_query(make_mocked_request("GET", "/x?path=c"), _Query())
    read_query(make_mocked_request("GET", "/x?tags=1"), shared(_Listy))
    read_query(make_mocked_request("GET", "/x?tags=1"), shared(_Listy))
    assert len(loads) == 7


async def test_kept_routes_and_queries_answer_each_repository_as_its_own(client, alice):
    bob = await sign_up(client, "bob")
    await create(client, alice, "tool", visibility="private")
    await create(client, bob, "tool", visibility="public")
    ids = set()
    for _ in range(2):
        resp = await client.get("/api/repositories/alice/tool", headers=alice.headers)
        assert resp.status == 200
        ids.add((await resp.json())["repo"]["id"])
        assert (await client.get("/api/repositories/alice/tool", headers=bob.headers)).status == 404
        resp = await client.get("/api/repositories/bob/tool", headers=alice.headers)
        assert resp.status == 200
        ids.add((await resp.json())["repo"]["id"])
        tree = await client.get("/api/repositories/alice/tool/tree?path=x", headers=bob.headers)
        assert tree.status == 404
    assert len(ids) == 2


async def test_a_long_path_or_query_is_answered_but_not_kept(monkeypatch):
    resolve = Resolver(_router())
    long_name = "n" * 600
    found = await resolve(make_mocked_request("GET", f"/r/alice/{long_name}/file"))
    assert dict(found) == {"owner": "alice", "name": long_name}
    assert resolve._kept == {}
    schema = shared(_Query)
    loads = []
    real = rest.load
    monkeypatch.setattr(rest, "load", lambda s, d, **k: loads.append(d) or real(s, d, **k))
    for _ in range(2):
        assert read_query(make_mocked_request("GET", f"/x?path={'p' * 600}"), schema)["page"] == 1
    assert len(loads) == 2


async def test_a_chat_link_token_is_not_kept_among_the_queries(client):
    before = {key: dict(value) for key, value in rest._QUERIES.items()}
    resp = await client.get("/chat/link?token=s3cret-link-token")
    assert resp.status == 200
    assert not any("s3cret-link-token" in key[1] for key in rest._QUERIES)
    assert len(rest._QUERIES) == len(before)


async def test_two_spellings_that_decode_alike_are_kept_apart():
    # `%252B` is a literal `%2B`; `%2B` is `+`. The decoded query string reads both as
    # `q=c%2B%2B`, so a key made from it handed the first asker's answer to the other.
    schema = shared(_Query)
    first = read_query(make_mocked_request("GET", "/x?path=c%252B%252B"), schema)
    second = read_query(make_mocked_request("GET", "/x?path=c%2B%2B"), schema)
    assert first["path"] == "c%2B%2B" and second["path"] == "c++"
    again = read_query(make_mocked_request("GET", "/x?path=c%252B%252B"), schema)
    assert again["path"] == "c%2B%2B"
