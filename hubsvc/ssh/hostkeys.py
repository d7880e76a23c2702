"""The server's host keys: configured files, or an Ed25519 and an RSA key made once."""

from __future__ import annotations

import os
from pathlib import Path

import asyncssh

from ..datadir import private_dir

# (file name, algorithm, options): made in <data>/ssh/ on the first start, never again.
MADE: tuple[tuple[str, str, dict[str, int]], ...] = (
    ("ssh_host_ed25519_key", "ssh-ed25519", {}),
    ("ssh_host_rsa_key", "ssh-rsa", {"key_size": 3072}),
)
# /api/meta's names, GitHub's: SHA256_<ALGORITHM>.
META_NAMES = {"ssh-ed25519": "SHA256_ED25519", "ssh-rsa": "SHA256_RSA"}


def _make_once(path: Path, algorithm: str, options: dict) -> None:
    """Write a new key at path unless one is there; of processes racing, one key wins."""
    if path.exists():
        return
    key = asyncssh.generate_private_key(algorithm, **options)
    # Written whole under a name of this process's, then linked into place: a link fails
    # when the name exists, so processes starting together all end up with one key.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(key.export_private_key())
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        os.unlink(tmp)


def load_host_keys(data_dir: Path, configured: list[str]) -> list[asyncssh.SSHKey]:
    """The configured host keys, else the data folder's (made on first use, mode 0600)."""
    if configured:
        return [asyncssh.read_private_key(path) for path in configured]
    folder = data_dir / "ssh"
    private_dir(folder)
    keys = []
    for name, algorithm, options in MADE:
        _make_once(folder / name, algorithm, options)
        keys.append(asyncssh.read_private_key(folder / name))
    return keys


def fingerprints(keys: list[asyncssh.SSHKey]) -> dict[str, str]:
    """GitHub's /meta shape: {"SHA256_ED25519": "<base64>", ...} for the keys served."""
    found = {}
    for key in keys:
        name = META_NAMES.get(key.get_algorithm(), "SHA256_" + key.get_algorithm().upper())
        found[name] = key.get_fingerprint("sha256").removeprefix("SHA256:")
    return found
