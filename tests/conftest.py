"""Fixtures: the real app from create_app over a temp folder, signed-in users, recorded events."""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

# Where the environment says not to write bytecode (PYTHONDONTWRITEBYTECODE), every
# server process, command-line run and xdist worker would compile hubsvc and the tests
# again: seconds each, hundreds of times a run. Their bytecode goes to a folder of its
# own outside the tree instead (PYTHONPYCACHEPREFIX), for this process and every one
# it starts; set before hubsvc is imported below.
if sys.flags.dont_write_bytecode and not os.environ.get("PYTHONPYCACHEPREFIX"):
    _prefix = os.path.join(tempfile.gettempdir(), f"hubsvc-test-pycache-{os.getuid()}")
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = _prefix
    sys.dont_write_bytecode = False
    sys.pycache_prefix = _prefix

from aiohttp import web

from hubsvc.app import create_app
from hubsvc.config import load_config
from hubsvc.keys import BUS

from .servers import (  # noqa: F401 - fixtures for every test module
    close_databases,
    fresh_postgres_database,
    postgres_server,
    postgres_url,
    redis_url,
)

_names = itertools.count(1)
# The SSH port (2222 by default) stays off in tests unless one asks for it: tests run in
# parallel, and each app and server process would otherwise bind the same port.
os.environ["HUBSVC_SSH_PORT"] = "0"


# The tests that run longest: schemathesis' parts (30-50 s each) and stateful runs (15-30 s
# each), then the files whose tests run several server processes for tens of seconds each.
# A name with "::" is one test function (all its parameters), one without a whole file.
# Run first, they are over before the end; left in alphabetical order, a late one ran alone
# at the end while the other worker sat idle. The work-stealing scheduler (--dist worksteal,
# setup.cfg) then hands an idle worker the other's last, short tests.
LONGEST_FIRST = (
    "test_fuzz.py::test_schemathesis_finds_nothing",
    "test_fuzz.py::test_stateful_with_every_credential",
    "test_rolling_restart.py",
    "test_outages.py",
    "test_postgres_restart.py",
    "test_full_disk_cluster.py",
    "test_lease_faults.py",
    "test_crash_journals.py",
    "test_crash.py",
    "test_leases.py",
    "test_cluster.py",
    "test_cluster_proxy.py",
    "test_copy_database.py",
    "test_admin.py",
)


def pytest_collection_modifyitems(session, config, items) -> None:
    rank = {name: n for n, name in enumerate(LONGEST_FIRST)}

    def place(item) -> int:
        test = f"{item.path.name}::{getattr(item, 'originalname', item.name)}"
        return rank.get(test, rank.get(item.path.name, len(rank)))

    # Stable: each file's tests keep their order, and every worker sorts the same way.
    items.sort(key=place)


def pytest_sessionfinish(session, exitstatus) -> None:
    close_databases()  # the PostgreSQL databases still being dropped, or made ahead


def make_config(tmp_path, **overrides: Any):
    """A config over tmp_path; rate limits off unless a test turns them on."""
    values = {
        "storage.data_dir": str(tmp_path / "data"),
        "security.bcrypt_rounds": 4,
        "rate_limit.enabled": False,
        "server.port": 8080,
        "ssh.port": 0,  # off unless the test asks
    }
    values.update({k.replace("__", "."): v for k, v in overrides.items()})
    return load_config(None, values, env={})


@pytest.fixture(params=["sqlite", "postgres"])
def database_url(request) -> Iterator[str]:
    """Each test of the app and its store runs on both engines (PostgreSQL: when set up)."""
    if request.param == "sqlite":
        yield ""
    else:
        yield from fresh_postgres_database(postgres_server())


@pytest.fixture
def config(tmp_path, database_url):
    return make_config(tmp_path, database__url=database_url)


@pytest.fixture
async def app(config) -> web.Application:
    return create_app(config)


@pytest.fixture
async def client(app, aiohttp_client):
    # app first: its database must outlive the client that closes the app
    return await aiohttp_client(app)


class Recorder:
    """Collects every event published on the bus."""

    def __init__(self) -> None:
        self.events: list = []

    async def __call__(self, event) -> None:
        self.events.append(event)

    async def wait_for(self, count: int, timeout: float = 5.0) -> list:
        """Wait until at least count events arrived."""

        async def poll() -> None:
            while len(self.events) < count:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(poll(), timeout)
        return self.events

    def of(self, type_: str) -> list:
        return [e for e in self.events if e.type == type_]


@pytest.fixture
async def events(client):
    recorder = Recorder()
    unsubscribe = client.app[BUS].subscribe(recorder, name="test-recorder")
    yield recorder
    unsubscribe()


class User:
    """A signed-up account with its bearer token."""

    def __init__(self, data: dict, token: str, password: str) -> None:
        self.data = data
        self.token = token
        self.password = password
        self.username = data["username"]
        self.id = data["id"]

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


async def sign_up(client, username: str | None = None, password: str = "correct horse") -> User:
    """Create an account through the API."""
    username = username or f"user{next(_names)}"
    resp = await client.post(
        "/auth/sign-up",
        json={
            "email": f"{username}@example.com",
            "username": username,
            "password": password,
            "name": username.title(),
        },
    )
    assert resp.status == 201, await resp.text()
    body = await resp.json()
    client.session.cookie_jar.clear()  # keep tests on explicit credentials
    return User(body["user"], body["token"], password)


@pytest.fixture
async def alice(client) -> User:
    return await sign_up(client, "alice")


@pytest.fixture
async def bob(client) -> User:
    return await sign_up(client, "bob")


@pytest.fixture
def small_disk(tmp_path):
    """A 6 MB tmpfs mounted under tmp_path (root only), unmounted afterwards."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small filesystem needs root")
    mount = tmp_path / "small"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {done.stderr.strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)
