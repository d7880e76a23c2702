"""backup and restore: a consistent copy of the database and repositories, and back.

`backup` is safe while the server runs; `restore` needs it stopped."""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from .. import __version__
from ..config import Config
from ..datadir import private_dir, private_file
from ..git.files import RepoFiles
from ..store.engines.sqlite import in_use, integrity_problems, open_file, snapshot
from ..store.repos import RepoStore
from ..timeutil import now_iso
from .check import _repository_folders, check_data
from .common import (
    BACKUP_FORMAT,
    BACKUP_FORMAT_VERSION,
    DATA_ENTRIES,
    DB_NAME,
    MANIFEST_NAME,
    REPOS_NAME,
    SECRET_NAME,
    WORKERS,
    CommandError,
    _newest_schema,
    _repository_rows,
    _schema_version,
    _sha256,
)
from .copying import _copy_repository, _copy_secret, copy_assets, finish_backup, stage_into
from .pgbackup import backup_postgres, restore_postgres


def backup(config: Config, dest: Path) -> None:
    """Copy the database, every repository and the secret into DEST, while serving."""
    if config["database"]["url"]:
        return backup_postgres(config, dest)
    started = time.monotonic()
    source_db = config.data_dir / DB_NAME
    if not source_db.is_file():
        raise CommandError(f"no database at {source_db}")
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise CommandError(f"{dest} exists and is not empty")
    # A backup holds the same password hashes and secret as the data folder: as private.
    private_dir(dest)
    dest_db = dest / DB_NAME
    private_file(dest_db)

    # The database first: SQLite's online backup copies one consistent snapshot (the
    # single step runs in one read transaction; WAL lets the server keep writing).
    # Repositories are copied after, from the snapshot's rows, so each one is at least
    # as new as the database rows that mention its commits.
    try:
        snapshot(source_db, dest_db)
        copy = open_file(dest_db)
        try:
            # A create that had not answered 201 at the snapshot is undone, as recovery
            # would undo it on the restored service; left in, the manifest counted a
            # repository the restored service then removed.
            creating = [row[0] for row in copy.execute("SELECT repo_id FROM repos_in_creation")]
            if creating:
                _drop_repository_rows(copy, creating)
            rows = _repository_rows(copy)
        finally:
            copy.close()
    except sqlite3.Error as exc:
        raise CommandError(f"database backup failed: {exc}") from None

    source_files = RepoFiles(config.data_dir / REPOS_NAME)
    dest_files = RepoFiles(dest / REPOS_NAME)
    (dest / REPOS_NAME).mkdir()
    with ThreadPoolExecutor(WORKERS) as pool:
        results = list(
            pool.map(
                lambda row: _copy_repository(source_files.path(row[0]), dest_files.path(row[0])),
                rows,
            )
        )
    missing = [row for row, (status, _) in zip(rows, results) if status == "missing"]
    failed = [
        f"repository {row[0]} ({row[1]}): {reason}"
        for row, (status, reason) in zip(rows, results)
        if status == "failed"
    ]
    # A folder that is gone while its row is still in the live database is damage in
    # the data folder; one whose row is gone too was deleted after the snapshot.
    deleted, lost = _split_deleted(source_db, missing)
    failed += [
        f"repository {repo_id} ({label}): folder missing in {config.data_dir}"
        for repo_id, label in lost
    ]
    for repo_id, _ in deleted:
        shutil.rmtree(dest_files.path(repo_id), ignore_errors=True)

    copy = open_file(dest_db)
    try:
        if deleted:
            _drop_repository_rows(copy, [repo_id for repo_id, _ in deleted])
        problems = integrity_problems(copy, foreign_keys=False)
        if problems:
            raise CommandError(f"the database copy fails its integrity check: {problems[0]}")
        schema = _schema_version(copy)
        count = copy.execute("SELECT COUNT(*) FROM repositories").fetchone()[0]
    finally:
        copy.close()

    copy_assets(config.data_dir, dest)
    secret = config.data_dir / SECRET_NAME
    if secret.is_file():
        _copy_secret(secret, dest / SECRET_NAME)
    manifest = {
        "format": BACKUP_FORMAT,
        "formatVersion": BACKUP_FORMAT_VERSION,
        "createdAt": now_iso(),
        "hubsvcVersion": __version__,
        "schemaVersion": schema,
        "repositories": count,
        "database": {"file": DB_NAME, "sha256": _sha256(dest_db)},
        "secretKey": secret.is_file(),
    }
    finish_backup(dest, manifest, failed)
    if deleted:
        print(
            f"note: left out {len(deleted)} repositories deleted while the backup ran: "
            + ", ".join(label for _, label in deleted)
        )
    if config["security"]["secret_key"]:
        print("note: security.secret_key is set in the configuration; keep it with the backup")
    print(
        f"backed up the database (schema {schema}) and {count} repositories to {dest} "
        f"in {time.monotonic() - started:.1f} s"
    )


def _split_deleted(
    source_db: Path, missing: list[tuple[int, str]]
) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """Missing folders whose row the live database no longer has, and the others."""
    if not missing:
        return [], []
    live = open_file(source_db, read_only=True)
    try:
        still = {
            row[0]
            for row in live.execute(
                f"SELECT id FROM repositories WHERE id IN ({','.join('?' * len(missing))})",
                [repo_id for repo_id, _ in missing],
            )
        }
    finally:
        live.close()
    return (
        [row for row in missing if row[0] not in still],
        [row for row in missing if row[0] in still],
    )


def _drop_repository_rows(conn: sqlite3.Connection, ids: list[int]) -> None:
    """Delete repository rows from the copy the way the API does (deleted after the
    snapshot, or still in creation at it)."""
    conn.row_factory = sqlite3.Row  # what the store's queries expect
    conn.execute("PRAGMA foreign_keys = ON")
    repos = RepoStore(None)  # only the synchronous query is used, on this connection
    conn.execute("BEGIN IMMEDIATE")
    try:
        for repo_id in ids:
            RepoStore.delete.sync(repos, conn, repo_id)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _read_manifest(src: Path) -> dict[str, Any]:
    """The backup's manifest, after checking it describes what SRC holds."""
    path = src / MANIFEST_NAME
    if not path.is_file():
        raise CommandError(
            f"{src} has no {MANIFEST_NAME}: not a hubsvc backup, or an incomplete one"
        )
    try:
        manifest = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise CommandError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != BACKUP_FORMAT:
        raise CommandError(f"{path}: not a hubsvc backup manifest")
    if manifest.get("formatVersion") != BACKUP_FORMAT_VERSION:
        raise CommandError(
            f"{path}: backup format version {manifest.get('formatVersion')!r} "
            f"is not {BACKUP_FORMAT_VERSION}"
        )
    schema = manifest.get("schemaVersion")
    if not isinstance(schema, int) or schema > _newest_schema():
        raise CommandError(
            f"the backup has schema version {schema}, newer than this "
            f"hubsvc's {_newest_schema()}: upgrade hubsvc first"
        )
    database = manifest.get("database") or {}
    db = src / str(database.get("file") or DB_NAME)
    if not db.is_file() or _sha256(db) != database.get("sha256"):
        raise CommandError(f"{db} is missing or does not match the manifest's checksum")
    folders = len(_repository_folders(src / REPOS_NAME))
    if folders != manifest.get("repositories"):
        raise CommandError(
            f"the backup holds {folders} repositories, the manifest says "
            f"{manifest.get('repositories')}"
        )
    if manifest.get("secretKey") and not (src / SECRET_NAME).is_file():
        raise CommandError(f"{src / SECRET_NAME} is missing")
    return manifest


def restore(config: Config, src: Path, force: bool) -> None:
    """Put a backup in place as the data folder; the server must be stopped."""
    manifest = _read_manifest(src)
    of_postgres = (manifest.get("database") or {}).get("engine") == "postgresql"
    if of_postgres != bool(config["database"]["url"]):
        raise CommandError(
            "the backup is of a PostgreSQL database: set [database] url to an empty one"
            if of_postgres
            else "the backup is of a SQLite database: restore it with [database] url empty,"
            " then move it with copy-database"
        )
    if of_postgres:
        return restore_postgres(config, src, manifest, force)
    target = config.data_dir
    if target.exists() and not target.is_dir():
        raise CommandError(f"{target} is not a directory")
    private_dir(target)
    if in_use(target / DB_NAME):
        raise CommandError(f"{target / DB_NAME} is in use: stop the server first")
    present = [name for name in DATA_ENTRIES if (target / name).exists()]
    if present and not force:
        raise CommandError(
            f"{target} already holds data ({', '.join(present)}); stop the "
            "server and pass --force to replace it"
        )
    stage_into(target, src, present, with_database=True)
    problems, stats = check_data(target)
    if problems:
        for line in problems:
            print(f"problem: {line}", file=sys.stderr)
        raise CommandError(f"restored into {target}, but check found {len(problems)} problems")
    print(
        f"restored the backup of {manifest['createdAt']} (schema {stats['schema']}, "
        f"{stats['repositories']} repositories) into {target}"
    )
