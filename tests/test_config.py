"""Configuration: defaults, file, environment, and refusals naming the key."""

from __future__ import annotations

import os
import platform
import stat
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from hubsvc.config import DEFAULTS, ConfigError, ensure_secret, load_config

ROOT = Path(__file__).resolve().parent.parent


def test_defaults_match_the_decisions():
    config = load_config(None, env={})
    assert config["server"]["host"] == "127.0.0.1" and config["server"]["port"] == 8080
    # "./data", resolved against where the server starts, once (git needs it absolute).
    assert DEFAULTS["storage"]["data_dir"] == "./data"
    assert config["storage"]["data_dir"] == str(Path.cwd() / "data")
    assert config["rate_limit"]["per_minute"] == 60 and config["rate_limit"]["burst"] == 100
    assert config["websocket"]["max_per_ip"] == 10
    assert config.base_url == "http://127.0.0.1:8080"


def test_file_then_environment_then_overrides(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(
        '[server]\nport = 9000\nbase_url = "https://hub.example/"\n'
        '[cors]\norigins = ["https://a.example"]\n'
    )
    config = load_config(
        path,
        {"server.host": "0.0.0.0"},
        env={
            "HUBSVC_CHAT_WEBHOOK_URL": "http://127.0.0.1:9/hook",
            "HUBSVC_RATE_LIMIT_ENABLED": "false",
            "HUBSVC_SERVER_PORT": "9100",
        },
    )
    assert config["server"]["port"] == 9100
    assert config["server"]["host"] == "0.0.0.0"
    assert config["chat"]["webhook_url"] == "http://127.0.0.1:9/hook"
    assert config["rate_limit"]["enabled"] is False
    assert config.base_url == "https://hub.example"


@pytest.mark.parametrize(
    "text, key",
    [
        ("[server]\nport = 'eighty'\n", "server.port"),
        ("[server]\nport = 70000\n", "server.port"),
        ("[server]\nbase_url = 'ftp://x'\n", "server.base_url"),
        ("[rate_limit]\nenabled = 'yes'\n", "rate_limit.enabled"),
        ("[rate_limit]\nburst = 0\n", "rate_limit.burst"),
        ("[cors]\norigins = 'https://a'\n", "cors.origins"),
        ("[server]\nprot = 1\n", "server.prot"),
        ("[server]\nevent_loop = 'trio'\n", "server.event_loop"),
        ("[nonsense]\nx = 1\n", "nonsense"),
        ("[server\n", "invalid TOML"),
    ],
)
def test_bad_values_name_the_key(tmp_path, text, key):
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    assert key in str(info.value)


@pytest.mark.skipif(
    sys.platform == "win32" or platform.python_implementation() != "CPython",
    reason="setup.cfg's marker leaves uvloop out here",
)
def test_the_default_install_brings_uvloop_where_it_builds():
    """The speed the benchmarks report needs no extra: uvloop is installed and chosen."""
    import asyncio

    from hubsvc.app import new_event_loop

    config = load_config(None, env={})
    assert config["server"]["event_loop"] == "auto"
    loop = new_event_loop(config["server"]["event_loop"])
    try:
        assert type(loop).__module__.startswith("uvloop")
    finally:
        loop.close()
    loop = new_event_loop("asyncio")
    try:
        assert isinstance(loop, asyncio.BaseEventLoop)
    finally:
        loop.close()


def test_bad_environment_value_names_the_key():
    with pytest.raises(ConfigError, match="websocket.max_per_ip"):
        load_config(None, env={"HUBSVC_WEBSOCKET_MAX_PER_IP": "lots"})


def test_secret_generated_once_with_mode_0600(tmp_path):
    config = load_config(None, {"storage.data_dir": str(tmp_path)}, env={})
    ensure_secret(config)
    secret = config["security"]["secret_key"]
    path = tmp_path / "secret_key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    again = load_config(None, {"storage.data_dir": str(tmp_path)}, env={})
    ensure_secret(again)
    assert again["security"]["secret_key"] == secret and len(secret) >= 32


def test_run_py_refuses_a_bad_file_with_one_line(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("[limits]\npush_bytes = -1\n")
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "run.py"),
            "--config",
            str(path),
            "--data-dir",
            str(tmp_path / "d"),
        ],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "limits.push_bytes" in lines[0]


def test_example_config_lists_every_key_with_its_default():
    with open(ROOT / "config.example.toml", "rb") as fh:
        written = tomllib.load(fh)
    assert written == DEFAULTS
