"""Releases of a repository's tags and their uploaded assets (files under the data folder)."""

from __future__ import annotations

from typing import Any

from ..errors import Conflict
from ..timeutil import now_iso
from .base import Table, reads, writes

_SELECT = (
    "SELECT r.*, u.username AS author_username, u.name AS author_name,"
    " u.avatar_hash AS author_avatar_hash FROM releases r LEFT JOIN users u ON u.id = r.author_id"
)
_ASSETS = (
    "SELECT a.*, u.username AS uploader_username, u.name AS uploader_name,"
    " u.avatar_hash AS uploader_avatar_hash"
    " FROM release_assets a LEFT JOIN users u ON u.id = a.uploader_id"
)
# Published ones newest first, drafts (no publication time yet) before them, as GitHub.
_ORDER = (
    " ORDER BY CASE WHEN r.published_at IS NULL THEN 0 ELSE 1 END, r.published_at DESC, r.id DESC"
)


def _drafts(with_drafts: bool) -> str:
    return "" if with_drafts else " AND r.draft = 0"


class ReleaseStore(Table):
    """Releases (one per tag) and their assets."""

    @reads
    def page(
        self, conn, repo_id: int, with_drafts: bool, limit: int, offset: int
    ) -> tuple[list[dict[str, Any]], bool]:
        """Releases, drafts only for writers (with_drafts)."""
        rows = conn.execute(
            _SELECT + " WHERE r.repo_id = ?" + _drafts(with_drafts) + _ORDER + " LIMIT ? OFFSET ?",
            (repo_id, limit + 1, offset),
        ).fetchall()
        return [dict(r) for r in rows[:limit]], len(rows) > limit

    @reads
    def get(self, conn, repo_id: int, release_id: int, with_drafts: bool) -> dict | None:
        """One release by id."""
        row = conn.execute(
            _SELECT + " WHERE r.repo_id = ? AND r.id = ?" + _drafts(with_drafts),
            (repo_id, release_id),
        ).fetchone()
        return dict(row) if row else None

    @reads
    def by_tag(self, conn, repo_id: int, tag: str, with_drafts: bool) -> dict | None:
        """The release of a tag."""
        row = conn.execute(
            _SELECT + " WHERE r.repo_id = ? AND r.tag_name = ?" + _drafts(with_drafts),
            (repo_id, tag),
        ).fetchone()
        return dict(row) if row else None

    @reads
    def latest(self, conn, repo_id: int) -> dict | None:
        """The newest published release that is not a prerelease (GitHub's latest)."""
        row = conn.execute(
            _SELECT + " WHERE r.repo_id = ? AND r.draft = 0 AND r.prerelease = 0"
            " ORDER BY r.published_at DESC, r.id DESC LIMIT 1",
            (repo_id,),
        ).fetchone()
        return dict(row) if row else None

    @writes
    def create(self, conn, repo_id: int, author_id: int, fields: dict[str, Any]) -> dict:
        """A release of a tag; 409 when the tag has one already."""
        now = now_iso()
        row = conn.execute(
            "INSERT INTO releases (repo_id, tag_name, target_commitish, name, body, draft,"
            " prerelease, author_id, created_at, published_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (repo_id, tag_name) DO NOTHING RETURNING id",
            (
                repo_id,
                fields["tagName"],
                fields["targetCommitish"],
                fields["name"],
                fields["body"],
                int(fields["draft"]),
                int(fields["prerelease"]),
                author_id,
                now,
                None if fields["draft"] else now,
            ),
        ).fetchone()
        if row is None:
            raise Conflict(f"tag {fields['tagName']} already has a release")
        return dict(conn.execute(_SELECT + " WHERE r.id = ?", (row[0],)).fetchone())

    @writes
    def update(self, conn, release_id: int, fields: dict[str, Any]) -> dict | None:
        """Change a release; publishing a draft sets its publication time."""
        old = conn.execute("SELECT * FROM releases WHERE id = ?", (release_id,)).fetchone()
        if old is None:
            return None
        names = {
            "tagName": "tag_name",
            "targetCommitish": "target_commitish",
            "name": "name",
            "body": "body",
            "draft": "draft",
            "prerelease": "prerelease",
        }
        columns = {names[k]: (int(v) if isinstance(v, bool) else v) for k, v in fields.items()}
        if "draft" in fields:
            published = None if fields["draft"] else (old["published_at"] or now_iso())
            columns["published_at"] = published
        if (
            "tag_name" in columns
            and conn.execute(
                "SELECT 1 FROM releases WHERE repo_id = ? AND tag_name = ? AND id <> ?",
                (old["repo_id"], columns["tag_name"], release_id),
            ).fetchone()
        ):
            raise Conflict(f"tag {columns['tag_name']} already has a release")
        if columns:
            sets = ", ".join(f"{c} = ?" for c in columns)
            conn.execute(
                f"UPDATE releases SET {sets} WHERE id = ?", (*columns.values(), release_id)
            )
        return dict(conn.execute(_SELECT + " WHERE r.id = ?", (release_id,)).fetchone())

    @writes
    def delete(self, conn, release_id: int) -> tuple[dict, list[int]] | None:
        """Delete a release with its assets' rows: (the row it was, its asset ids)."""
        row = conn.execute(_SELECT + " WHERE r.id = ?", (release_id,)).fetchone()
        if row is None:
            return None
        ids = [
            a[0]
            for a in conn.execute(
                "SELECT id FROM release_assets WHERE release_id = ?", (release_id,)
            )
        ]
        conn.execute("DELETE FROM releases WHERE id = ?", (release_id,))
        return dict(row), ids

    # Assets

    @reads
    def assets(self, conn, release_ids: list[int]) -> dict[int, list[dict[str, Any]]]:
        """The assets of some releases by release id, by name, in one query."""
        found: dict[int, list[dict[str, Any]]] = {i: [] for i in release_ids}
        if release_ids:
            rows = conn.execute(
                _ASSETS + f" WHERE a.release_id IN ({','.join('?' * len(release_ids))})"
                " ORDER BY a.name, a.id",
                list(release_ids),
            )
            for row in rows:
                found[row["release_id"]].append(dict(row))
        return found

    @reads
    def asset(self, conn, repo_id: int, asset_id: int) -> dict[str, Any] | None:
        """One asset with its release's draft flag."""
        row = conn.execute(
            _ASSETS.replace("FROM release_assets a", ", r.draft FROM release_assets a")
            + " JOIN releases r ON r.id = a.release_id WHERE a.repo_id = ? AND a.id = ?",
            (repo_id, asset_id),
        ).fetchone()
        return dict(row) if row else None

    @writes
    def add_asset(
        self,
        conn,
        release_id: int,
        repo_id: int,
        name: str,
        content_type: str,
        size: int,
        uploader_id: int,
        place: Any,
    ) -> dict[str, Any]:
        """Record an uploaded file; place(asset id) moves it into place in this transaction,
        so a failed insert leaves no file and a failed move no row."""
        made = conn.execute(
            "INSERT INTO release_assets (release_id, repo_id, name, content_type, size,"
            " uploader_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (release_id, name) DO NOTHING RETURNING id",
            (release_id, repo_id, name, content_type, size, uploader_id, now_iso()),
        ).fetchone()
        if made is None:
            raise Conflict(f"this release already has an asset named {name}")
        place(made[0])
        return dict(conn.execute(_ASSETS + " WHERE a.id = ?", (made[0],)).fetchone())

    @writes
    def count_download(self, conn, asset_id: int) -> None:
        """One more download of an asset."""
        conn.execute(
            "UPDATE release_assets SET download_count = download_count + 1 WHERE id = ?",
            (asset_id,),
        )

    @writes
    def delete_asset(self, conn, asset_id: int) -> bool:
        """Delete an asset's row; False when it was gone."""
        return (
            conn.execute(
                "DELETE FROM release_assets WHERE id = ? RETURNING id", (asset_id,)
            ).fetchone()
            is not None
        )
