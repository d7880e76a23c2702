"""Markdown to HTML that is safe to put in a page: markdown-it-py, then nh3's allow-list."""

from __future__ import annotations

import nh3
from markdown_it import MarkdownIt

# CommonMark with GitHub's tables and strikethrough; raw HTML is parsed (READMEs use it)
# and then cut down by nh3: no script, style, SVG or event attribute survives, and links
# keep only these schemes (a `javascript:` href is dropped).
_MD = MarkdownIt("commonmark", {"html": True, "linkify": False}).enable(["table", "strikethrough"])
URL_SCHEMES = {"http", "https", "mailto"}
MAX_SOURCE = 512 * 1024  # a larger README is shown cut, not rendered at any cost


def render(source: str) -> str:
    """Sanitized HTML of a Markdown document."""
    html = _MD.render(source[:MAX_SOURCE])
    return nh3.clean(html, url_schemes=URL_SCHEMES, link_rel="nofollow noopener noreferrer")
