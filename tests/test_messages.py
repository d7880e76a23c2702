"""Chat messages every receiver accepts, with links that open, from the real app."""

from __future__ import annotations

import re
import unicodedata

import pytest
from yarl import URL

from hubsvc.app import create_app
from hubsvc.config import ConfigError, load_config
from hubsvc.events.shape import Event
from hubsvc.keys import BUS
from hubsvc.links import SiteUrl
from hubsvc.notify.messages import render, render_ping
from hubsvc.notify.text import cut, discord_escape, is_boundary, plural, units

from .conftest import Recorder, make_config, sign_up
from .gitcli import git, remote
from .receiver import Receiver, discord_problems
from .test_repos import create

FAMILY = "\U0001f468\u200d\U0001f469\u200d\U0001f467\u200d\U0001f466"  # one grapheme, 7 code points
COOK = "\U0001f9d1\U0001f3fd\u200d\U0001f373"  # skin tone + ZWJ
FLAGS = "\U0001f1eb\U0001f1f7\U0001f1ef\U0001f1f5"  # two flags
ACCENT = "e\u0301\u0323"  # e + two marks
HANGUL = "\u1112\u1161\u11ab"  # jamo: one syllable
RTL = "\u05e9\u05dc\u05d5\u05dd \u0645\u0631\u062d\u0628\u0627 "
RICH = f"{FAMILY}{COOK}{FLAGS}{ACCENT}{HANGUL}{RTL}"


def graphemes_of(text: str) -> list[str]:
    """text split where is_boundary allows."""
    if not text:
        return []
    cuts = [0] + [i for i in range(1, len(text)) if is_boundary(text, i)] + [len(text)]
    return [text[a:b] for a, b in zip(cuts, cuts[1:])]


def test_boundaries_keep_each_cluster_whole():
    assert graphemes_of(RICH[: -len(RTL)]) == [FAMILY, COOK, FLAGS[:2], FLAGS[2:], ACCENT, HANGUL]
    assert graphemes_of("a\r\nb") == ["a", "\r\n", "b"]
    assert graphemes_of("\u0915\u094d\u0937") == ["\u0915\u094d\u0937"]  # Devanagari conjunct


def test_cut_never_splits_a_grapheme_and_marks_the_cut():
    text = RICH * 3
    whole = graphemes_of(text)
    for limit in range(1, 80):
        out = cut(text, limit)
        assert units(out) <= limit and out.endswith("…"), limit
        head = out[:-1]
        # The kept part is whole clusters: what follows starts no mark, ZWJ, tone or half flag.
        assert graphemes_of(head) == whole[: len(graphemes_of(head))], limit
        rest = text[len(head) :].lstrip()
        assert unicodedata.category(rest[0]) not in ("Mn", "Mc", "Me", "Sk"), limit
        assert not head.endswith("\u200d") and not rest.startswith("\u200d"), limit


def test_cut_closes_a_code_fence_it_leaves_open():
    body = "Steps:\n```python\n" + "print('x')\n" * 200 + "```\nafter"
    out = cut(body, 100)
    assert units(out) <= 100 and out.endswith("…\n```") and out.count("```") == 2
    closed = "```\nshort\n```\n" + "tail " * 100
    assert cut(closed, 40).count("```") == 2 and cut(closed, 40).endswith("…")
    assert cut("short", 10) == "short"


def test_markdown_and_counts():
    assert discord_escape("**x** [a](http://evil) `c` <@&1> ~~s~~ |sp|") == (
        r"\*\*x\*\* \[a\]\(http://evil\) \`c\` \<@&1\> \~\~s\~\~ \|sp\|"
    )
    assert discord_escape("# big\n> quote\n- item\n1. one") == (
        "\\# big\n\\> quote\n\\- item\n1\\. one"
    )
    assert plural(1, "star") == "1 star" and plural(0, "star") == "0 stars"
    assert plural(2, "new commit") == "2 new commits"


def _event(type_: str, data: dict, actor: str = "boss") -> Event:
    return Event(
        type=type_,
        repository={"owner": "boss", "name": "proj"},
        actor={
            "id": "1",
            "username": actor,
            "name": actor,
            "avatarUrl": f"http://hub.test/api/users/{actor}/avatar?v=1",
        },
        data=data,
    )


HUGE_ISSUE = {
    "action": "opened",
    "issue": {
        "number": 7,
        "title": ("@everyone **bold** [x](http://evil) " + RICH * 20)[:1024],
        "state": "open",
        "body": "```\n" + RICH * 3000,
        "labels": ["l" * 50 + RICH] * 400,
        "assignees": [{"username": "u" * 100}] * 100,
        "author": {"username": "a" * 100},
    },
}


def test_discord_body_fits_every_limit_for_any_inbound_data():
    body, headers = render(_event("issue", HUGE_ISSUE), "discord", "http://hub.test", "d-1")
    assert discord_problems(body) == []
    assert body["allowed_mentions"] == {"parse": []}
    assert headers == {"X-Hubsvc-Event": "issue", "X-Hubsvc-Delivery": "d-1"}
    embed = body["embeds"][0]
    assert embed["title"].startswith(r"[boss/proj] Issue opened: #7 @everyone \*\*bold\*\* \[x\]")
    assert embed["description"].endswith("…\n```")
    assert {f["name"] for f in embed["fields"]} == {"State", "Author", "Labels", "Assignees"}


def test_slack_body_escapes_and_fits():
    data = {
        **HUGE_ISSUE,
        "issue": {**HUGE_ISSUE["issue"], "title": "<!everyone> & <@U123> " + RICH},
    }
    body, headers = render(_event("issue", data), "slack", "http://hub.test")
    assert headers == {"X-Hubsvc-Event": "issue"}
    assert "&lt;!everyone&gt; &amp; &lt;@U123&gt;" in body["text"]
    header, section, fields, context = body["blocks"]
    mrkdwn = [
        section["text"]["text"],
        context["elements"][0]["text"],
        *(f["text"] for f in fields["fields"]),
    ]
    assert not any("<!" in text or "<@" in text for text in mrkdwn)
    assert header["type"] == "header" and units(header["text"]["text"]) <= 150
    assert header["text"]["type"] == "plain_text"  # never parsed: nothing to escape
    assert units(section["text"]["text"]) <= 3000 and section["text"]["text"].endswith("…\n```")
    assert len(fields["fields"]) == 4 and all(units(f["text"]) <= 2000 for f in fields["fields"])
    assert not re.search(r"&[a-z]{0,3}…", section["text"]["text"])  # no half &amp;
    assert "<http://hub.test/api/users/boss|boss>" in context["elements"][0]["text"]
    assert units(body["text"]) <= 600


def test_json_body_is_the_event_as_the_api_shows_it():
    event = _event("star", {"action": "added", "starCount": 1})
    body, headers = render(event, "json", "http://hub.test", "d-2")
    assert body == event.to_dict()
    assert headers == {"X-Hubsvc-Event": "star", "X-Hubsvc-Delivery": "d-2"}
    discord, _ = render(event, "discord", "http://hub.test")
    assert discord["embeds"][0]["description"] == "boss/proj now has 1 star"
    ping, headers = render_ping("slack", SiteUrl("http://hub.test", "https://web.test"), "d-3")
    assert "<https://web.test|Open>" in ping["text"] and headers["X-Hubsvc-Event"] == "ping"
    with pytest.raises(ValueError):
        render(event, "teams", "http://hub.test")


def test_web_url_is_a_checked_key():
    with pytest.raises(ConfigError, match="server.web_url"):
        make_config_plain(web_url="ftp://x")
    config = make_config_plain(web_url="https://web.test/")
    assert config.base_url.web_url == "https://web.test"
    api = SiteUrl(config.base_url)  # the same base without web pages
    assert api.issue("a", "b", 3, pull=True) == "http://127.0.0.1:8080/api/repositories/a/b/pulls/3"
    assert config.base_url.issue("a", "b", 3, pull=True) == "https://web.test/a/b/pulls/3"


def make_config_plain(**server):
    return load_config(None, {f"server.{k}": v for k, v in server.items()}, env={})


def _links(value, found: set[str], text: bool = True) -> set[str]:
    """Every URL in a JSON value: url fields, avatars, and (text) Markdown links we wrote."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("url", "icon_url", "avatarUrl") and isinstance(item, str):
                found.add(item)
            else:
                _links(item, found, text)
    elif isinstance(value, list):
        for item in value:
            _links(item, found, text)
    elif isinstance(value, str) and text:
        found.update(re.findall(r"\]\((https?://[^)\s]+)\)", value))
    return found


@pytest.fixture
async def discord_receiver(aiohttp_server):
    rec = Receiver(discord=True)
    server = await aiohttp_server(rec.app)
    rec.url = str(server.make_url("/hook"))
    return rec


async def test_longest_content_reaches_a_discord_receiver_and_every_link_opens(
    aiohttp_client, tmp_path, discord_receiver
):
    """Every event type with the longest content the API takes: no 400, links answer 200."""
    config = make_config(tmp_path, chat__webhook_url=discord_receiver.url, chat__retry_seconds=0.05)
    client = await aiohttp_client(create_app(config))
    recorder = Recorder()
    client.app[BUS].subscribe(recorder, name="test-recorder")
    boss = await sign_up(client, "boss")
    people = [await sign_up(client, f"assignee{n:02d}-{'x' * 25}") for n in range(10)]
    await create(client, boss, "proj")
    for person in people:  # assignable: writers
        resp = await client.put(
            f"/api/repositories/boss/proj/collaborators/{person.username}",
            headers=boss.headers,
            json={"permission": "write"},
        )
        assert resp.status in (200, 201), await resp.text()
    title = ("@everyone <@&123> **bold** [x](http://evil) " + RICH * 20)[:256]
    body = ("@here ```python\n" + f"print('{RICH}')\n" * 4000)[:65536]
    labels = [(f"{n:02d}" + RICH * 5)[:50] for n in range(20)]

    work = tmp_path / "work"
    await git("init", "-q", "-b", "main", str(work))
    message = tmp_path / "message"
    for n in range(40):
        message.write_text((f"commit {n} @everyone {RICH}" * 400)[:10000])
        await git("commit", "-q", "--allow-empty", "-F", str(message), cwd=work)
    await git("checkout", "-qb", "topic", cwd=work)
    await git("commit", "-q", "--allow-empty", "-m", "topic work", cwd=work)
    await git("push", "-q", remote(client, boss, "boss", "proj"), "main", "topic", cwd=work)

    api = "/api/repositories/boss/proj"
    resp = await client.post(
        api + "/issues",
        headers=boss.headers,
        json={
            "title": title,
            "body": body,
            "labels": labels,
            "assignees": [p.username for p in people],
        },
    )
    assert resp.status == 201, await resp.text()
    resp = await client.post(api + "/issues/1/comments", headers=boss.headers, json={"body": body})
    assert resp.status == 201, await resp.text()
    resp = await client.post(
        api + "/pulls", headers=boss.headers, json={"title": title, "body": body, "head": "topic"}
    )
    assert resp.status == 201, await resp.text()
    resp = await client.post(api + "/pulls/2/comments", headers=boss.headers, json={"body": body})
    assert resp.status == 201, await resp.text()
    assert (await client.post(api + "/star", headers=boss.headers)).status in (200, 201, 204)
    resp = await client.post(api + "/fork", json={}, headers=people[0].headers)
    assert resp.status == 201, await resp.text()

    # pushes of main and topic, issue, comment, pull request, comment, star, fork
    requests = await discord_receiver.wait_for(8)
    assert [r["status"] for r in requests] == [200] * 8, [
        discord_problems(r["json"]) for r in requests
    ]
    assert {r["headers"]["X-Hubsvc-Event"] for r in requests} == {
        "push",
        "issue",
        "pull_request",
        "star",
        "fork",
    }
    for request in requests:
        assert request["json"]["allowed_mentions"] == {"parse": []}  # '@everyone' pings nobody
    titles = [r["json"]["embeds"][0]["title"] for r in requests]
    assert any(
        t.startswith(r"[boss/proj] Issue opened: #1 @everyone \<@&123\> \*\*bold\*\*")
        for t in titles
    )
    assert any(
        "… and 35 more commits" in r["json"]["embeds"][0].get("description", "") for r in requests
    )

    # Every link of every message and event opens: with no web_url, the API resource.
    links = set()
    for request in requests:
        _links(request["json"], links)
    for event in await recorder.wait_for(8):
        _links(event.to_dict(), links, text=False)  # titles and bodies hold users' links
    assert len(links) > 10
    for link in sorted(links):
        url = URL(link)
        assert url.host == "127.0.0.1" and url.port == 8080, link  # the configured base_url
        resp = await client.get(url.path_qs if url.query_string else url.raw_path)
        assert resp.status == 200, link


async def test_with_web_url_links_name_pages(aiohttp_client, tmp_path):
    config = make_config(tmp_path, server__web_url="https://web.test")
    client = await aiohttp_client(create_app(config))
    recorder = Recorder()
    client.app[BUS].subscribe(recorder, name="test-recorder")
    boss = await sign_up(client, "boss")
    repo = await create(client, boss, "proj")
    assert repo["url"] == "https://web.test/boss/proj"
    assert repo["cloneUrl"] == "http://127.0.0.1:8080/boss/proj.git"  # git stays on the API
    resp = await client.post(
        "/api/repositories/boss/proj/issues", headers=boss.headers, json={"title": "t"}
    )
    assert (await resp.json())["issue"]["url"] == "https://web.test/boss/proj/issues/1"
    [event] = await recorder.wait_for(1)
    body, _ = render(event, "discord", config.base_url)
    embed = body["embeds"][0]
    assert embed["url"] == "https://web.test/boss/proj/issues/1"
    assert embed["author"]["url"] == "https://web.test/boss"
    resp = await client.get("/api/search", params={"q": "boss", "type": "users"})
    assert (await resp.json())["results"][0]["url"] == "https://web.test/boss"
