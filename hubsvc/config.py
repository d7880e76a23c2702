"""Configuration: TOML file, environment overrides, defaults and validation."""

from __future__ import annotations

import os
import re
import secrets
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .datadir import private_dir
from .links import SiteUrl, ssh_base


class ConfigError(Exception):
    """A bad configuration; the message names the key."""


# section -> key -> default; the one list of every key (config.example.toml mirrors it).
DEFAULTS: dict[str, dict[str, Any]] = {
    "server": {
        "host": "127.0.0.1",
        "port": 8080,
        "base_url": "",
        "web_url": "",
        "trusted_proxies": [],
        "max_body_bytes": 1048576,
        "access_log_json": False,
        "header_timeout_seconds": 30,
        "body_timeout_seconds": 60,
        "git_processes": 32,
        "git_processes_per_client": 8,
        "min_free_mb": 512,
        "event_loop": "auto",
        "drain_seconds": 30,
    },
    "database": {"url": "", "write_timeout_ms": 5000, "read_timeout_ms": 2000, "pool_size": 10},
    "redis": {"url": "", "prefix": "hubsvc"},
    "storage": {"data_dir": "./data"},
    "security": {
        "secret_key": "",
        "session_days": 30,
        "admins": [],
        "bcrypt_rounds": 12,
        "log_days": 400,  # how long the security log keeps an entry
    },
    "auth": {"open_signup": True},
    "rate_limit": {
        "enabled": True,
        "per_minute": 60,
        "burst": 100,
        "sign_in_per_15_minutes": 10,
        "max_keys": 100000,
        "ipv6_prefix": 64,
        # Git over HTTP of a signed-in user: a bucket per user, apart from the API's.
        "git_per_minute": 300,
        "git_burst": 600,
    },
    "chat": {
        "webhook_url": "",
        "webhook_secret": "",
        "bot_key": "",
        "link_token_minutes": 60,
        "retry_seconds": 2.0,
        "webhook_tolerance_seconds": 300,
        "webhook_repositories": [],
    },
    "mail": {
        "smtp_host": "",
        "smtp_port": 587,
        "from": "hubsvc@localhost",
        "starttls": "auto",
        "username": "",
        "password": "",
        "max_attempts": 8,
    },
    "webhooks": {
        "allowed_hosts": [],
        "timeout_seconds": 10.0,
        "retry_seconds": 2.0,
        "max_retry_seconds": 60.0,
        "disable_after_hours": 24.0,
    },
    "websocket": {"max_per_ip": 10, "heartbeat_seconds": 30},
    # git over SSH (hubsvc/ssh/): port 0 turns it off; host "" is base_url's host;
    # host_keys [] are the Ed25519 and RSA keys made once in <data>/ssh/.
    "ssh": {
        "port": 2222,
        "host": "",
        "host_keys": [],
        "idle_seconds": 600,
        "max_per_ip": 10,
        "reuse_port": False,
    },
    "events": {"retention_days": 30},
    # GET /metrics (Prometheus): on its own listener (port 0: none) and/or on the API's
    # port with `Authorization: Bearer <token>` (token "": not there, 404 to everyone).
    "metrics": {"host": "127.0.0.1", "port": 0, "token": ""},
    # "text" (today's lines) or "json": one object per line, access lines with the route.
    "log": {"format": "text"},
    "cors": {"origins": []},
    "limits": {"avatar_bytes": 1048576, "push_bytes": 1073741824, "json_depth": 64},
    # The companion chat bot (python run.py bot); the service itself reads none of it.
    "bot": {"token": "", "application_id": "", "api_base": "", "guild_id": "", "bot_key": ""},
    "git": {
        "max_blob_bytes": 10485760,
        "max_diff_bytes": 5242880,
        "max_diff_files": 300,
        "max_tree_entries": 1000,
        "max_object_bytes": 104857600,
        "timeout_seconds": 600,
        "pack_cache_mb": 512,
        "pack_cache_minutes": 30,
    },
}


def _positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _port(value: Any) -> bool:
    return _positive(value) and value <= 65535


def _url_or_empty(value: Any) -> bool:
    return isinstance(value, str) and (value == "" or value.startswith(("http://", "https://")))


def _snowflake_or_empty(value: Any) -> bool:
    """A Discord id as a string of digits; empty means none."""
    return isinstance(value, str) and (value == "" or (value.isascii() and value.isdigit()))


# Checks beyond the type of the default, with the phrase shown when they fail.
CHECKS: dict[tuple[str, str], tuple[Callable[[Any], bool], str]] = {
    ("server", "port"): (_port, "must be an integer from 1 to 65535"),
    ("server", "base_url"): (_url_or_empty, "must be an http:// or https:// URL"),
    ("server", "web_url"): (_url_or_empty, "must be an http:// or https:// URL"),
    ("server", "max_body_bytes"): (_positive, "must be a positive integer"),
    ("server", "header_timeout_seconds"): (_positive, "must be a positive integer"),
    ("server", "body_timeout_seconds"): (_positive, "must be a positive integer"),
    ("server", "git_processes"): (_positive, "must be a positive integer"),
    ("server", "git_processes_per_client"): (_positive, "must be a positive integer"),
    ("server", "min_free_mb"): (lambda v: v >= 0, "must be an integer, 0 or more"),
    ("server", "event_loop"): (
        lambda v: v in ("auto", "uvloop", "asyncio"),
        'must be "auto", "uvloop" or "asyncio"',
    ),
    ("server", "drain_seconds"): (
        lambda v: 0 <= v <= 86400,
        "must be a number of seconds from 0 to 86400",
    ),
    ("database", "write_timeout_ms"): (
        lambda v: 1 <= v <= 600000,
        "must be an integer from 1 to 600000",
    ),
    ("security", "session_days"): (_positive, "must be a positive integer"),
    ("security", "log_days"): (_positive, "must be a positive integer"),
    ("security", "bcrypt_rounds"): (
        lambda v: isinstance(v, int) and 4 <= v <= 16,
        "must be an integer from 4 to 16",
    ),
    ("rate_limit", "per_minute"): (_positive, "must be a positive integer"),
    ("rate_limit", "burst"): (_positive, "must be a positive integer"),
    ("rate_limit", "sign_in_per_15_minutes"): (_positive, "must be a positive integer"),
    ("rate_limit", "max_keys"): (_positive, "must be a positive integer"),
    ("rate_limit", "git_per_minute"): (_positive, "must be a positive integer"),
    ("rate_limit", "git_burst"): (_positive, "must be a positive integer"),
    ("rate_limit", "ipv6_prefix"): (lambda v: 1 <= v <= 128, "must be an integer from 1 to 128"),
    ("chat", "webhook_url"): (_url_or_empty, "must be an http:// or https:// URL"),
    ("chat", "link_token_minutes"): (_positive, "must be a positive integer"),
    ("chat", "retry_seconds"): (
        lambda v: 0 < v <= 3600,
        "must be a number of seconds from 0 to 3600",
    ),
    ("chat", "webhook_tolerance_seconds"): (_positive, "must be a positive integer"),
    ("chat", "webhook_repositories"): (
        lambda v: all(r.count("/") == 1 and all(r.split("/")) for r in v),
        "must list owner/name strings",
    ),
    ("mail", "smtp_port"): (_port, "must be an integer from 1 to 65535"),
    ("mail", "max_attempts"): (_positive, "must be a positive integer"),
    ("webhooks", "timeout_seconds"): (
        lambda v: 0 < v <= 300,
        "must be a number of seconds from 0 to 300",
    ),
    ("webhooks", "retry_seconds"): (
        lambda v: 0 < v <= 3600,
        "must be a number of seconds from 0 to 3600",
    ),
    ("webhooks", "max_retry_seconds"): (
        lambda v: 0 < v <= 86400,
        "must be a number of seconds from 0 to 86400",
    ),
    ("webhooks", "disable_after_hours"): (lambda v: v > 0, "must be a positive number"),
    ("websocket", "max_per_ip"): (_positive, "must be a positive integer"),
    ("events", "retention_days"): (_positive, "must be a positive integer"),
    ("metrics", "port"): (
        lambda v: 0 <= v <= 65535,
        "must be an integer from 0 (no listener of its own) to 65535",
    ),
    ("metrics", "token"): (
        lambda v: v == "" or len(v) >= 16,
        "must be empty (not on the API's port) or at least 16 characters",
    ),
    ("log", "format"): (lambda v: v in ("text", "json"), 'must be "text" or "json"'),
    ("database", "read_timeout_ms"): (_positive, "must be a positive integer"),
    ("database", "url"): (
        lambda v: v == "" or v.startswith(("postgresql://", "postgres://")),
        "must be empty (the SQLite file in the data folder) or a postgresql:// URL",
    ),
    ("database", "pool_size"): (lambda v: 1 <= v <= 1000, "must be an integer from 1 to 1000"),
    ("redis", "url"): (
        lambda v: v == "" or v.startswith(("redis://", "rediss://", "unix://")),
        "must be empty (one process) or a redis://, rediss:// or unix:// URL",
    ),
    ("redis", "prefix"): (
        lambda v: re.fullmatch(r"[A-Za-z0-9_.:-]{1,64}", v) is not None,
        "must be 1 to 64 letters, digits, or _ . : -",
    ),
    ("websocket", "heartbeat_seconds"): (_positive, "must be a positive integer"),
    ("ssh", "port"): (
        lambda v: 0 <= v <= 65535,
        "must be an integer from 0 (off) to 65535",
    ),
    ("ssh", "idle_seconds"): (_positive, "must be a positive integer"),
    ("ssh", "max_per_ip"): (_positive, "must be a positive integer"),
    ("limits", "avatar_bytes"): (_positive, "must be a positive integer"),
    ("limits", "push_bytes"): (_positive, "must be a positive integer"),
    ("limits", "json_depth"): (lambda v: 1 <= v <= 512, "must be an integer from 1 to 512"),
    ("bot", "api_base"): (_url_or_empty, "must be an http:// or https:// URL"),
    ("bot", "application_id"): (_snowflake_or_empty, "must be a Discord id (digits, in quotes)"),
    ("bot", "guild_id"): (_snowflake_or_empty, "must be a Discord id (digits, in quotes)"),
    ("git", "max_blob_bytes"): (_positive, "must be a positive integer"),
    ("git", "max_diff_bytes"): (_positive, "must be a positive integer"),
    ("git", "max_diff_files"): (_positive, "must be a positive integer"),
    ("git", "max_tree_entries"): (_positive, "must be a positive integer"),
    ("git", "max_object_bytes"): (_positive, "must be a positive integer"),
    ("git", "timeout_seconds"): (_positive, "must be a positive integer"),
    ("git", "pack_cache_mb"): (lambda v: v >= 0, "must be an integer, 0 or more"),
    ("git", "pack_cache_minutes"): (_positive, "must be a positive integer"),
}


@dataclass
class Config:
    """Validated settings, read as config.section['key']."""

    values: dict[str, dict[str, Any]] = field(default_factory=dict)
    _site: tuple[tuple, SiteUrl] | None = field(default=None, repr=False, compare=False)

    def __getitem__(self, section: str) -> dict[str, Any]:
        return self.values[section]

    @property
    def data_dir(self) -> Path:
        return Path(self.values["storage"]["data_dir"])

    @property
    def json_logs(self) -> bool:
        """Log lines as JSON objects: [log] format = "json" (or the older access_log_json)."""
        return self.values["log"]["format"] == "json" or self.values["server"]["access_log_json"]

    @property
    def base_url(self) -> SiteUrl:
        """The public URL of the API, carrying web_url for the links it builds."""
        server, ssh = self.values["server"], self.values["ssh"]
        key = (
            server["base_url"],
            server["host"],
            server["port"],
            server["web_url"],
            ssh["host"],
            ssh["port"],
        )
        # Read several times per request (every link of an answer): built once per
        # setting, not with a URL parse each time (perf measure's repository GET).
        if self._site is None or self._site[0] != key:
            base = server["base_url"] or f"http://{server['host']}:{server['port']}"
            ssh_host = ssh["host"] or urlsplit(base).hostname or server["host"]
            site = SiteUrl(
                base, server["web_url"], ssh_base(ssh_host, ssh["port"]) if ssh["port"] else ""
            )
            self._site = (key, site)
        return self._site[1]


def _coerce_env(raw: str, default: Any, name: str) -> Any:
    """Turn an environment string into the type of the key's default."""
    if isinstance(default, bool):
        lowered = raw.strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{name}: must be true or false")
    if isinstance(default, float):
        try:
            return float(raw)
        except ValueError:
            raise ConfigError(f"{name}: must be a number") from None
    if isinstance(default, int):
        try:
            return int(raw)
        except ValueError:
            raise ConfigError(f"{name}: must be an integer") from None
    if isinstance(default, list):
        return [item.strip() for item in raw.split(",") if item.strip()]
    return raw


STARTTLS = ("auto", "always", "never", "true", "false")


def starttls_mode(value: Any) -> str:
    """mail.starttls as auto (when the server offers it), always or never."""
    if value is True or value == "true":
        return "always"
    if value is False or value == "false":
        return "never"
    return value


def _check_type(section: str, key: str, value: Any, default: Any) -> None:
    name = f"{section}.{key}"
    if (section, key) == ("mail", "starttls"):
        # true and false, as older files say, still mean always and never.
        if not (isinstance(value, bool) or value in STARTTLS):
            raise ConfigError(f'{name}: must be "auto", true or false')
        return
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{name}: must be true or false")
    elif isinstance(default, float):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{name}: must be a number")
    elif isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{name}: must be an integer")
    elif isinstance(default, list):
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{name}: must be a list of strings")
    elif isinstance(default, str) and not isinstance(value, str):
        raise ConfigError(f"{name}: must be a string")
    check = CHECKS.get((section, key))
    if check and not check[0](value):
        raise ConfigError(f"{name}: {check[1]}")


def _toml_where(exc: tomllib.TOMLDecodeError) -> str:
    """tomllib's message with the place first: 'at line 3, column 18: Illegal character'."""
    match = re.fullmatch(r"(.*) \((at line \d+, column \d+|at end of document)\)", str(exc), re.S)
    return f"{match[2]}: {match[1]}" if match else f"({exc})"


def load_config(
    path: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
) -> Config:
    """Defaults, then the file, then HUBSVC_* variables, then explicit overrides."""
    values = {section: dict(keys) for section, keys in DEFAULTS.items()}
    if path is not None:
        try:
            with open(path, "rb") as fh:
                data = tomllib.load(fh)
        except FileNotFoundError:
            raise ConfigError(f"config file {path}: not found") from None
        except OSError as exc:
            raise ConfigError(f"config file {path}: cannot be read ({exc.strerror})") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path}: invalid TOML {_toml_where(exc)}") from None
        for section, keys in data.items():
            if section not in DEFAULTS:
                raise ConfigError(f"{section}: unknown section")
            if not isinstance(keys, dict):
                raise ConfigError(f"{section}: must be a table")
            for key, value in keys.items():
                if key not in DEFAULTS[section]:
                    raise ConfigError(f"{section}.{key}: unknown key")
                values[section][key] = value
    env = os.environ if env is None else env
    for section, keys in DEFAULTS.items():
        for key, default in keys.items():
            var = f"HUBSVC_{section}_{key}".upper()
            if var in env:
                values[section][key] = _coerce_env(env[var], default, f"{section}.{key}")
    for dotted, value in (overrides or {}).items():
        section, key = dotted.split(".", 1)
        if value is not None:
            values[section][key] = value
    for section, keys in DEFAULTS.items():
        for key, default in keys.items():
            _check_type(section, key, values[section][key], default)
    # Resolved once, here: git is handed paths inside it (core.hooksPath) and resolves a
    # relative one inside the bare repository, where no hook is, so none would run.
    values["storage"]["data_dir"] = os.path.abspath(values["storage"]["data_dir"])
    return Config(values)


def ensure_secret(config: Config) -> None:
    """Use the configured secret, else one generated once into the data folder (0600)."""
    if config["security"]["secret_key"]:
        return
    data_dir = config.data_dir
    private_dir(data_dir)
    path = data_dir / "secret_key"
    # Written whole under a name of this process's, then linked into place: a link fails
    # when the name exists, so of processes starting together one writes the secret and
    # the others read it whole, never a file still being written.
    tmp = data_dir / f".secret_key.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)  # the umask could only narrow it, but say it outright
    with os.fdopen(fd, "w") as fh:
        fh.write(secrets.token_urlsafe(48) + "\n")
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        os.unlink(tmp)
    secret = path.read_text().strip()
    if not secret:
        raise ConfigError(f"security.secret_key: {path} is empty")
    config["security"]["secret_key"] = secret
