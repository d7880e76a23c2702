"""run.py refuses to start with one line and exit code 2, before it says it listens."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from .server import ROOT, ServerProcess, free_port


def start(*args: str, cwd=None) -> tuple[int, list[str]]:
    """Run `python run.py ARGS` to its end: the exit code and stderr's non-empty lines."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "run.py"), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    return proc.returncode, [
        line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()
    ]


def test_busy_port_is_one_line_before_listening(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, lines = start("--port", str(port), "--data-dir", str(tmp_path / "data"))
    assert code == 2
    assert lines == [f"hubsvc: port {port} is in use (set [server] port or --port)"]
    # Nothing was touched: no database was created or migrated.
    assert not (tmp_path / "data" / "hubsvc.db").exists()


def test_unreadable_config_is_one_line(tmp_path):
    folder = tmp_path / "conf.d"
    folder.mkdir()
    code, lines = start("--config", str(folder), "--port", str(free_port()))
    assert code == 2
    assert lines == [
        f"hubsvc: configuration error: config file {folder}: cannot be read (Is a directory)"
    ]
    if os.geteuid() != 0:  # root reads a file whatever its mode
        path = tmp_path / "secret.toml"
        path.write_text("[server]\n")
        path.chmod(0)
        code, lines = start("--config", str(path), "--port", str(free_port()))
        assert code == 2 and lines == [
            f"hubsvc: configuration error: config file {path}: cannot be read (Permission denied)"
        ]


def test_bad_toml_names_its_line(tmp_path):
    path = tmp_path / "hubsvc.toml"
    path.write_text('[server]\nport = 9000\nhost = "127.0.0.1\n')
    code, lines = start("--config", str(path))
    assert code == 2 and len(lines) == 1
    assert lines[0].startswith(
        f"hubsvc: configuration error: config file {path}: invalid TOML at line 3, column "
    )


def test_unwritable_data_folder_is_one_line(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    where = "(set [storage] data_dir or --data-dir)"
    code, lines = start("--data-dir", str(blocker), "--port", str(free_port()))
    assert code == 2 and lines == [f"hubsvc: data folder {blocker} is not a folder {where}"]
    code, lines = start("--data-dir", str(blocker / "data"), "--port", str(free_port()))
    assert code == 2
    assert lines == [
        f"hubsvc: data folder {blocker / 'data'} is not writable: Not a directory {where}"
    ]
    if os.geteuid() != 0:  # root writes whatever the mode
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        code, lines = start("--data-dir", str(locked), "--port", str(free_port()))
        assert code == 2 and lines == [
            f"hubsvc: data folder {locked} is not writable: Permission denied {where}"
        ]


def test_listening_is_logged_after_the_migrations(tmp_path):
    with ServerProcess(tmp_path / "data") as server:
        assert server.request("GET", "/health")[0] == 200
        lines = server.logs().splitlines()
    applied = [i for i, line in enumerate(lines) if "applied migration" in line]
    said = [i for i, line in enumerate(lines) if "listening on 127.0.0.1" in line]
    assert applied and len(said) == 1, lines
    assert said[0] > max(applied), lines
