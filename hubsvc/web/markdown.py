"""Markdown to HTML that is safe to put in a page: markdown-it-py, then nh3's allow-list."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

import nh3
from aiohttp import web
from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.token import Token

# CommonMark with GitHub's tables and strikethrough; raw HTML is parsed (READMEs use it)
# and then cut down by nh3: no script, style, SVG or event attribute survives, and links
# keep only these schemes (a `javascript:` href is dropped).
_MD = MarkdownIt("commonmark", {"html": True, "linkify": False}).enable(["table", "strikethrough"])
URL_SCHEMES = {"http", "https", "mailto"}
MAX_SOURCE = 512 * 1024  # a larger README is shown cut, not rendered at any cost
# `#12` and `@ada` as GitHub links them: not inside a word, an e-mail address or a path.
_REF = re.compile(
    r"(?<![\w/#@&.-])(?:#(\d{1,12})|@([A-Za-z0-9](?:[A-Za-z0-9-]{0,37}[A-Za-z0-9])?))\b"
)
# What asks for bodyHtml: GitHub's media types (html+json, full+json) in Accept.
HTML_MEDIA = ("html+json", "full+json")


def _link(href: str, text: str) -> list[Token]:
    opened = Token("link_open", "a", 1)
    opened.attrs = {"href": href}
    label = Token("text", "", 0)
    label.content = text
    return [opened, label, Token("link_close", "a", -1)]


def _refs(state: StateCore) -> None:
    """Turn #N and @user in plain text (never in code or an existing link) into links."""
    repo = state.env.get("repo") if isinstance(state.env, dict) else None
    if not repo:
        return
    owner, name = (quote(part, safe="") for part in repo)
    for block in state.tokens:
        if block.type != "inline" or not block.children:
            continue
        out: list[Token] = []
        depth = 0
        for token in block.children:
            depth += token.type == "link_open"
            depth -= token.type == "link_close"
            if token.type == "html_inline":  # a raw <a …>…</a> is a link too
                tag = token.content.lower()
                depth += tag.startswith("<a ") or tag == "<a>"
                depth -= tag.startswith("</a")
            if token.type != "text" or depth or not _REF.search(token.content):
                out.append(token)
                continue
            at = 0
            for m in _REF.finditer(token.content):
                if m.start() > at:
                    out.append(_text(token.content[at : m.start()]))
                href = f"/{owner}/{name}/issues/{m[1]}" if m[1] else f"/{m[2]}"
                out.extend(_link(href, m[0]))
                at = m.end()
            if at < len(token.content):
                out.append(_text(token.content[at:]))
        block.children = out


def _text(content: str) -> Token:
    token = Token("text", "", 0)
    token.content = content
    return token


_MD.core.ruler.push("refs", _refs)


def render(source: str, repo: tuple[str, str] | None = None) -> str:
    """Sanitized HTML of a Markdown document; with repo, #N and @user become links."""
    html = _MD.render(source[:MAX_SOURCE], {"repo": repo} if repo else {})
    return nh3.clean(html, url_schemes=URL_SCHEMES, link_rel="nofollow noopener noreferrer")


def wants_html(request: web.Request) -> bool:
    """Whether the client asked for rendered bodies (bodyHtml) beside the Markdown."""
    accept = request.headers.get("Accept", "")
    return any(media in accept for media in HTML_MEDIA)


def with_html(request: web.Request, repo: dict[str, Any], *objects: dict[str, Any]) -> None:
    """Add bodyHtml to each object (and its review comments) when the client asked for it."""
    if not wants_html(request):
        return
    where = (repo["owner_username"], repo["name"])
    for obj in objects:
        if obj.get("body") is not None:
            obj["bodyHtml"] = render(obj["body"], where)
        for comment in obj.get("comments") or ():
            if isinstance(comment, dict) and comment.get("body") is not None:
                comment["bodyHtml"] = render(comment["body"], where)
