"""check: database integrity, migrations, file modes and git fsck of every repository."""

from __future__ import annotations

import re
import sqlite3
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..config import Config
from ..datadir import too_open
from ..git.files import RepoFiles
from ..store.engines.copy import check_postgres
from ..store.engines.sqlite import integrity_problems, open_file
from .common import (
    DB_NAME,
    REPOS_NAME,
    WORKERS,
    CommandError,
    _git,
    _newest_schema,
    _output_lines,
    _repository_rows,
    _schema_version,
)
from .moving import _safe


def check_data(data_dir: Path, url: str = "") -> tuple[list[str], dict[str, int]]:
    """Every problem found in a data folder (or a backup), and what was looked at.

    url: the PostgreSQL database holding the rows (empty: the SQLite file in data_dir).
    """
    db = data_dir / DB_NAME
    if not url and not db.is_file():
        return [f"database {db} is missing"], {}
    files = RepoFiles(data_dir / REPOS_NAME)
    # Folders are listed before rows are read: a repository created in between has a
    # row and a folder, so it is never reported as an orphan.
    folders = _repository_folders(files.root)
    problems: list[str] = []
    if url:
        try:
            found, schema, rows = check_postgres(url)
        except Exception as exc:  # psycopg's errors; the message is the report
            return [f"database {_safe(url)}: {exc}"], {}
        problems += [f"database: {problem}" for problem in found]
    else:
        try:
            schema, rows, found = _check_sqlite(db)
        except sqlite3.Error as exc:
            return [f"database {db}: {exc}"], {}
        problems += found
    return _check_rest(problems, schema, rows, folders, files)


def _check_sqlite(db: Path) -> tuple[int, list[tuple[int, str]], list[str]]:
    """The SQLite file's schema version, repository rows and integrity problems."""
    conn = open_file(db, read_only=True)
    try:
        problems = [f"database: {problem}" for problem in integrity_problems(conn)]
        return _schema_version(conn), _repository_rows(conn), problems
    finally:
        conn.close()


def _check_rest(  # the repositories' side: rows against folders, and git fsck
    problems: list[str],
    schema: int,
    rows: list[tuple[int, str]],
    folders: dict[int, Path],
    files: RepoFiles,
) -> tuple[list[str], dict[str, int]]:
    if schema > _newest_schema():
        problems.append(
            f"database: schema version {schema} is newer than this hubsvc "
            f"knows ({_newest_schema()})"
        )
    known = {repo_id for repo_id, _ in rows}
    problems += [
        f"folder {path} has no repository row"
        for repo_id, path in sorted(folders.items())
        if repo_id not in known or files.path(repo_id) != path
    ]
    present = [(repo_id, label) for repo_id, label in rows if files.path(repo_id).is_dir()]
    problems += [
        f"repository {repo_id} ({label}): folder {files.path(repo_id)} is missing"
        for repo_id, label in rows
        if not files.path(repo_id).is_dir()
    ]

    def fsck(row: tuple[int, str]) -> str | None:
        done = _git(files.path(row[0]), "fsck", "--no-progress", "--no-dangling")
        if done.returncode != 0:
            return f"repository {row[0]} ({row[1]}): git fsck: {_output_lines(done)}"
        return None

    with ThreadPoolExecutor(WORKERS) as pool:
        problems += [found for found in pool.map(fsck, present) if found]
    return problems, {"schema": schema, "repositories": len(rows)}


def _repository_folders(root: Path) -> dict[int, Path]:
    """<root>/<bucket>/<id>.git folders by id."""
    found: dict[int, Path] = {}
    if not root.is_dir():
        return found
    for bucket in sorted(root.iterdir()):
        if not bucket.is_dir():
            continue
        for entry in sorted(bucket.iterdir()):
            match = re.fullmatch(r"(\d+)\.git", entry.name)
            if match and entry.is_dir():
                found[int(match.group(1))] = entry
    return found


def check(config: Config) -> None:
    """Database integrity and foreign keys, git fsck of every repository, orphans, file modes."""
    url = config["database"]["url"]
    problems, stats = check_data(config.data_dir, url)
    for line in too_open(config.data_dir):
        print(f"warning: {line}", file=sys.stderr)
    if problems:
        for line in problems:
            print(f"problem: {line}", file=sys.stderr)
        raise CommandError(
            f"check found {len(problems)} "
            f"problem{'s' if len(problems) != 1 else ''} in {config.data_dir}"
        )
    print(
        f"ok: database {_safe(url) + ' ' if url else ''}(schema {stats['schema']})"
        f" and {stats['repositories']} repositories in {config.data_dir}"
    )
