"""What the command-line tools share: the data folder's names, errors, git and hashing."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

from ..store.engines.sqlite import migration_files

PASSWORD_ENV = "HUBSVC_PASSWORD"
DB_NAME = "hubsvc.db"
SECRET_NAME = "secret_key"
REPOS_NAME = "repositories"
ASSETS_NAME = "assets"  # release assets, <assets>/<repo_id // 1000>/<repo_id>/<asset id>
MANIFEST_NAME = "manifest.json"
BACKUP_FORMAT = "hubsvc-backup"
BACKUP_FORMAT_VERSION = 1
# What a data folder holds that restore replaces (and moves aside under --force).
DATA_ENTRIES = (
    DB_NAME,
    f"{DB_NAME}-wal",
    f"{DB_NAME}-shm",
    f"{DB_NAME}-journal",
    REPOS_NAME,
    ASSETS_NAME,
    SECRET_NAME,
)
COPY_ATTEMPTS = 5
FSCK_LINES = 5  # lines of git fsck output quoted per problem
WORKERS = min(8, os.cpu_count() or 2)


class CommandError(Exception):
    """The command failed; the message is the one line printed (exit code 1)."""


class UsageError(Exception):
    """The command was called wrongly (exit code 2)."""


def _git(git_dir: Path, *args: str, timeout: float | None = None) -> subprocess.CompletedProcess:
    """Run git on one repository with only its own config in effect."""
    # GIT_DIR and friends from the caller's shell must not redirect git elsewhere.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_TERMINAL_PROMPT="0", GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    return subprocess.run(
        ["git", f"--git-dir={git_dir}", *args],
        capture_output=True,
        env=env,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def _output_lines(done: subprocess.CompletedProcess) -> str:
    text = (done.stderr + done.stdout).decode("utf-8", "replace")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    more = f" (+{len(lines) - FSCK_LINES} more lines)" if len(lines) > FSCK_LINES else ""
    return "; ".join(lines[:FSCK_LINES]) + more or f"exit code {done.returncode}"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _newest_schema() -> int:
    return max((version for version, _, _ in migration_files()), default=0)


def _schema_version(conn: sqlite3.Connection) -> int:
    try:
        return conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()[0]
    except sqlite3.OperationalError:
        raise CommandError("not a hubsvc database (no schema_migrations table)") from None


def _repository_rows(conn: Any) -> list[tuple[int, str]]:
    """(id, "owner/name") of every repository row (a SQLite or PostgreSQL connection)."""
    rows = conn.execute(
        "SELECT r.id, COALESCE(u.username, '?') || '/' || r.name FROM repositories r"
        " LEFT JOIN users u ON u.id = r.owner_id ORDER BY r.id"
    ).fetchall()
    return [(row[0], row[1]) for row in rows]
