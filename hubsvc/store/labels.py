"""Labels as objects with a colour; issues keep carrying the label names."""

from __future__ import annotations

import json
from typing import Any

from ..errors import Conflict
from ..timeutil import now_iso
from .base import Table, reads, writes
from .engines import Conn

DEFAULT_COLOR = "ededed"  # GitHub's grey for a label made on first use


def ensure_labels(conn: Conn, repo_id: int, names: list[str]) -> None:
    """Give each label name an issue carries its object, made on first use (grey, as GitHub)."""
    now = now_iso()
    conn.executemany(
        "INSERT INTO labels (repo_id, name, name_key, color, description, created_at)"
        " VALUES (?, ?, ?, ?, '', ?) ON CONFLICT (repo_id, name_key) DO NOTHING",
        [(repo_id, name, name.lower(), DEFAULT_COLOR, now) for name in dict.fromkeys(names)],
    )


def label_objects(conn: Conn, issues: list[dict[str, Any]]) -> None:
    """Attach label_objects to issue rows, in one query for all of them."""
    wanted = {(i["repo_id"], name.lower()) for i in issues for name in i["labels"]}
    found: dict[tuple[int, str], dict[str, Any]] = {}
    if wanted:
        repos = sorted({repo for repo, _ in wanted})
        keys = sorted({key for _, key in wanted})
        rows = conn.execute(
            "SELECT id, repo_id, name, name_key, color, description FROM labels"
            f" WHERE repo_id IN ({','.join('?' * len(repos))})"
            f" AND name_key IN ({','.join('?' * len(keys))})",
            (*repos, *keys),
        )
        found = {(r["repo_id"], r["name_key"]): dict(r) for r in rows}
    for issue in issues:
        issue["label_objects"] = [
            found.get(
                (issue["repo_id"], name.lower()),
                # Only while a label's object is being made by another transaction.
                {"id": None, "name": name, "color": DEFAULT_COLOR, "description": ""},
            )
            for name in issue["labels"]
        ]


def _rewrite(conn: Conn, sql: Any, repo_id: int, key: str, new: str | None) -> None:
    """Rename (new) or drop (None) a label on every issue of the repository carrying it."""
    rows = conn.execute(
        f"SELECT id, labels FROM issues WHERE repo_id = ? AND {sql.json_array_has_lower('labels')}",
        (repo_id, key),
    ).fetchall()
    for row in rows:
        names = json.loads(row["labels"])
        changed = [new if n.lower() == key else n for n in names]
        changed = list(dict.fromkeys(n for n in changed if n is not None))
        conn.execute("UPDATE issues SET labels = ? WHERE id = ?", (json.dumps(changed), row["id"]))


class LabelStore(Table):
    """A repository's labels, unique by name without regard to case."""

    @reads
    def page(
        self, conn, repo_id: int, limit: int, offset: int
    ) -> tuple[list[dict[str, Any]], bool]:
        """Labels by name."""
        rows = conn.execute(
            "SELECT * FROM labels WHERE repo_id = ? ORDER BY name_key LIMIT ? OFFSET ?",
            (repo_id, limit + 1, offset),
        ).fetchall()
        return [dict(r) for r in rows[:limit]], len(rows) > limit

    @reads
    def get(self, conn, repo_id: int, name: str) -> dict[str, Any] | None:
        """One label by name, ignoring case."""
        row = conn.execute(
            "SELECT * FROM labels WHERE repo_id = ? AND name_key = ?", (repo_id, name.lower())
        ).fetchone()
        return dict(row) if row else None

    @writes
    def create(self, conn, repo_id: int, name: str, color: str, description: str) -> dict[str, Any]:
        """A new label; 409 when the name is taken (ignoring case)."""
        row = conn.execute(
            "INSERT INTO labels (repo_id, name, name_key, color, description, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (repo_id, name_key) DO NOTHING RETURNING *",
            (repo_id, name, name.lower(), color.lower(), description, now_iso()),
        ).fetchone()
        if row is None:
            raise Conflict(f"a label named {name} already exists")
        return dict(row)

    @writes
    def update(self, conn, label_id: int, fields: dict[str, Any]) -> dict[str, Any] | None:
        """Change name, colour or description; a new name follows onto the issues."""
        old = conn.execute("SELECT * FROM labels WHERE id = ?", (label_id,)).fetchone()
        if old is None:
            return None
        name = fields.get("name", old["name"])
        if name.lower() != old["name_key"]:
            taken = conn.execute(
                "SELECT 1 FROM labels WHERE repo_id = ? AND name_key = ?",
                (old["repo_id"], name.lower()),
            ).fetchone()
            if taken:
                raise Conflict(f"a label named {name} already exists")
        if name != old["name"]:
            _rewrite(conn, self.db.sql, old["repo_id"], old["name_key"], name)
        row = conn.execute(
            "UPDATE labels SET name = ?, name_key = ?, color = ?, description = ?"
            " WHERE id = ? RETURNING *",
            (
                name,
                name.lower(),
                fields.get("color", old["color"]).lower(),
                fields.get("description", old["description"]),
                label_id,
            ),
        ).fetchone()
        return dict(row)

    @writes
    def delete(self, conn, label_id: int) -> dict[str, Any] | None:
        """Delete a label and take it off every issue; the deleted row (None: gone)."""
        row = conn.execute("DELETE FROM labels WHERE id = ? RETURNING *", (label_id,)).fetchone()
        if row is None:
            return None
        _rewrite(conn, self.db.sql, row["repo_id"], row["name_key"], None)
        return dict(row)
