"""Text for chat messages: lengths as receivers count them, safe cuts, escaping, counts."""

from __future__ import annotations

import re
import unicodedata

ELLIPSIS = "…"
FENCE = "```"
ZWJ, ZWNJ = "\u200d", "\u200c"

# Discord's markdown: characters that start inline formatting, links or mentions anywhere.
_DISCORD_INLINE = re.compile(r"([\\*_~`|\[\]()<>])")
# ...and the ones that mean something only at the start of a line (headings, quotes, lists).
_DISCORD_LINE_START = re.compile(r"^([ \t]*)([#>\-+]|\d+(?=\.))", re.MULTILINE)


def units(text: str) -> int:
    """Length in UTF-16 code units: never less than the code points, so safe for either count."""
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def plural(count: int, word: str, many: str | None = None) -> str:
    """'1 star', '2 stars' (many: the plural when it is not word + 's')."""
    return f"{count} {word if count == 1 else many or word + 's'}"


def discord_escape(text: str) -> str:
    """Markdown written by nobody: shown literally in Discord (titles, names, labels)."""
    text = _DISCORD_INLINE.sub(r"\\\1", text)
    return _DISCORD_LINE_START.sub(
        lambda m: (
            m.group(1) + (m.group(2) + "\\" if m.group(2)[0].isdigit() else "\\" + m.group(2))
        ),
        text,
    )


def slack_escape(text: str) -> str:
    """The three characters Slack's mrkdwn asks to be escaped, so '<!everyone>' stays text."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def one_line(text: str) -> str:
    """Text for a title: line breaks and tabs become spaces."""
    return " ".join(text.split()) if any(ch in text for ch in "\r\n\t\v\f") else text


# --- grapheme clusters (Unicode UAX #29, the rules a cut can break) --------------------
# The standard library has no grapheme segmentation; these are the rules that keep an
# emoji sequence, a flag, a letter with its marks, a Hangul syllable or an Indic conjunct
# whole. A cut only has to avoid splitting a cluster, so where this joins a little more
# than UAX #29 would (after any ZWJ), the cut is merely a character earlier.


def _hangul(ch: str) -> str:
    cp = ord(ch)
    if 0x1100 <= cp <= 0x115F or 0xA960 <= cp <= 0xA97C:
        return "L"
    if 0x1160 <= cp <= 0x11A7 or 0xD7B0 <= cp <= 0xD7C6:
        return "V"
    if 0x11A8 <= cp <= 0x11FF or 0xD7CB <= cp <= 0xD7FB:
        return "T"
    if 0xAC00 <= cp <= 0xD7A3:
        return "LV" if (cp - 0xAC00) % 28 == 0 else "LVT"
    return ""


def _extends(ch: str) -> bool:
    cp = ord(ch)
    return (
        unicodedata.category(ch).startswith("M")
        or ch in (ZWJ, ZWNJ)
        or 0x1F3FB <= cp <= 0x1F3FF  # emoji skin tones
        or 0xE0020 <= cp <= 0xE007F  # emoji tag sequences (subdivision flags)
        or 0xFF9E <= cp <= 0xFF9F
    )  # halfwidth kana voicing marks


def _regional(ch: str) -> bool:
    return 0x1F1E6 <= ord(ch) <= 0x1F1FF


def _control(ch: str) -> bool:
    return unicodedata.category(ch) in ("Cc", "Zl", "Zp")


def is_boundary(text: str, i: int) -> bool:
    """Whether text may be cut before index i without splitting a grapheme cluster."""
    if i <= 0 or i >= len(text):
        return True
    a, b = text[i - 1], text[i]
    if a == "\r" and b == "\n":
        return False
    if _control(a) or _control(b):
        return True
    ha, hb = _hangul(a), _hangul(b)
    if (
        ha
        and hb
        and (
            (ha == "L" and hb in ("L", "V", "LV", "LVT"))
            or (ha in ("LV", "V") and hb in ("V", "T"))
            or (ha in ("LVT", "T") and hb == "T")
        )
    ):
        return False
    if _extends(b) or a == ZWJ:
        return False
    if unicodedata.combining(a) == 9 and unicodedata.category(b) == "Lo":
        return False  # virama + consonant: an Indic conjunct
    if _regional(a) and _regional(b):
        run = 0
        j = i - 1
        while j >= 0 and _regional(text[j]):
            run += 1
            j -= 1
        return run % 2 == 0  # flags are pairs: break only after a complete one
    return True


def _open_fence(text: str) -> bool:
    return text.count(FENCE) % 2 == 1


def cut(text: str, limit: int) -> str:
    """text within limit UTF-16 units: cut at a grapheme boundary, marked with '…', and
    with a code fence the cut left open closed again."""
    if units(text) <= limit:
        return text
    if limit < 1:
        return ""
    for reserve in (units(ELLIPSIS), units(ELLIPSIS) + units("\n" + FENCE)):
        # The longest prefix that leaves room for the marker (and a closing fence).
        room, end, used = limit - reserve, 0, 0
        while end < len(text):
            step = 2 if ord(text[end]) > 0xFFFF else 1
            if used + step > room:
                break
            used += step
            end += 1
        while end > 0 and not is_boundary(text, end):
            end -= 1
        while end > 0 and text[end - 1] == "`" and end < len(text) and text[end] == "`":
            end -= 1  # never leave half of a fence behind
        head = text[:end].rstrip()
        if not _open_fence(head):
            return head + ELLIPSIS
        if reserve > units(ELLIPSIS):
            return head + ELLIPSIS + "\n" + FENCE
    return ELLIPSIS  # unreachable: the second pass always returns
