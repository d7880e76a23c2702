"""Startup benchmark: from `python run.py` to the first 200, on a database of 100,000 issues.

    python benchmarks/bench_startup.py [--issues 100000 --rounds 5]

Starts hubsvc once on a new data folder (migrations applied), signs up one user,
creates one repository and one issue through the API, stops it, then copies that issue
row with SQL (executemany, one transaction) until the repository holds `--issues`
issues. Then, round after round, it starts run.py on that folder and times start →
the `listening` log line, → the first 200 from `GET /health` and → the first 200 from an
API read (`GET /api/repositories/bench/tool/issues/N`, the newest issue), and stops it
with SIGTERM. The baseline, started in the same rounds, is `benchmarks/hello.py`
(start → first 200 from `/hello`): what Python and aiohttp cost before any work.

    hello start → first 200: ... ms
    hubsvc, one issue: start → API read 200: ... ms (ratio X vs hello)
    hubsvc start → listening: ... ms (ratio X vs hello)
    hubsvc start → GET /health 200: ... ms (ratio X vs hello; target ≤ 1000 ms)
    hubsvc start → API read 200: ... ms (ratio X vs hello; target ≤ 1000 ms)

Each round also starts hubsvc on a copy of the folder taken before the seeding (one
issue) and times start → the same kind of API read: the difference is what grows with
the data. Modules are compiled once into a cache (PYTHONPYCACHEPREFIX), as an install has
them. Exit code 0 when both 200s come within 1 s, else 1.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import harness

TARGET_MS = 1000.0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--issues", type=int, default=100_000, help="issues in the database")
    parser.add_argument("--rounds", type=int, default=5, help="starts timed; medians quoted (5)")
    parser.add_argument(
        "--folder",
        type=Path,
        help="seed into this folder once and reuse it on the next runs (default: a new temp one)",
    )
    return parser.parse_args(argv)


# Compiled modules are kept here, as an install keeps them: a shell with
# PYTHONDONTWRITEBYTECODE set would otherwise time the compiling of every module.
PYCACHE = Path(tempfile.gettempdir()) / "bench-startup-pycache"


def _env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("HUBSVC_") and k != "PYTHONDONTWRITEBYTECODE"
    }
    env["PYTHONPATH"] = str(harness.ROOT)
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    return env


def _status(url: str, headers: dict[str, str] | None = None) -> int:
    try:
        request = urllib.request.Request(url, headers=headers or {})
        with urllib.request.urlopen(request, timeout=5) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, ConnectionError, OSError):
        return 0


class Run:
    """One process started now; `wait(url)` gives the ms from its start to url's first 200."""

    def __init__(self, argv: list[str], log_path: Path) -> None:
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            argv,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=harness.ROOT,
            env=_env(),
        )
        self.listening_ms: float | None = None

    def _watch_log(self) -> None:
        if self.listening_ms is None and b"listening on" in self.log_path.read_bytes():
            self.listening_ms = (time.monotonic() - self.started) * 1000

    def wait(self, url: str, headers: dict[str, str] | None = None, timeout: float = 60) -> float:
        deadline = self.started + timeout
        while time.monotonic() < deadline:
            self._watch_log()
            if self.proc.poll() is not None:
                raise RuntimeError(f"exited {self.proc.returncode}:\n{self.log_path.read_text()}")
            if _status(url, headers) == 200:
                self._watch_log()
                return (time.monotonic() - self.started) * 1000
            time.sleep(0.005)
        raise RuntimeError(f"no 200 from {url} in {timeout:g} s:\n{self.log_path.read_text()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def seed(db: Path, issues: int) -> None:
    """Copy the one issue row until the repository has `issues`."""
    conn = sqlite3.connect(db)
    try:
        cursor = conn.execute("SELECT * FROM issues ORDER BY number LIMIT 1")
        row = dict(zip((d[0] for d in cursor.description), cursor.fetchone(), strict=True))
        cols = [c for c in row if c not in ("id", "number", "title")]
        names = ", ".join(["number", "title", *cols])
        marks = ", ".join("?" * (len(cols) + 2))
        with conn:
            conn.executemany(
                f"INSERT INTO issues ({names}) VALUES ({marks})",
                (
                    (n, f"issue {n} of the startup benchmark", *(row[c] for c in cols))
                    for n in range(row["number"] + 1, issues + 1)
                ),
            )
            conn.execute(
                "UPDATE repositories SET next_number = ? WHERE id = ?", (issues + 1, row["repo_id"])
            )

    finally:
        conn.close()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp_name:
        tmp = Path(tmp_name) if args.folder is None else args.folder
        tmp.mkdir(parents=True, exist_ok=True)
        data = tmp / "data"
        config = tmp / "config.toml"
        config.write_text(harness._toml(harness.BENCH_SETTINGS))
        port = harness.free_port()
        url = f"http://127.0.0.1:{port}"
        hub_argv = [
            sys.executable,
            str(harness.ROOT / "run.py"),
            "--config",
            str(config),
            "--port",
            str(port),
            "--data-dir",
            str(data),
        ]
        hello_port = harness.free_port()
        hello_argv = [
            sys.executable,
            str(harness.BENCH_DIR / "hello.py"),
            "--port",
            str(hello_port),
            "--access-log",
            "off",
        ]

        # The token of the seeded folder's user: its presence says the folder is seeded.
        seeded = tmp / f"seeded-{args.issues}.token"
        began = time.monotonic()
        if seeded.exists():
            token = seeded.read_text()
        else:
            first = Run(hub_argv, tmp / "seed.log")
            try:
                first.wait(url + "/health")
                token = harness.sign_up(url, "bench")
                auth = harness.bearer(token)
                harness.expect(
                    *harness.request_json(
                        url + "/api/repositories", "POST", {"name": "tool"}, headers=auth
                    ),
                    201,
                )
                harness.expect(
                    *harness.request_json(
                        url + "/api/repositories/bench/tool/issues",
                        "POST",
                        {"title": "first", "body": "the row the others copy"},
                        headers=auth,
                    ),
                    201,
                )
            finally:
                first.stop()
            shutil.copytree(data, tmp / "small")  # one issue: the same start without the data
            seed(data / "hubsvc.db", args.issues)
            seeded.write_text(token)
        auth = harness.bearer(token)
        last = args.issues
        size = (data / "hubsvc.db").stat().st_size >> 20
        print(
            f"# {args.issues:,} issues seeded in {time.monotonic() - began:.1f} s "
            f"(database {size} MiB); {args.rounds} rounds, hello and hubsvc alternating",
            flush=True,
        )
        read_url = f"{url}/api/repositories/bench/tool/issues/{last}"
        print(f"# command: {' '.join(hub_argv)}", flush=True)
        print(f"# API read: GET {read_url} (bearer)", flush=True)

        small_argv = [*hub_argv[:-1], str(tmp / "small")]
        small_read = f"{url}/api/repositories/bench/tool/issues/1"
        hello_ms: list[float] = []
        listening: list[float] = []
        health: list[float] = []
        api: list[float] = []
        small: list[float] = []
        for round_no in range(args.rounds):
            run = Run(hello_argv, tmp / "hello.log")
            try:
                hello_ms.append(run.wait(f"http://127.0.0.1:{hello_port}/hello"))
            finally:
                run.stop()
            run = Run(small_argv, tmp / "small.log")
            try:
                run.wait(url + "/health")
                small.append(run.wait(small_read, auth))
            finally:
                run.stop()
            run = Run(hub_argv, tmp / "hub.log")
            try:
                health.append(run.wait(url + "/health"))
                api.append(run.wait(read_url, auth))
                listening.append(run.listening_ms or float("nan"))
            finally:
                run.stop()
            print(
                f"#   round {round_no + 1}: hello {hello_ms[-1]:.0f} ms; one issue: API read "
                f"{small[-1]:.0f} ms; {args.issues:,} issues: listening {listening[-1]:.0f} ms, "
                f"/health {health[-1]:.0f} ms, API read {api[-1]:.0f} ms",
                flush=True,
            )

    base = harness.median(hello_ms)
    print()
    harness.report("hello start → first 200", base, "ms", digits=0)
    harness.report(
        "hubsvc, one issue: start → API read 200",
        harness.median(small),
        "ms",
        base,
        "hello",
        digits=0,
        note=f"rounds {harness.spread(small)}",
    )
    harness.report(
        "hubsvc start → listening", harness.median(listening), "ms", base, "hello", digits=0
    )
    met = True
    for name, values in (
        ("hubsvc start → GET /health 200", health),
        ("hubsvc start → API read 200", api),
    ):
        value = harness.median(values)
        met = met and value <= TARGET_MS
        harness.report(
            name,
            value,
            "ms",
            base,
            "hello",
            digits=0,
            note=f"rounds {harness.spread(values)}; target ≤ {TARGET_MS:.0f} ms: "
            f"{'met' if value <= TARGET_MS else 'NOT met'}",
        )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
