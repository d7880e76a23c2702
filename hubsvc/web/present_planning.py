"""Milestones, reactions, releases and their assets as the API's JSON shapes."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from .present import _person, user_summary


def _repo_api(base_url: str, repo: dict[str, Any]) -> str:
    return (
        f"{base_url}/api/repositories/{quote(repo['owner_username'], safe='')}"
        f"/{quote(repo['name'], safe='')}"
    )


def milestone(base_url: str, repo: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    """A milestone with its open and closed issue counts."""
    return {
        "id": str(row["id"]),
        "number": row["number"],
        "title": row["title"],
        "description": row["description"],
        "state": row["state"],
        "dueOn": row["due_on"],
        "openIssues": row["open_issues"],
        "closedIssues": row["closed_issues"],
        "creator": _person(base_url, row, "creator", "creator_id"),
        "createdAt": row["created_at"],
        "updatedAt": row["updated_at"],
        "closedAt": row["closed_at"],
        "url": f"{_repo_api(base_url, repo)}/milestones/{row['number']}",
    }


def reaction(base_url: str, row: dict[str, Any]) -> dict[str, Any]:
    """One person's reaction."""
    return {
        "id": str(row["id"]),
        "content": row["content"],
        "user": user_summary(
            base_url,
            {
                "id": row["user_id"],
                "username": row["username"],
                "name": row["name"],
                "avatar_hash": row["avatar_hash"],
            },
        ),
        "createdAt": row["created_at"],
    }


def asset(base_url: str, repo: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    """A release asset and where to download it."""
    return {
        "id": str(row["id"]),
        "name": row["name"],
        "contentType": row["content_type"],
        "size": row["size"],
        "downloadCount": row["download_count"],
        "uploader": _person(base_url, row, "uploader", "uploader_id"),
        "createdAt": row["created_at"],
        "browserDownloadUrl": f"{_repo_api(base_url, repo)}/releases/assets/{row['id']}",
    }


def release(
    base_url: str, repo: dict[str, Any], row: dict[str, Any], assets: list[dict[str, Any]]
) -> dict[str, Any]:
    """A release with its assets."""
    api = _repo_api(base_url, repo)
    return {
        "id": str(row["id"]),
        "tagName": row["tag_name"],
        "targetCommitish": row["target_commitish"],
        "name": row["name"],
        "body": row["body"],
        "draft": bool(row["draft"]),
        "prerelease": bool(row["prerelease"]),
        "author": _person(base_url, row, "author", "author_id"),
        "createdAt": row["created_at"],
        "publishedAt": row["published_at"],
        "assets": [asset(base_url, repo, a) for a in assets],
        "url": f"{api}/releases/{row['id']}",
    }
