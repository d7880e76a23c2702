"""Rows from the store turned into the API's JSON shapes (see schemas/)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any
from urllib.parse import quote

from ..links import SiteUrl
from .avatars import default_version


def avatar_url(base_url: str, user: dict[str, Any]) -> str:
    """Absolute avatar URL with the content hash as cache buster."""
    return _avatar_url(base_url, user["username"], user.get("avatar_hash"))


@lru_cache(maxsize=4096)
def _avatar_url(base_url: str, username: str, avatar_hash: str | None) -> str:
    # Kept: every user object embeds one, and the hash and the quoting showed in profiles.
    version = avatar_hash[:16] if avatar_hash else default_version(username)
    return f"{base_url}/api/users/{quote(username)}/avatar?v={version}"


def user_url(base_url: str, username: str) -> str:
    """Where a user's link points (a page with [server] web_url, else the API's user)."""
    return SiteUrl.of(base_url).user(username)


def user_summary(base_url: str, user: dict[str, Any]) -> dict[str, Any]:
    """{id, username, name, avatarUrl}: how a user is embedded everywhere."""
    return {
        "id": str(user["id"]),
        "username": user["username"],
        "name": user["name"],
        "avatarUrl": avatar_url(base_url, user),
    }


def user_public(
    base_url: str, user: dict[str, Any], *, is_self: bool, admin: bool = False
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
    return user_summary(
        base_url,
        {
            "id": repo["owner_id"],
            "username": repo["owner_username"],
            "name": repo["owner_name"],
            "avatar_hash": repo["owner_avatar_hash"],
        },
    )


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
        # A parent the viewer may not read is not named (it may have become private).
        "parent": (
            {"owner": row["parent_owner"], "name": row["parent_name"]}
            if row["parent_id"] is not None and row.get("parent_visible", 1)
            else None
        ),
        "url": SiteUrl.of(base_url).repo(row["owner_username"], row["name"]),
        "cloneUrl": f"{base_url}/{row['owner_username']}/{row['name']}.git",
        "sshUrl": SiteUrl.of(base_url).ssh_clone(row["owner_username"], row["name"]),
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


def _person(base_url: str, row: dict[str, Any], prefix: str, id_key: str) -> dict[str, Any] | None:
    """A user summary from joined columns named <prefix>_username etc."""
    if row.get(f"{prefix}_username") is None:
        return None
    return user_summary(
        base_url,
        {
            "id": row[id_key],
            "username": row[f"{prefix}_username"],
            "name": row[f"{prefix}_name"],
            "avatar_hash": row[f"{prefix}_avatar_hash"],
        },
    )


REACTION_KINDS = ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes")


def reactions(counts: dict[str, int] | None) -> dict[str, int]:
    """GitHub's reaction rollup: totalCount and a count of each of the eight kinds."""
    counts = counts or {}
    return {"totalCount": sum(counts.values()), **{k: counts.get(k, 0) for k in REACTION_KINDS}}


def label(row: dict[str, Any]) -> dict[str, Any]:
    """A label object: name, colour (6 hex, no #) and description."""
    return {
        "id": None if row.get("id") is None else str(row["id"]),
        "name": row["name"],
        "color": row["color"],
        "description": row["description"],
    }


def milestone_brief(row: dict[str, Any]) -> dict[str, Any] | None:
    """The milestone an issue shows (its own fields; counts are the milestone's to read)."""
    if row.get("milestone_number") is None:
        return None
    return {
        "id": str(row["milestone_id"]),
        "number": row["milestone_number"],
        "title": row["milestone_title"],
        "state": row["milestone_state"],
        "dueOn": row["milestone_due_on"],
    }


def issue(base_url: str, repo_row: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    """The issue object (also the common part of a pull request)."""
    owner, name = repo_row["owner_username"], repo_row["name"]
    return {
        "id": str(row["id"]),
        "number": row["number"],
        "title": row["title"],
        "body": row["body"],
        "state": row["state"],
        "labels": row["labels"],
        # The contract's labels stay names; their objects (colour, description) beside.
        "labelObjects": [label(o) for o in row.get("label_objects", ())],
        "milestone": milestone_brief(row),
        "reactions": reactions(row.get("reaction_counts")),
        "assignees": [user_summary(base_url, a) for a in row["assignees"]],
        "author": _person(base_url, row, "author", "author_id"),
        "commentCount": row["comment_count"],
        "createdAt": row["created_at"],
        "updatedAt": row["updated_at"],
        "closedAt": row["closed_at"],
        "repository": {"owner": owner, "name": name},
        "url": SiteUrl.of(base_url).issue(owner, name, row["number"], bool(row["is_pull"])),
    }


def pull(base_url: str, repo_row: dict[str, Any], row: dict[str, Any]) -> dict[str, Any]:
    """The pull request object: an issue plus branches and merge state."""
    data = issue(base_url, repo_row, row)
    merged = bool(row["merged"])
    from_fork = row["head_repo_id"] is not None and row["head_repo_id"] != repo_row["id"]
    # A private head repository is named only to a caller marked as able to read it.
    shown = row.get("head_repo_visibility") == "public" or row.get("head_visible")
    data.update(
        {
            "state": "merged" if merged else row["state"],
            "head": row["head"],
            "base": row["base"],
            "headRepository": (
                {"owner": row["head_repo_owner"], "name": row["head_repo_name"]}
                if from_fork and shown
                else None
            ),
            "headSha": row["head_oid"],
            "baseSha": row["base_oid"],
            "merged": merged,
            "mergeable": None if merged or row["mergeable"] is None else bool(row["mergeable"]),
            "mergedAt": row["merged_at"],
            "mergedBy": _person(base_url, row, "merger", "merged_by") if merged else None,
            "mergeCommit": row["merge_commit"],
            # The combined status of the head's latest commit statuses (null: none yet).
            "status": row.get("head_status"),
            # Asked and not yet answered by a review (GitHub's requested_reviewers/teams).
            "requestedReviewers": [
                user_summary(base_url, u) for u in row.get("requested_reviewers") or []
            ],
            "requestedTeams": [team_summary(t) for t in row.get("requested_teams") or []],
        }
    )
    if "review_decision" in row:  # for the caller only: it depends on the rules now
        data["reviewDecision"] = row["review_decision"]
    return data


def team_summary(row: dict[str, Any]) -> dict[str, Any]:
    """A team where one is embedded: id, name, organization."""
    return {"id": str(row["id"]), "name": row["name"], "organization": row["org"]}


def comment(base_url: str, row: dict[str, Any]) -> dict[str, Any]:
    """A comment."""
    return {
        "id": str(row["id"]),
        "body": row["body"],
        "author": _person(base_url, row, "author", "author_id"),
        "reactions": reactions(row.get("reaction_counts")),
        "createdAt": row["created_at"],
        "updatedAt": row["updated_at"],
    }


def organization(base_url: str, row: dict[str, Any]) -> dict[str, Any]:
    """The organization object; role is the caller's (owner, member or None)."""
    return {
        "id": str(row["id"]),
        "name": row["username"],
        "displayName": row["name"],
        "description": row["description"],
        "avatarUrl": avatar_url(base_url, row),
        "createdAt": row["created_at"],
        "memberCount": row["member_count"],
        "teamCount": row["team_count"],
        "role": row["role"],
        "requireTwoFactor": bool(row["require_two_factor"]),
        "url": user_url(base_url, row["username"]),
    }


def org_member(base_url: str, row: dict[str, Any]) -> dict[str, Any]:
    """A member of an organization: a user summary and their role."""
    return {**user_summary(base_url, row), "role": row["role"]}


def team(org_name: str, row: dict[str, Any]) -> dict[str, Any]:
    """The team object."""
    return {
        "id": str(row["id"]),
        "name": row["name"],
        "description": row["description"],
        "permission": row["permission"],
        "organization": org_name,
        "memberCount": row["member_count"],
        "repositoryCount": row["repo_count"],
        "createdAt": row["created_at"],
    }


def team_repo(org_name: str, row: dict[str, Any]) -> dict[str, Any]:
    """A team's repository and the permission the team holds on it."""
    return {
        "name": row["name"],
        "fullName": f"{org_name}/{row['name']}",
        "visibility": row["visibility"],
        "permission": row["permission"],
    }


def notification(base_url: str, row: dict[str, Any]) -> dict[str, Any]:
    """A notification thread, shaped as GitHub's (camelCase), its links in this API's style."""
    site = SiteUrl.of(base_url)
    owner, name, pull = row["owner"], row["repo_name"], bool(row["is_pull"])
    item_url = site.issue(owner, name, row["number"], pull)
    thread_url = f"{site}/api/notifications/threads/{row['id']}"
    return {
        "id": str(row["id"]),
        "unread": bool(row["unread"]),
        "reason": row["reason"],
        "updatedAt": row["updated_at"],
        "lastReadAt": row["last_read_at"],
        "subject": {
            "title": row["title"],
            "type": "PullRequest" if pull else "Issue",
            "number": row["number"],
            "state": row["state"],
            "url": item_url,
            # GitHub names the issue itself when the latest item is no comment.
            "latestCommentUrl": f"{item_url}#comment-{row['comment_id']}"
            if row["comment_id"]
            else item_url,
        },
        "repository": {"owner": owner, "name": name},
        "url": thread_url,
        "subscriptionUrl": thread_url + "/subscription",
    }


def subscription(url: str, thread_url: str | None, row: dict[str, Any] | None) -> dict[str, Any]:
    """A person's subscription to a thread (none yet: neither subscribed nor ignored)."""
    return {
        "subscribed": bool(row and row["subscribed"] and not row["ignored"]),
        "ignored": bool(row and row["ignored"]),
        "reason": row["reason"] if row else None,
        "createdAt": row["created_at"] if row else None,
        "url": url,
        "threadUrl": thread_url,
    }
