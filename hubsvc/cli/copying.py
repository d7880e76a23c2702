"""Copying a live data folder: repositories object by object, the secret, with retries."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import time
from pathlib import Path

from ..datadir import tighten
from .common import (
    ASSETS_NAME,
    COPY_ATTEMPTS,
    DB_NAME,
    MANIFEST_NAME,
    REPOS_NAME,
    SECRET_NAME,
    CommandError,
    _git,
    _output_lines,
)


def _copy_file(src: Path, dst: Path, immutable: bool) -> None:
    """Copy one file; an object file already copied is kept (its name is its content)."""
    try:
        if immutable and dst.exists() and dst.stat().st_size == src.stat().st_size:
            return
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dst)
    except FileNotFoundError:
        # git removed it meanwhile (a repack or prune); the connectivity check decides
        # whether the copy still has everything its refs need.
        pass


def _skipped(name: str) -> bool:
    # Locks and temporary files are in-flight writes; `incoming-*` is receive-pack's
    # quarantine (objects of a push not accepted yet); alternates would tie the copy to
    # the live folder; a multi-pack-index may name packs a repack just replaced.
    return (
        name.endswith((".lock", ".tmp"))
        or name.startswith(("tmp_", "tmp-", "incoming-", "multi-pack-index"))
        or name == "alternates"
    )


def _copy_objects(src: Path, dst: Path) -> None:
    """Copy objects/: info (commit-graph) first, then loose objects, then packs."""
    objects = src / "objects"
    try:
        names = sorted(os.listdir(objects))
    except FileNotFoundError:
        return
    # git writes a pack before it deletes the loose objects now in it, so loose objects
    # copied before the pack directory is listed are either copied or in a listed pack.
    # A commit-graph names commits that existed when it was written: copy it first.
    order = ["info"] + [n for n in names if re.fullmatch(r"[0-9a-f]{2}", n)] + ["pack"]
    for name in order:
        for root, dirs, files in os.walk(objects / name):
            dirs[:] = [d for d in dirs if not _skipped(d)]
            rel = Path(root).relative_to(src)
            for file in files:
                if not _skipped(file):
                    _copy_file(Path(root) / file, dst / rel / file, immutable=name != "info")


def _copy_rest(src: Path, dst: Path) -> None:
    """Copy config, description, info/ and the like: everything but objects and refs."""
    try:
        names = os.listdir(src)
    except FileNotFoundError:
        return
    for name in names:
        # Refs are written from the snapshot; reflogs may name objects never copied.
        if name in ("objects", "refs", "packed-refs", "logs", "HEAD") or _skipped(name):
            continue
        path = src / name
        if path.is_dir():
            shutil.copytree(
                path,
                dst / name,
                dirs_exist_ok=True,
                ignore=lambda _, found: [n for n in found if _skipped(n)],
            )
        else:
            _copy_file(path, dst / name, immutable=False)


def _copy_repository(src: Path, dst: Path) -> tuple[str, str]:
    """A consistent copy of a bare repository that git may be pushing to meanwhile.

    Refs are read first, objects copied after, and the refs written last from what was
    read. receive-pack (and every git command) writes all the objects a new ref value
    needs before it moves the ref, and git deletes only objects nothing points at, so
    every object named by the snapshot, and everything reachable from it, is already on
    disk when the copy starts: the copy holds a superset of what the refs need, and
    refs that moved after the snapshot are simply not in this backup. Copying the ref
    files as they are instead could catch a ref moved after the object copy began,
    pointing at objects the copy lacks. What can still go wrong is a concurrent repack
    moving objects between listing and copying, a gc pruning an object a force-push
    just orphaned, or a repository still being created: `git fsck --connectivity-only`
    on the copy catches each, and the copy is redone from a fresh snapshot (objects
    already copied are kept).

    Returns ("ok", ""), ("missing", reason) when the folder is not there, or
    ("failed", reason).
    """
    status, reason = "missing", "folder missing"
    for attempt in range(COPY_ATTEMPTS):
        if attempt:
            time.sleep(0.1 * 2**attempt)
        try:
            status, reason = _copy_once(src, dst)
        except OSError as exc:  # the folder went away while it was being copied
            status, reason = "missing" if not src.exists() else "failed", str(exc)
        if status == "ok":
            break
    return status, reason


def _copy_once(src: Path, dst: Path) -> tuple[str, str]:
    """One attempt of _copy_repository."""
    if not (src / "HEAD").is_file():
        return "missing", "folder missing"
    head = (src / "HEAD").read_bytes()
    listed = _git(src, "for-each-ref", "--format=%(objectname) %(refname)", timeout=300)
    if listed.returncode != 0:
        return "failed", f"git for-each-ref: {_output_lines(listed)}"
    # git only takes a folder with objects/ and refs/ for a repository, and an empty
    # one has no file in either to bring them along.
    for sub in ("objects/info", "objects/pack"):
        (dst / sub).mkdir(parents=True, exist_ok=True)
    _copy_objects(src, dst)
    _copy_rest(src, dst)
    shutil.rmtree(dst / "refs", ignore_errors=True)
    (dst / "refs" / "heads").mkdir(parents=True)
    (dst / "refs" / "tags").mkdir()
    # A packed-refs file without a header line is read as unsorted and unpeeled, and
    # "<oid> <refname>" per line is exactly for-each-ref's output above.
    (dst / "packed-refs").write_bytes(listed.stdout)
    (dst / "HEAD").write_bytes(head)
    verified = _git(dst, "fsck", "--connectivity-only", "--no-dangling", "--no-progress")
    if verified.returncode != 0:
        return "failed", f"copy is incomplete: {_output_lines(verified)}"
    return "ok", ""


def _copy_secret(src: Path, dst: Path) -> None:
    """Copy the secret key file, readable by its owner only."""
    data = src.read_bytes()
    fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(dst, 0o600)


def copy_assets(data_dir: Path, dest: Path) -> None:
    """Copy the release assets into a backup: each file is written once, then renamed into
    place, so every file copied is whole (one uploaded after the snapshot is an extra)."""
    if (data_dir / ASSETS_NAME).is_dir():
        shutil.copytree(data_dir / ASSETS_NAME, dest / ASSETS_NAME)


def stage_into(target: Path, src: Path, present: list[str], with_database: bool) -> None:
    """Copy a backup's files into the data folder through a staging folder, whole or not at all.

    Everything is copied into a staging folder inside the data folder, then renamed into
    place: an interrupted restore never leaves a half-copied data folder. What it
    replaces (present) is moved aside into pre-restore-<time>/, never deleted.
    """
    staging = target / f".restore-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        if with_database:
            shutil.copy2(src / DB_NAME, staging / DB_NAME)
        if (src / REPOS_NAME).is_dir():
            shutil.copytree(src / REPOS_NAME, staging / REPOS_NAME)
        else:
            (staging / REPOS_NAME).mkdir()
        if (src / ASSETS_NAME).is_dir():
            shutil.copytree(src / ASSETS_NAME, staging / ASSETS_NAME)
        if (src / SECRET_NAME).is_file():
            _copy_secret(src / SECRET_NAME, staging / SECRET_NAME)
        os.sync()
        if present:
            aside = target / f"pre-restore-{time.strftime('%Y%m%dT%H%M%S')}"
            aside.mkdir()
            for name in present:
                os.replace(target / name, aside / name)
            print(f"moved the data it replaces to {aside}")
        for entry in staging.iterdir():
            os.replace(entry, target / entry.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    tighten(target)  # copy2 kept the backup's modes


def finish_backup(dest: Path, manifest: dict, failed: list[str]) -> None:
    """Write the manifest last (a backup without one is incomplete), or fail naming why."""
    tmp = dest / (MANIFEST_NAME + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2) + "\n")
    os.sync()
    if failed:
        os.unlink(tmp)
        for line in failed[:-1]:
            print(f"hubsvc: {line}", file=sys.stderr)
        raise CommandError(f"backup in {dest} is incomplete: {failed[-1]}")
    os.replace(tmp, dest / MANIFEST_NAME)
