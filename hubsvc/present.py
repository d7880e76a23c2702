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


def _owner(base_url: str, repo: dict[str, Any]) -> dict[str, Any]:
    return user_summary(base_url, {
        "id": repo["owner_id"], "username": repo["owner_username"], "name": repo["owner_name"],
        "avatar_hash": repo["owner_avatar_hash"]})


def repo(base_url: str, row: dict[str, Any], viewer: dict[str, Any] | None) -> dict[str, Any]:
    """The repo object of the contract, as seen by viewer."""
    data = {
        "id": str(row["id"]),
        "name": row["name"],
        "fullName": f"{row['owner_username']}/{row['name']}",
        "description": row["description"],
        "visibility": row["visibility"],
        "private": row["visibility"] == "private",
        "defaultBranch": row["default_branch"],
        "createdAt": row["created_at"],
        "updatedAt": row["updated_at"],
        "owner": _owner(base_url, row),
        "starCount": row["star_count"],
        "starred": bool(row["starred"]) if viewer else False,
        "forkCount": row["fork_count"],
        "isOwner": viewer is not None and viewer["id"] == row["owner_id"],
        "fork": row["parent_id"] is not None,
        "parent": ({"owner": row["parent_owner"], "name": row["parent_name"]}
                   if row["parent_id"] is not None else None),
        "url": f"{base_url}/{row['owner_username']}/{row['name']}",
        "cloneUrl": f"{base_url}/{row['owner_username']}/{row['name']}.git",
    }
    if viewer is not None and "role" in row:
        data["permission"] = row["role"]
    return data


def member(base_url: str, row: dict[str, Any]) -> dict[str, Any]:
    """A user summary from a joined row (collaborator or stargazer)."""
    data = user_summary(base_url, row)
    if "permission" in row:
        data["permission"] = row["permission"]
    return data
