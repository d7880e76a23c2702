"""README's policy table is the one the route table makes, and every route declares an action."""

from __future__ import annotations

from pathlib import Path

import pytest

from hubsvc.app import undeclared_routes
from hubsvc.policy import (
    ACTIONS,
    TABLE_END,
    TABLE_START,
    Caps,
    action_of,
    decide,
    decide_action,
    may_receive,
    readable,
    requires,
    table,
)

README = Path(__file__).resolve().parent.parent / "README.md"


def route_actions(app) -> list[tuple[str, str, str]]:
    return sorted(
        {
            (r.method, r.resource.canonical, action_of(r.handler))
            for r in app.router.routes()
            if r.resource is not None and r.method not in ("HEAD", "OPTIONS")
        }
    )


def test_every_route_declares_an_action(app):
    assert undeclared_routes(app) == []
    assert all(action in ACTIONS for _, _, action in route_actions(app))


def test_a_route_without_an_action_stops_the_start(app):
    from aiohttp import web

    async def handler(request):
        return web.Response()

    app.router.add_get("/api/undeclared", handler)
    assert undeclared_routes(app) == ["GET /api/undeclared"]
    with pytest.raises(ValueError):
        requires("repo.everything")


def test_readme_holds_the_generated_table(app):
    text = README.read_text()
    start, end = text.index(TABLE_START), text.index(TABLE_END) + len(TABLE_END)
    expected = table(route_actions(app))
    assert text[start:end] == expected, (
        "README's policy table drifted from the routes; replace it with:\n" + expected
    )


def test_the_decision_as_a_table():
    """The pure function, row by row, as Synapse tests its event_auth."""
    issues_only = Caps("pat", frozenset({"issues:read"}))
    writer = Caps("pat", frozenset({"repo:write"}), frozenset({7}))
    bot = Caps("bot")
    rows = [
        (None, "admin", False, 403),
        (None, "admin", True, 200),
        (Caps("pat", frozenset({"repo:read"})), "admin", True, 403),
        (issues_only, "issues.read", False, 200),
        (issues_only, "repo.read", False, 403),
        (writer, "git.read", False, 200),  # write holds read
        (writer, "repo.create", False, 403),  # limited: creates nothing outside its list
        (Caps("pat"), "user.tokens", False, 403),  # a token never mints tokens
        (Caps("pat"), "user.keys", False, 403),  # nor plants an SSH key
        (bot, "user.keys", False, 403),
        (Caps("basic"), "chat.verify", False, 403),
        (bot, "issues.comment", False, 200),
        (bot, "issues.write", False, 403),
        (bot, "git.read", False, 403),
    ]
    for caps, action, admin, status in rows:
        assert decide_action(caps, action, is_admin=admin).status == status, (caps, action)
    assert decide(writer, "repo.read", 7, "a/b").ok
    assert decide(writer, "repo.read", 8, "a/c").reason.endswith("not for a/c")
    assert not may_receive(Caps("pat", frozenset({"repo:read"})), "issue", 1)
    assert may_receive(Caps("pat", frozenset({"repo:read"})), "push", 1)
    assert not may_receive(writer, "push", 8)
    narrowed = readable(Caps("pat", frozenset({"user:read"})))
    assert narrowed is not None and not narrowed.private
    assert readable(None) is None and readable(Caps("pat")) is None
