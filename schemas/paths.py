"""Path parameters as the handlers accept them, for the OpenAPI document."""

from __future__ import annotations

from typing import Any

from .repos import REPO_NAME_DOC
from .users import USERNAME_RE

# Numbers and ids: positive decimal integers; the handlers answer 404 for anything else,
# and for more digits than a number (12) or an id (18) can have.
NUMBER = {"type": "integer", "minimum": 1, "maximum": 10**12 - 1}
ID = {"type": "integer", "minimum": 1, "maximum": 10**18 - 1}
USERNAME = {"type": "string", "pattern": USERNAME_RE.pattern}

# By name; a route whose parameter means something else says so in @doc(path=...).
PATH_PARAMS: dict[str, dict[str, Any]] = {
    "owner": {**USERNAME, "description": "a user or an organization; `me` is the caller"},
    "username": {**USERNAME, "description": "`me` is the caller where one is signed in"},
    "org": USERNAME,
    "name": {"type": "string", **REPO_NAME_DOC},
    "team": {"type": "string", "pattern": r"^(?!\.\.?$)[A-Za-z0-9._-]{1,100}$"},
    "number": NUMBER,
    "id": ID,
    "deliveryId": ID,
    "reactionId": ID,
    "assetId": ID,
    # A commit: 40 hex digits, or an unambiguous prefix of 7 or more (either case).
    "oid": {"type": "string", "pattern": r"^[0-9a-fA-F]{7,40}$"},
    "sha": {"type": "string", "pattern": r"^[0-9a-fA-F]{40}$"},
    "ref": {"type": "string", "minLength": 1, "description": "a branch, a tag or a commit"},
    "branch": {
        "type": "string",
        "pattern": r"^(?![-/])[A-Za-z0-9._/*?-]{1,255}$",
        "description": "a branch name or a glob (`*` and `?`), URL-encoded",
    },
    "spec": {"type": "string", "minLength": 1, "description": "`base...head` or `base..head`"},
    "kind": {"type": "string", "enum": ["diff", "patch"]},
    # Any text: an id that is not linked answers as not linked (a link's id is 1-64
    # printable characters, schemas.chat.CHAT_ID).
    "chatId": {"type": "string", "minLength": 1},
}
# git's URLs name the repository with or without ".git".
GIT_NAME = {"type": "string", "pattern": r"^(?!\.\.?$)[A-Za-z0-9._-]{1,104}$"}
