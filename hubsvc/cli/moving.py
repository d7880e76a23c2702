"""copy-database: move an install from its SQLite file into an empty PostgreSQL database."""

from __future__ import annotations

import time

from ..config import Config
from ..store.engines import postgres
from ..store.engines.copy import copy_rows, is_empty
from ..store.engines.sqlite import in_use, open_file
from .common import DB_NAME, CommandError, _newest_schema, _schema_version


def copy_database(config: Config, to: str) -> None:
    """Copy every table of the data folder's SQLite database into an empty PostgreSQL one."""
    started = time.monotonic()
    if not to.startswith(("postgresql://", "postgres://")):
        raise CommandError("--to must be a postgresql:// URL")
    source = config.data_dir / DB_NAME
    if not source.is_file():
        raise CommandError(f"no database at {source}")
    if in_use(source):
        raise CommandError(f"{source} is open in another process: stop the server first")
    lite = open_file(source, read_only=True)
    try:
        schema = _schema_version(lite)
        if schema != _newest_schema():
            raise CommandError(
                f"{source} is at schema {schema}, this hubsvc at {_newest_schema()}:"
                " start the server on it once (it migrates), stop it, then copy"
            )
        try:
            pg = postgres.connect(to)
        except Exception as exc:
            raise CommandError(f"cannot connect to {_safe(to)}: {exc}") from None
        with pg:
            if not is_empty(pg):
                raise CommandError(f"{_safe(to)} is not empty: copy into a new database")
            postgres.apply_migrations(pg)
            counts = copy_rows(lite, pg)
    finally:
        lite.close()
    total = sum(counts.values())
    print(
        f"copied {total} rows of {len(counts)} tables from {source} to {_safe(to)}"
        f" in {time.monotonic() - started:.1f} s; set [database] url to it, then run check"
    )


def _safe(url: str) -> str:
    """A URL fit to print: without its password."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
