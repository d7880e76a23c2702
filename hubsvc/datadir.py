"""Modes of the data folder and its secrets: only the service's own user may read them."""

from __future__ import annotations

import os
import stat
from pathlib import Path

# The database holds password hashes and token digests, the secret key signs sessions:
# 0755/0644 (the usual umask) let every local user read them.
DIR_MODE = 0o700
FILE_MODE = 0o600
DB_NAME = "hubsvc.db"
SECRET_NAME = "secret_key"
PRIVATE_FILES = (DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm", f"{DB_NAME}-journal", SECRET_NAME)


def private_dir(path: Path) -> None:
    """Create path (and parents) if needed and set it to 0700 whatever the umask."""
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, DIR_MODE)


def private_file(path: Path) -> None:
    """Create path empty if missing and set it to 0600 whatever the umask."""
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, FILE_MODE))
    os.chmod(path, FILE_MODE)


def tighten(data_dir: Path) -> None:
    """Make the data folder 0700 and each of its secrets that exists 0600 (start-up fix)."""
    private_dir(data_dir)
    for name in PRIVATE_FILES:
        path = data_dir / name
        if path.is_file():
            os.chmod(path, FILE_MODE)


def too_open(data_dir: Path) -> list[str]:
    """A warning for the data folder or each secret file that others may read or write."""
    found = []
    for path, wanted in [(data_dir, DIR_MODE), *((data_dir / n, FILE_MODE) for n in PRIVATE_FILES)]:
        try:
            mode = stat.S_IMODE(path.stat().st_mode)
        except FileNotFoundError:
            continue
        if mode & ~wanted:
            found.append(
                f"{path} has mode {mode:04o}, wider than {wanted:04o}: "
                f"run chmod {wanted:o} {path} (the server does at start)"
            )
    return found
