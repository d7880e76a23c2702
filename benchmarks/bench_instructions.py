"""Instructions a request of the hot reads, counted by callgrind (does not depend on the load).

    python benchmarks/bench_instructions.py CHECKOUT [CHECKOUT ...] [--paths health,me,repo]
        [--connections 16] [--rounds 100] [--hello ../shared/tools/perf/hello_app.py]

Each checkout's run.py serves (rate limit off, SSH off) under `valgrind --tool=callgrind
--instr-atstart=no`; it signs up `perfuser` and creates `perfuser/perf` as
tools/perf/measure does. For each path: 80 warm-up requests, then instrumentation on
(`callgrind_control -i on`) around --connections keep-alive connections × --rounds rounds
of one request each (all connections send, then all answers are read), then off and a
dump. Printed: the total over the requests ÷ their number. User space only: the kernel's
send is not in it. With --hello, tools/perf's hello_app.py on uvloop is counted the same
way first (its `GET /`). Two runs of one commit agree within about 1 %.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

CONFIG = "[rate_limit]\nenabled = false\n\n[websocket]\nmax_per_ip = 20000\n\n[ssh]\nport = 0\n"
PATHS = {
    "health": ("/health", False),
    "me": ("/api/users/me", True),
    "repo": ("/api/repositories/perfuser/perf", True),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def call(port: int, method: str, path: str, body: dict | None, token: str | None) -> dict:
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data, headers, method=method)
    with urllib.request.urlopen(req, timeout=120) as resp:
        return json.loads(resp.read() or b"{}")


def wait(port: int, path: str, proc: subprocess.Popen) -> None:
    for _ in range(600):
        if proc.poll() is not None:
            raise SystemExit(f"server exited ({proc.returncode})")
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5).read()
            return
        except OSError:
            time.sleep(0.5)
    raise SystemExit("server did not answer")


def drive(port: int, path: str, token: str | None, conns: int, rounds: int) -> int:
    """rounds × conns keep-alive GETs; returns how many were not 200."""
    head = f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
    if token:
        head += f"Authorization: Bearer {token}\r\n"
    request = (head + "\r\n").encode()
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(conns)]
    bufs = [b""] * conns
    bad = 0
    for _ in range(rounds):
        for s in socks:
            s.sendall(request)
        for i, s in enumerate(socks):
            buf = bufs[i]
            while b"\r\n\r\n" not in buf:
                buf += s.recv(65536)
            top, _, rest = buf.partition(b"\r\n\r\n")
            length = re.search(rb"(?im)^content-length:\s*(\d+)", top)
            n = int(length[1]) if length else 0
            while len(rest) < n:
                rest += s.recv(65536)
            bufs[i] = rest[n:]
            bad += top.split(b" ", 2)[1] != b"200"
    for s in socks:
        s.close()
    return bad


def count(
    argv, cwd: str, work: str, setup, targets, args, ready: str = "/health"
) -> dict[str, float]:
    """Start argv under callgrind, wait for ready to answer; setup(port) -> token; count
    each target's requests."""
    port = free_port()
    out = os.path.join(work, "cg.%p")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}"]
    proc = subprocess.Popen(
        cmd + argv(port),
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(os.path.join(work, "server.log"), "ab"),
    )
    results = {}
    try:
        wait(port, ready, proc)
        token = setup(port)
        total = args.connections * args.rounds
        for name, path, auth in targets:
            drive(port, path, token if auth else None, args.connections, 5)
            ctl = ["callgrind_control"]
            subprocess.run(ctl + ["-z", str(proc.pid)], capture_output=True, check=True)
            subprocess.run(ctl + ["-i", "on", str(proc.pid)], capture_output=True, check=True)
            bad = drive(port, path, token if auth else None, args.connections, args.rounds)
            subprocess.run(ctl + ["-i", "off", str(proc.pid)], capture_output=True, check=True)
            dumped = set(Path(work).glob(f"cg.{proc.pid}.*"))
            subprocess.run(ctl + ["-d", name, str(proc.pid)], capture_output=True, check=True)
            new = set(Path(work).glob(f"cg.{proc.pid}.*")) - dumped
            totals = re.search(r"(?m)^totals:\s*(\d+)", next(iter(new)).read_text())
            assert totals is not None
            results[name] = int(totals[1]) / total
            if bad:
                print(f"  {name}: {bad} answers not 200", file=sys.stderr)
    finally:
        proc.terminate()
        proc.wait(60)
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkouts", nargs="+")
    parser.add_argument("--paths", default="health,me,repo")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--hello", default=None, help="tools/perf/hello_app.py to count too")
    args = parser.parse_args()
    targets = [(key, *PATHS[key]) for key in args.paths.split(",")]
    work = tempfile.mkdtemp(prefix="instructions-")
    try:
        return _count_all(args, targets, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _count_all(args: argparse.Namespace, targets: list, work: str) -> int:
    if args.hello:
        got = count(
            lambda port: [args.python, args.hello, str(port), "--uvloop"],
            ".",
            work,
            lambda port: None,
            [("hello", "/", False)],
            args,
            ready="/",
        )
        print(f"hello GET /: {got['hello'] / 1000:.1f}k instructions a request")
    for checkout in args.checkouts:
        folder = tempfile.mkdtemp(dir=work)
        Path(folder, "c.toml").write_text(CONFIG)

        def setup(port: int) -> str:
            body = {
                "email": "perfuser@example.com",
                "username": "perfuser",
                "password": "perf-password-1",
                "name": "Perf User",
            }
            token = call(port, "POST", "/auth/sign-up", body, None)["token"]
            repo = {"name": "perf", "description": "tools/perf run", "visibility": "public"}
            call(port, "POST", "/api/repositories", repo, token)
            return token

        got = count(
            lambda port, folder=folder: [
                args.python,
                "run.py",
                "--config",
                os.path.join(folder, "c.toml"),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--data-dir",
                os.path.join(folder, "data"),
            ],
            checkout,
            folder,
            setup,
            targets,
            args,
        )
        line = ", ".join(f"{name} {n / 1000:.1f}k" for name, n in got.items())
        print(f"{checkout}: {line} instructions a request")
    return 0


if __name__ == "__main__":
    sys.exit(main())
