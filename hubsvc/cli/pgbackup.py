"""backup and restore when the rows live in PostgreSQL: pg_dump and pg_restore do the database."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from .. import __version__
from ..config import Config
from ..datadir import private_dir, private_file
from ..git.files import RepoFiles
from ..store.engines.copy import check_postgres, is_empty
from ..store.engines.postgres import Connection, connect, row_factory
from ..store.repos import RepoStore
from ..timeutil import now_iso
from .check import check_data
from .common import (
    ASSETS_NAME,
    BACKUP_FORMAT,
    BACKUP_FORMAT_VERSION,
    REPOS_NAME,
    SECRET_NAME,
    WORKERS,
    CommandError,
    _repository_rows,
    _sha256,
)
from .copying import _copy_repository, _copy_secret, copy_assets, finish_backup, stage_into
from .moving import _safe

DUMP_NAME = "hubsvc.pgdump"


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise CommandError(
            f"the database is PostgreSQL: backup and restore call {name}, which is not"
            " installed (Debian: apt-get install postgresql-client)"
        )
    return found


def _run(argv: list[str]) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise CommandError(f"{Path(argv[0]).name} failed: {' '.join(tail)}")


def backup_postgres(config: Config, dest: Path) -> None:
    """pg_dump of the database (one snapshot), then the repositories its rows name."""
    started = time.monotonic()
    url = config["database"]["url"]
    pg_dump = _tool("pg_dump")
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise CommandError(f"{dest} exists and is not empty")
    private_dir(dest)
    dump = dest / DUMP_NAME
    private_file(dump)
    print(f"note: the database is PostgreSQL; pg_dump writes {dump}")
    # The repositories are read in the snapshot pg_dump then dumps (an exported one,
    # held open meanwhile): read after it, a repository created in between had its
    # folder copied and no row in the dump, and restore's check refused the backup.
    from psycopg import IsolationLevel

    with connect(url, autocommit=False) as held:
        held.isolation_level = IsolationLevel.REPEATABLE_READ
        held.read_only = True
        snapshot = held.execute("SELECT pg_export_snapshot()").fetchone()[0]
        schema, rows, creating = _snapshot_rows(held)
        _run(
            [pg_dump, "--format=custom", "--no-owner", f"--snapshot={snapshot}"]
            + ["--file", str(dump), url]
        )
        held.rollback()
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
    _, _, now = check_postgres(url)
    still = {repo_id for repo_id, _ in now}
    deleted: list[int] = []
    failed: list[str] = []
    for row, (status, reason) in zip(rows, results, strict=True):
        if status == "missing" and row[0] not in still:
            deleted.append(row[0])
            shutil.rmtree(dest_files.path(row[0]), ignore_errors=True)
        elif status != "ok":
            failed.append(f"repository {row[0]} ({row[1]}): {reason or 'folder missing'}")
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
        "repositories": len(rows) - len(deleted),
        "database": {"engine": "postgresql", "file": DUMP_NAME, "sha256": _sha256(dump)},
        # Deleted while the backup ran, or in creation at the dump (a create that had not
        # answered 201, undone as recovery would undo it): in the dump, not in
        # repositories/; restore deletes their rows.
        "leftOut": creating + deleted,
        "secretKey": secret.is_file(),
    }
    finish_backup(dest, manifest, failed)
    print(
        f"backed up {_safe(url)} (schema {schema}) and {manifest['repositories']}"
        f" repositories to {dest} in {time.monotonic() - started:.1f} s"
    )


def _snapshot_rows(conn: Any) -> tuple[int, list[tuple[int, str]], list[int]]:
    """The schema version, the repositories made ((id, "owner/name")) and those still in
    creation (ids), as conn's transaction sees them."""
    schema = conn.execute("SELECT COALESCE(MAX(version), 0) FROM schema_migrations").fetchone()[0]
    creating = [row[0] for row in conn.execute("SELECT repo_id FROM repos_in_creation")]
    pending = set(creating)
    return schema, [r for r in _repository_rows(conn) if r[0] not in pending], creating


def restore_postgres(config: Config, src: Path, manifest: dict[str, Any], force: bool) -> None:
    """pg_restore into the configured (empty) database, then the repositories and secret."""
    url = config["database"]["url"]
    pg_restore = _tool("pg_restore")
    with connect(url) as pg:
        if not is_empty(pg) and not force:
            raise CommandError(
                f"{_safe(url)} already holds tables; stop every server and pass --force"
                " to replace them"
            )
    target = config.data_dir
    private_dir(target)
    present = [name for name in (REPOS_NAME, ASSETS_NAME, SECRET_NAME) if (target / name).exists()]
    if present and not force:
        raise CommandError(f"{target} already holds data ({', '.join(present)}); pass --force")
    clean = ["--clean", "--if-exists"] if force else []
    _run(
        [
            pg_restore,
            "--no-owner",
            "--single-transaction",
            *clean,
            "--dbname",
            url,
            str(src / DUMP_NAME),
        ]
    )
    if manifest.get("leftOut"):
        _drop_repositories(url, [int(repo_id) for repo_id in manifest["leftOut"]])
    stage_into(target, src, present, with_database=False)
    problems, stats = check_data(target, url)
    if problems:
        for line in problems:
            print(f"problem: {line}", file=sys.stderr)
        raise CommandError(f"restored into {_safe(url)}, but check found {len(problems)} problems")
    print(
        f"restored the backup of {manifest['createdAt']} (schema {stats['schema']}, "
        f"{stats['repositories']} repositories) into {_safe(url)} and {target}"
    )


def _drop_repositories(url: str, ids: list[int]) -> None:
    """Delete repository rows the way the API does (deleted during the backup, or
    still in creation at its dump)."""
    with connect(url, autocommit=False) as raw:
        raw.row_factory = row_factory  # what the store's queries expect
        repos = RepoStore(None)  # only the synchronous query is used, on this connection
        for repo_id in ids:
            RepoStore.delete.sync(repos, Connection(raw), repo_id)
        raw.commit()
