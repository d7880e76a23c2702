"""Administration from the command line: accounts, backup, restore and check.

`run.py` parses the arguments and calls `run(args, config)`. Account commands go through
the same schemas and store code as the API; `backup`, `restore` and `check` work on the
data folder directly (the database file and the bare repositories) and `backup` and
`check` are safe while the server runs.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import hashlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from marshmallow import ValidationError

from schemas.users import SignUpSchema

from .. import __version__
from ..web.auth import hash_password
from ..config import Config
from ..datadir import private_dir, private_file, tighten, too_open
from ..errors import ApiError, validation_message
from ..git.files import RepoFiles
from ..store import Store
from ..store.engines.sqlite import migration_files
from ..store.repos import RepoStore
from ..timeutil import now_iso

PASSWORD_ENV = "HUBSVC_PASSWORD"
DB_NAME = "hubsvc.db"
SECRET_NAME = "secret_key"
REPOS_NAME = "repositories"
MANIFEST_NAME = "manifest.json"
BACKUP_FORMAT = "hubsvc-backup"
BACKUP_FORMAT_VERSION = 1
# What a data folder holds that restore replaces (and moves aside under --force).
DATA_ENTRIES = (DB_NAME, f"{DB_NAME}-wal", f"{DB_NAME}-shm", f"{DB_NAME}-journal",
                REPOS_NAME, SECRET_NAME)
COPY_ATTEMPTS = 5
FSCK_LINES = 5  # lines of git fsck output quoted per problem
WORKERS = min(8, os.cpu_count() or 2)


class CommandError(Exception):
    """The command failed; the message is the one line printed (exit code 1)."""


class UsageError(Exception):
    """The command was called wrongly (exit code 2)."""


def run(args: argparse.Namespace, config: Config) -> int:
    """Run one administration command; returns the exit code."""
    commands: dict[str, Callable[[], None]] = {
        "create-user": lambda: create_user(config, args.username, args.email, args.name,
                                           args.admin),
        "reset-password": lambda: reset_password(config, args.username),
        "make-admin": lambda: set_admin(config, args.username, True),
        "revoke-admin": lambda: set_admin(config, args.username, False),
        "backup": lambda: backup(config, Path(args.dest)),
        "restore": lambda: restore(config, Path(args.src), args.force),
        "check": lambda: check(config),
    }
    try:
        commands[args.command]()
    except CommandError as exc:
        print(f"hubsvc: {exc}", file=sys.stderr)
        return 1
    except UsageError as exc:
        print(f"hubsvc: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("hubsvc: interrupted", file=sys.stderr)
        return 130
    return 0


# -- accounts -------------------------------------------------------------------


def read_password() -> str:
    """From HUBSVC_PASSWORD, else asked twice on the terminal; never from argv (ps shows it)."""
    password = os.environ.get(PASSWORD_ENV)
    if password is not None:
        return password
    if not sys.stdin.isatty():
        raise UsageError(f"no password: set {PASSWORD_ENV} or run the command in a terminal")
    try:
        first = getpass.getpass("Password: ")
        second = getpass.getpass("Repeat the password: ")
    except EOFError:
        raise CommandError("no password given") from None
    if first != second:
        raise CommandError("the passwords do not match")
    return first


def _load(schema: SignUpSchema, data: dict[str, Any]) -> dict[str, Any]:
    try:
        return schema.load(data)
    except ValidationError as exc:
        raise CommandError(validation_message(exc.messages)) from None


def _checked_password() -> str:
    return _load(SignUpSchema(only=("password",)), {"password": read_password()})["password"]


def _with_store(config: Config, fn: Callable[[Store], Any], create: bool = False) -> Any:
    """Open a Store on the data folder (applying migrations), run fn, close it."""
    path = config.data_dir / DB_NAME
    if not create and not path.is_file():
        raise CommandError(f"no database at {path}")
    private_dir(config.data_dir)

    async def go() -> Any:
        store = Store(path)
        await store.open()
        try:
            return await fn(store)
        finally:
            await store.close()

    try:
        return asyncio.run(go())
    except ApiError as exc:
        raise CommandError(exc.message) from None
    except sqlite3.Error as exc:
        raise CommandError(f"database {path}: {exc}") from None


async def _user(store: Store, username: str) -> dict[str, Any]:
    user = await store.users.by_username(username)
    if user is None:
        raise CommandError(f"no user named {username}")
    if user["is_ghost"]:
        raise CommandError(f"{username} holds deleted users' work and cannot be changed")
    return user


def create_user(config: Config, username: str, email: str, name: str | None,
                admin: bool) -> None:
    """Create an account with the sign-up rules; --admin makes it an administrator."""
    fields = {"username": username, "email": email,
              "name": username if name is None else name}
    # Check the fields before asking for a password, so a typo costs no typing.
    data = _load(SignUpSchema(exclude=("password",)), fields)
    password = _checked_password()

    async def go(store: Store) -> dict[str, Any]:
        password_hash = await hash_password(password, config["security"]["bcrypt_rounds"])
        return await store.users.create(password_hash=password_hash, is_admin=admin, **data)

    user = _with_store(config, go, create=True)
    role = ", administrator" if user["is_admin"] else ""
    print(f"created user {user['username']} (id {user['id']}{role})")


def reset_password(config: Config, username: str) -> None:
    """Set a new password and revoke every token of the user (personal ones too)."""

    async def go(store: Store) -> None:
        user = await _user(store, username)
        password = _checked_password()
        password_hash = await hash_password(password, config["security"]["bcrypt_rounds"])
        await store.users.set_password(user["id"], password_hash)

    _with_store(config, go)
    print(f"changed the password of {username} and revoked its tokens")


def set_admin(config: Config, username: str, flag: bool) -> None:
    """Grant or revoke administrator rights; the last administrator keeps them."""

    async def go(store: Store) -> None:
        user = await _user(store, username)
        await store.users.set_admin(user["id"], flag)

    _with_store(config, go)
    print(f"{username} is {'now' if flag else 'no longer'} an administrator")


# -- git and files ----------------------------------------------------------------


def _git(git_dir: Path, *args: str, timeout: float | None = None) -> subprocess.CompletedProcess:
    """Run git on one repository with only its own config in effect."""
    # GIT_DIR and friends from the caller's shell must not redirect git elsewhere.
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_TERMINAL_PROMPT="0", GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
    return subprocess.run(["git", f"--git-dir={git_dir}", *args], capture_output=True,
                          env=env, timeout=timeout, stdin=subprocess.DEVNULL)


def _output_lines(done: subprocess.CompletedProcess) -> str:
    text = (done.stderr + done.stdout).decode("utf-8", "replace")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    more = f" (+{len(lines) - FSCK_LINES} more lines)" if len(lines) > FSCK_LINES else ""
    return "; ".join(lines[:FSCK_LINES]) + more or f"exit code {done.returncode}"


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
    return (name.endswith((".lock", ".tmp")) or name.startswith(("tmp_", "tmp-", "incoming-"))
            or name == "alternates" or name.startswith("multi-pack-index"))


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
    order = (["info"] + [n for n in names if re.fullmatch(r"[0-9a-f]{2}", n)] + ["pack"])
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
            shutil.copytree(path, dst / name, dirs_exist_ok=True,
                            ignore=lambda _, found: [n for n in found if _skipped(n)])
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
            time.sleep(0.1 * 2 ** attempt)
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


def _repository_rows(conn: sqlite3.Connection) -> list[tuple[int, str]]:
    """(id, "owner/name") of every repository row."""
    rows = conn.execute(
        "SELECT r.id, COALESCE(u.username, '?') || '/' || r.name FROM repositories r"
        " LEFT JOIN users u ON u.id = r.owner_id ORDER BY r.id").fetchall()
    return [(row[0], row[1]) for row in rows]


# -- backup -----------------------------------------------------------------------


def backup(config: Config, dest: Path) -> None:
    """Copy the database, every repository and the secret into DEST, while serving."""
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
        live = sqlite3.connect(source_db, timeout=30)
        try:
            copy = sqlite3.connect(dest_db, isolation_level=None)
            try:
                live.backup(copy)
                copy.execute("PRAGMA journal_mode = DELETE")  # one self-contained file
                rows = _repository_rows(copy)
            finally:
                copy.close()
        finally:
            live.close()
    except sqlite3.Error as exc:
        raise CommandError(f"database backup failed: {exc}") from None

    source_files = RepoFiles(config.data_dir / REPOS_NAME)
    dest_files = RepoFiles(dest / REPOS_NAME)
    (dest / REPOS_NAME).mkdir()
    with ThreadPoolExecutor(WORKERS) as pool:
        results = list(pool.map(
            lambda row: _copy_repository(source_files.path(row[0]), dest_files.path(row[0])),
            rows))
    missing = [row for row, (status, _) in zip(rows, results) if status == "missing"]
    failed = [f"repository {row[0]} ({row[1]}): {reason}"
              for row, (status, reason) in zip(rows, results) if status == "failed"]
    # A folder that is gone while its row is still in the live database is damage in
    # the data folder; one whose row is gone too was deleted after the snapshot.
    deleted, lost = _split_deleted(source_db, missing)
    failed += [f"repository {repo_id} ({label}): folder missing in {config.data_dir}"
               for repo_id, label in lost]
    for repo_id, _ in deleted:
        shutil.rmtree(dest_files.path(repo_id), ignore_errors=True)

    copy = sqlite3.connect(dest_db, isolation_level=None)
    try:
        if deleted:
            _drop_repository_rows(copy, [repo_id for repo_id, _ in deleted])
        problems = [row[0] for row in copy.execute("PRAGMA integrity_check")]
        if problems != ["ok"]:
            raise CommandError(f"the database copy fails its integrity check: {problems[0]}")
        schema = _schema_version(copy)
        count = copy.execute("SELECT COUNT(*) FROM repositories").fetchone()[0]
    finally:
        copy.close()

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
    # Written last: a backup without a manifest is an incomplete one.
    tmp = dest / (MANIFEST_NAME + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2) + "\n")
    os.sync()
    if failed:
        os.unlink(tmp)
        for line in failed[:-1]:
            print(f"hubsvc: {line}", file=sys.stderr)
        raise CommandError(f"backup in {dest} is incomplete: {failed[-1]}")
    os.replace(tmp, dest / MANIFEST_NAME)
    if deleted:
        print(f"note: left out {len(deleted)} repositories deleted while the backup ran: "
              + ", ".join(label for _, label in deleted))
    if config["security"]["secret_key"]:
        print("note: security.secret_key is set in the configuration; keep it with the backup")
    print(f"backed up the database (schema {schema}) and {count} repositories to {dest} "
          f"in {time.monotonic() - started:.1f} s")


def _split_deleted(source_db: Path, missing: list[tuple[int, str]]
                   ) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """Missing folders whose row the live database no longer has, and the others."""
    if not missing:
        return [], []
    live = sqlite3.connect(source_db, timeout=30)
    try:
        still = {row[0] for row in live.execute(
            f"SELECT id FROM repositories WHERE id IN ({','.join('?' * len(missing))})",
            [repo_id for repo_id, _ in missing])}
    finally:
        live.close()
    return ([row for row in missing if row[0] not in still],
            [row for row in missing if row[0] in still])


def _drop_repository_rows(conn: sqlite3.Connection, ids: list[int]) -> None:
    """Delete rows of repositories deleted after the snapshot, the way the API does."""
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


# -- check ------------------------------------------------------------------------


def check_data(data_dir: Path) -> tuple[list[str], dict[str, int]]:
    """Every problem found in a data folder (or a backup), and what was looked at."""
    db = data_dir / DB_NAME
    if not db.is_file():
        return [f"database {db} is missing"], {}
    files = RepoFiles(data_dir / REPOS_NAME)
    # Folders are listed before rows are read: a repository created in between has a
    # row and a folder, so it is never reported as an orphan.
    folders = _repository_folders(files.root)
    problems: list[str] = []
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
        try:
            problems += [f"database: {row[0]}" for row in conn.execute("PRAGMA integrity_check")
                         if row[0] != "ok"]
            problems += [f"database: {table} row {rowid} references a missing {parent} row"
                         for table, rowid, parent, _ in conn.execute("PRAGMA foreign_key_check")]
            schema = _schema_version(conn)
            rows = _repository_rows(conn)
        finally:
            conn.close()
    except sqlite3.Error as exc:
        return [f"database {db}: {exc}"], {}
    if schema > _newest_schema():
        problems.append(f"database: schema version {schema} is newer than this hubsvc "
                        f"knows ({_newest_schema()})")
    known = {repo_id for repo_id, _ in rows}
    problems += [f"folder {path} has no repository row"
                 for repo_id, path in sorted(folders.items())
                 if repo_id not in known or files.path(repo_id) != path]
    present = [(repo_id, label) for repo_id, label in rows if files.path(repo_id).is_dir()]
    problems += [f"repository {repo_id} ({label}): folder {files.path(repo_id)} is missing"
                 for repo_id, label in rows if not files.path(repo_id).is_dir()]

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
    problems, stats = check_data(config.data_dir)
    for line in too_open(config.data_dir):
        print(f"warning: {line}", file=sys.stderr)
    if problems:
        for line in problems:
            print(f"problem: {line}", file=sys.stderr)
        raise CommandError(f"check found {len(problems)} "
                           f"problem{'s' if len(problems) != 1 else ''} in {config.data_dir}")
    print(f"ok: database (schema {stats['schema']}) and {stats['repositories']} repositories "
          f"in {config.data_dir}")


# -- restore ----------------------------------------------------------------------


def _read_manifest(src: Path) -> dict[str, Any]:
    """The backup's manifest, after checking it describes what SRC holds."""
    path = src / MANIFEST_NAME
    if not path.is_file():
        raise CommandError(f"{src} has no {MANIFEST_NAME}: not a hubsvc backup, "
                           "or an incomplete one")
    try:
        manifest = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise CommandError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != BACKUP_FORMAT:
        raise CommandError(f"{path}: not a hubsvc backup manifest")
    if manifest.get("formatVersion") != BACKUP_FORMAT_VERSION:
        raise CommandError(f"{path}: backup format version {manifest.get('formatVersion')!r} "
                           f"is not {BACKUP_FORMAT_VERSION}")
    schema = manifest.get("schemaVersion")
    if not isinstance(schema, int) or schema > _newest_schema():
        raise CommandError(f"the backup has schema version {schema}, newer than this "
                           f"hubsvc's {_newest_schema()}: upgrade hubsvc first")
    database = manifest.get("database") or {}
    db = src / DB_NAME
    if not db.is_file() or _sha256(db) != database.get("sha256"):
        raise CommandError(f"{db} is missing or does not match the manifest's checksum")
    folders = len(_repository_folders(src / REPOS_NAME))
    if folders != manifest.get("repositories"):
        raise CommandError(f"the backup holds {folders} repositories, the manifest says "
                           f"{manifest.get('repositories')}")
    if manifest.get("secretKey") and not (src / SECRET_NAME).is_file():
        raise CommandError(f"{src / SECRET_NAME} is missing")
    return manifest


def _database_in_use(db: Path) -> bool:
    """True when another process has the database open (the server, say)."""
    if not db.exists():
        return False
    conn = sqlite3.connect(db, timeout=0, isolation_level=None)
    try:
        # In WAL mode every open connection holds a shared lock; an exclusive-mode
        # write lock can only be taken when no other connection exists.
        conn.execute("PRAGMA locking_mode = EXCLUSIVE")
        conn.execute("BEGIN EXCLUSIVE")
        conn.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError as exc:
        return "locked" in str(exc) or "busy" in str(exc)
    except sqlite3.DatabaseError:
        return False  # not a database at all, so no server has it open
    finally:
        conn.close()


def restore(config: Config, src: Path, force: bool) -> None:
    """Put a backup in place as the data folder; the server must be stopped."""
    manifest = _read_manifest(src)
    target = config.data_dir
    if target.exists() and not target.is_dir():
        raise CommandError(f"{target} is not a directory")
    private_dir(target)
    if _database_in_use(target / DB_NAME):
        raise CommandError(f"{target / DB_NAME} is in use: stop the server first")
    present = [name for name in DATA_ENTRIES if (target / name).exists()]
    if present and not force:
        raise CommandError(f"{target} already holds data ({', '.join(present)}); stop the "
                           "server and pass --force to replace it")
    # Everything is copied into a staging folder inside the data folder, then renamed
    # into place: an interrupted restore never leaves a half-copied data folder.
    staging = target / f".restore-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        shutil.copy2(src / DB_NAME, staging / DB_NAME)
        if (src / REPOS_NAME).is_dir():
            shutil.copytree(src / REPOS_NAME, staging / REPOS_NAME)
        else:
            (staging / REPOS_NAME).mkdir()
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
    problems, stats = check_data(target)
    if problems:
        for line in problems:
            print(f"problem: {line}", file=sys.stderr)
        raise CommandError(f"restored into {target}, but check found {len(problems)} problems")
    print(f"restored the backup of {manifest['createdAt']} (schema {stats['schema']}, "
          f"{stats['repositories']} repositories) into {target}")
