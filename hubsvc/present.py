"""Rows from the store turned into the API's JSON shapes (see schemas/)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from .avatars import default_version


def avatar_url(base_url: str, user: dict[str, Any]) -> str:
    """Absolute avatar URL with the content hash as cache buster."""
    version = user["avatar_hash"][:16] if user.get("avatar_hash") else default_version(user["username"])
    return f"{base_url}/api/users/{quote(user['username'])}/avatar?v={version}"


def user_summary(base_url: str, user: dict[str, Any]) -> dict[str, Any]:
    """{id, username, name, avatarUrl}: how a user is embedded everywhere."""
    return {
        "id": str(user["id"]),
        "username": user["username"],
        "name": user["name"],
        "avatarUrl": avatar_url(base_url, user),
    }


def user_public(base_url: str, user: dict[str, Any], *, is_self: bool, admin: bool = False
                ) -> dict[str, Any]:
    """The user object; the e-mail only for the user themself."""
    data = user_summary(base_url, user)
    data["createdAt"] = user["created_at"]
    if is_self:
        data["email"] = user["email"]
        data["isAdmin"] = admin
    return data


def preferences(user: dict[str, Any]) -> dict[str, Any]:
    """Preferences with their defaults filled in."""
    stored = user.get("preferences") or {}
    notifications = {"web": True, "chat": True, "email": True, **stored.get("notifications", {})}
    return {"theme": stored.get("theme", "system"), "notifications": notifications}


def settings(user: dict[str, Any]) -> dict[str, Any]:
    """The settings object of the user themself."""
    return {
        "name": user["name"],
        "email": user["email"],
        "bio": user["bio"],
        "location": user["location"],
        "website": user["website"],
        "preferences": preferences(user),
    }
