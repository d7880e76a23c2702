"""Account commands: create-user, reset-password, reset-2fa, make-admin and revoke-admin.

They go through the same schemas and store code as the API."""

from __future__ import annotations

import asyncio
import getpass
import os
import sqlite3
import sys
from collections.abc import Callable
from typing import Any

from marshmallow import ValidationError

from schemas.users import SignUpSchema

from ..cluster.link import tell_servers
from ..config import Config
from ..datadir import private_dir
from ..errors import ApiError, validation_message
from ..store import Store
from ..store.engines import fault_of
from ..web.auth import hash_password
from .common import DB_NAME, PASSWORD_ENV, CommandError, UsageError
from .moving import _safe


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
    """Open the Store the configuration names (applying migrations), run fn, close it."""
    path = config.data_dir / DB_NAME
    url = config["database"]["url"]  # PostgreSQL; empty: the SQLite file
    if not url and not create and not path.is_file():
        raise CommandError(f"no database at {path}")
    private_dir(config.data_dir)

    async def go() -> Any:
        store = Store(path, url=url, pool_size=2)
        await store.open()
        try:
            return await fn(store)
        finally:
            await store.close()

    try:
        return asyncio.run(go())
    except ApiError as exc:
        raise CommandError(exc.message) from None
    except Exception as exc:
        if not isinstance(exc, sqlite3.Error) and fault_of(exc) is None:
            raise
        raise CommandError(f"database {_safe(url) if url else path}: {exc}") from None


async def _user(store: Store, username: str) -> dict[str, Any]:
    user = await store.users.by_username(username)
    if user is None:
        raise CommandError(f"no user named {username}")
    if user["is_ghost"]:
        raise CommandError(f"{username} holds deleted users' work and cannot be changed")
    return user


def create_user(config: Config, username: str, email: str, name: str | None, admin: bool) -> None:
    """Create an account with the sign-up rules; --admin makes it an administrator."""
    fields = {"username": username, "email": email, "name": username if name is None else name}
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

    async def go(store: Store) -> int:
        user = await _user(store, username)
        password = _checked_password()
        password_hash = await hash_password(password, config["security"]["bcrypt_rounds"])
        await store.users.set_password(user["id"], password_hash)
        return user["id"]

    user_id = _with_store(config, go)
    _tell_servers(config, "credentials", user=user_id, digests=None, keep=None)
    print(f"changed the password of {username} and revoked its tokens")


def reset_two_factor(config: Config, username: str) -> None:
    """Turn off a user's second factor (they lost it): the password alone signs in again."""

    async def go(store: Store) -> tuple[int, bool]:
        user = await _user(store, username)
        return user["id"], await store.two_factor.reset(user["id"])

    user_id, had = _with_store(config, go)
    # Other servers' cached audiences: an organization's rule now holds the user back.
    _tell_servers(config, "audience", repo=None)
    if had:
        print(f"turned off two-factor authentication of {username}")
    else:
        print(f"{username} had no second factor")


def _tell_servers(config: Config, kind: str, **data: Any) -> None:
    """With [redis] url set, the running servers act on the change now (tokens, caches)."""
    if config["redis"]["url"]:
        tell_servers(config["redis"]["url"], config["redis"]["prefix"], kind, **data)


def set_admin(config: Config, username: str, flag: bool) -> None:
    """Grant or revoke administrator rights; the last administrator keeps them."""

    async def go(store: Store) -> int:
        user = await _user(store, username)
        await store.users.set_admin(user["id"], flag)
        return user["id"]

    user_id = _with_store(config, go)
    _tell_servers(config, "user", user=user_id)
    print(f"{username} is {'now' if flag else 'no longer'} an administrator")
