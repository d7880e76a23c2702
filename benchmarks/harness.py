"""What every benchmark shares: a real server process, seeding, RSS, wrk and latency.

Benchmarks are scripts in this folder and import it as `import harness` (the script's
own folder is first on sys.path). Nothing here imports hubsvc or the tests: the server
is always a separate process, reached over HTTP only.

    with harness.Server() as server:                 # python run.py on a temp data folder
        token = harness.sign_up(server.url, "ada")
        result = harness.wrk(server.url + "/api/users/me", seconds=5, connections=32,
                             threads=1, headers={"Authorization": f"Bearer {token}"})
        print(result.rps, harness.rss_kib(server.pid))
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = ROOT / "benchmarks"

# Settings every benchmark server starts with: no rate limit (a load test is one client
# address and would be throttled to 1 request/s), and cheap bcrypt so seeding is fast.
BENCH_SETTINGS: dict[str, dict[str, Any]] = {
    "rate_limit": {"enabled": False},
    "security": {"bcrypt_rounds": 4},
    "ssh": {"port": 0},  # off, so benchmarks side by side never meet on 2222 (bench_ssh sets one)
}


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _toml(settings: dict[str, dict[str, Any]]) -> str:
    # json.dumps writes valid TOML for the strings, numbers, booleans and string lists
    # the config accepts.
    lines: list[str] = []
    for section, values in settings.items():
        lines.append(f"[{section}]")
        lines += [f"{key} = {json.dumps(value)}" for key, value in values.items()]
        lines.append("")
    return "\n".join(lines)


class Server:
    """A real server process on a free port over a temporary data folder.

    By default `python run.py --config FILE --port P --data-dir DIR` with BENCH_SETTINGS
    merged with `settings`. `command` runs something else instead (it gets `--port P`
    appended), e.g. the hello-world baseline; see `Server.hello()`. The process's
    stdout and stderr (the access log too) go to `log_path` in the temp folder, the same
    way for every server so the logging cost is comparable. `cpus` pins it with taskset.
    """

    def __init__(
        self,
        settings: dict[str, dict[str, Any]] | None = None,
        *,
        command: Sequence[str] | None = None,
        ready_path: str = "/health",
        cpus: str | None = None,
        name: str = "hubsvc",
        start_timeout: float = 30.0,
        root: Path = ROOT,
        env: dict[str, str] | None = None,
    ) -> None:
        self.settings = {section: dict(values) for section, values in BENCH_SETTINGS.items()}
        for section, values in (settings or {}).items():
            self.settings.setdefault(section, {}).update(values)
        self.command = list(command) if command is not None else None
        self.ready_path = ready_path
        self.cpus = cpus
        self.name = name
        self.start_timeout = start_timeout
        self.root = Path(root)  # another checkout (an older commit) runs its own run.py
        self.extra_env = dict(env or {})  # set after the HUBSVC_* filter, on purpose
        self.port = 0
        self.url = ""
        self.proc: subprocess.Popen | None = None
        self._tmp: tempfile.TemporaryDirectory | None = None
        self._log = None

    @classmethod
    def hello(
        cls, cpus: str | None = None, access_log: str = "hubsvc", loop: str = "auto"
    ) -> Server:
        """The hello-world baseline, benchmarks/hello.py, run the same way."""
        return cls(
            command=[
                sys.executable,
                str(BENCH_DIR / "hello.py"),
                "--access-log",
                access_log,
                "--loop",
                loop,
            ],
            ready_path="/hello",
            cpus=cpus,
            name="hello",
        )

    @property
    def pid(self) -> int:
        assert self.proc is not None, "server not started"
        return self.proc.pid

    @property
    def tmp_dir(self) -> Path:
        assert self._tmp is not None, "server not started"
        return Path(self._tmp.name)

    @property
    def data_dir(self) -> Path:
        return self.tmp_dir / "data"

    @property
    def log_path(self) -> Path:
        return self.tmp_dir / "server.log"

    def _argv(self) -> list[str]:
        if self.command is not None:
            argv = [*self.command, "--port", str(self.port)]
        else:
            config = self.tmp_dir / "config.toml"
            config.write_text(_toml(self.settings))
            argv = [
                sys.executable,
                str(self.root / "run.py"),
                "--config",
                str(config),
                "--port",
                str(self.port),
                "--data-dir",
                str(self.data_dir),
            ]
        if self.cpus is not None:
            argv = [_require_tool("taskset"), "--cpu-list", self.cpus, *argv]
        return argv

    def start(self) -> Server:
        """Start the process and wait until ready_path answers 200."""
        self._tmp = tempfile.TemporaryDirectory(prefix=f"bench-{self.name}-")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = open(self.log_path, "ab")
        env = {**os.environ, "PYTHONPATH": str(self.root)}
        # The environment must not change the settings under test.
        env = {k: v for k, v in env.items() if not k.startswith("HUBSVC_")}
        env.update(self.extra_env)
        self.proc = subprocess.Popen(
            self._argv(),
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.root,
            env=env,
        )
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                log = self.logs()
                self._cleanup()
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{log}")
            try:
                with urllib.request.urlopen(self.url + self.ready_path, timeout=1) as resp:
                    if resp.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.05)
        log = self.logs()
        self.stop()
        raise RuntimeError(
            f"{self.name} did not answer {self.ready_path} in {self.start_timeout:.0f} s:\n{log}"
        )

    def logs(self, tail: int = 4000) -> str:
        """The end of the process's output."""
        try:
            return self.log_path.read_text(errors="replace")[-tail:]
        except (OSError, AssertionError):
            return ""

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM, wait for the exit code (SIGKILL after timeout), remove the temp folder."""
        code = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.send_signal(signal.SIGTERM)
            try:
                code = self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                code = self.proc.wait()
        self._cleanup()
        return code

    def _cleanup(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# --- PostgreSQL ----------------------------------------------------------------------


@contextmanager
def postgres_database(server_url: str) -> Iterator[str]:
    """A fresh, empty database on the PostgreSQL server, named uniquely; dropped after.

    server_url names any database the user may connect to (postgresql://…/postgres);
    the URL yielded is the same with the new database's name.
    """
    try:
        import psycopg
    except ImportError:
        raise ToolMissing(
            "psycopg is not installed: python -m pip install -e '.[postgres]'"
        ) from None
    name = "hubsvc_bench_" + uuid.uuid4().hex[:12]
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield urlunsplit(urlsplit(server_url)._replace(path="/" + name))
    finally:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# --- seeding -------------------------------------------------------------------------


def request_json(
    url: str,
    method: str = "GET",
    body: Any = None,
    headers: dict[str, str] | None = None,
    timeout: float = 30.0,
) -> tuple[int, Any]:
    """One JSON request with urllib; returns (status, decoded body or None)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(
        url,
        data=data,
        method=method,
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json",
            **(headers or {}),
        },
    )
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            status, raw = resp.status, resp.read()
    except urllib.error.HTTPError as err:
        status, raw = err.code, err.read()
    try:
        return status, (json.loads(raw) if raw else None)
    except ValueError:
        return status, raw.decode(errors="replace")


def expect(status: int, body: Any, *wanted: int) -> Any:
    """body when status is one of wanted, else an error naming both."""
    if status not in wanted:
        raise RuntimeError(f"expected HTTP {'/'.join(map(str, wanted))}, got {status}: {body}")
    return body


def sign_up(
    base_url: str,
    username: str,
    password: str = "correct horse battery",
    email: str | None = None,
    name: str | None = None,
) -> str:
    """Create an account through POST /auth/sign-up and return its bearer token."""
    status, body = request_json(
        base_url + "/auth/sign-up",
        "POST",
        {
            "email": email or f"{username}@example.com",
            "username": username,
            "password": password,
            "name": name or username.title(),
        },
    )
    return expect(status, body, 201)["token"]


def bearer(token: str) -> dict[str, str]:
    """The Authorization header for a token."""
    return {"Authorization": f"Bearer {token}"}


# --- memory --------------------------------------------------------------------------


def _status_kib(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith(key + ":"):
                return int(line.split()[1])  # "VmRSS:	  41234 kB"
    raise RuntimeError(f"{key} not in /proc/{pid}/status")


def rss_kib(pid: int) -> int:
    """Resident set size of a process now, in KiB (VmRSS)."""
    return _status_kib(pid, "VmRSS")


def hwm_kib(pid: int) -> int:
    """Highest resident set size the process ever had, in KiB (VmHWM)."""
    return _status_kib(pid, "VmHWM")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process so far, in seconds (/proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()  # after "(comm)", which may hold spaces
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_quiet(pid: int, busy: float = 0.05, window: float = 1.0, timeout: float = 300.0) -> float:
    """Wait until the process uses under `busy` of a core over `window` s; the wait in s.

    After seeding, a server still works through its backlog (event consumers moving
    their cursors, mergeability checks), and every write it makes empties its read
    caches: timing before it is quiet measures the backlog. Gives up after timeout.
    """
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        before = cpu_seconds(pid)
        time.sleep(window)
        if cpu_seconds(pid) - before < busy * window:
            break
    return time.monotonic() - start


def mib(kib: float) -> float:
    return kib / 1024


class PeakRss:
    """A thread sampling VmRSS of pid every `interval` s; `peak_kib` is the highest seen.

    VmHWM is the lifetime peak; this is the peak inside the `with` block, so one
    phase of a benchmark can be told from the start-up or from an earlier phase.
    """

    def __init__(self, pid: int, interval: float = 0.02) -> None:
        self.pid = pid
        self.interval = interval
        self.peak_kib = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"rss-{pid}")

    def _run(self) -> None:
        while True:
            try:
                self.peak_kib = max(self.peak_kib, rss_kib(self.pid))
                self.samples += 1
            except (OSError, RuntimeError):
                return  # the process is gone
            if self._stop.wait(self.interval):
                return

    def start(self) -> PeakRss:
        self._thread.start()
        return self

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak_kib

    def __enter__(self) -> PeakRss:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# --- load with wrk -------------------------------------------------------------------


class ToolMissing(RuntimeError):
    """A command-line tool the benchmark needs is not installed."""


def _require_tool(name: str, hint: str = "") -> str:
    path = shutil.which(name)
    if path is None:
        raise ToolMissing(
            f"`{name}` is not installed or not on PATH" + (f": {hint}" if hint else "")
        )
    return path


def require_wrk() -> str:
    """The path of wrk, or ToolMissing saying how to install it."""
    return _require_tool(
        "wrk",
        "install it with `apt-get update && apt-get install -y wrk` "
        "(Debian/Ubuntu) or `brew install wrk` (macOS)",
    )


@dataclass
class WrkResult:
    """What one wrk run measured."""

    rps: float
    requests: int
    seconds: float
    latency_avg_ms: float
    latency_max_ms: float
    percentiles_ms: dict[str, float] = field(default_factory=dict)  # "50%", "75%", "90%", "99%"
    non_2xx: int = 0
    socket_errors: dict[str, int] = field(default_factory=dict)
    output: str = ""

    @property
    def p50_ms(self) -> float:
        return self.percentiles_ms.get("50%", float("nan"))

    @property
    def p99_ms(self) -> float:
        return self.percentiles_ms.get("99%", float("nan"))

    @property
    def errors(self) -> int:
        return self.non_2xx + sum(self.socket_errors.values())


_UNITS_MS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}
_DURATION = r"([\d.]+)(us|ms|s|m|h)"


def _ms(value: str, unit: str) -> float:
    return float(value) * _UNITS_MS[unit]


def parse_wrk(output: str) -> WrkResult:
    """Requests/sec, request count, latencies and errors out of wrk --latency output."""
    rps = re.search(r"^Requests/sec:\s+([\d.]+)", output, re.M)
    done = re.search(r"^\s*(\d+) requests in ([\d.]+)(us|ms|s|m|h)", output, re.M)
    latency = re.search(rf"^\s+Latency\s+{_DURATION}\s+{_DURATION}\s+{_DURATION}", output, re.M)
    if not (rps and done and latency):
        raise RuntimeError(f"could not parse wrk output:\n{output}")
    percentiles = {
        m.group(1): _ms(m.group(2), m.group(3))
        for m in re.finditer(rf"^\s+(\d+%)\s+{_DURATION}\s*$", output, re.M)
    }
    non_2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", output)
    sock = re.search(
        r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", output
    )
    socket_errors = {}
    if sock:
        socket_errors = dict(zip(("connect", "read", "write", "timeout"), map(int, sock.groups())))
    return WrkResult(
        rps=float(rps.group(1)),
        requests=int(done.group(1)),
        seconds=_ms(done.group(2), done.group(3)) / 1000,
        latency_avg_ms=_ms(latency.group(1), latency.group(2)),
        latency_max_ms=_ms(latency.group(5), latency.group(6)),
        percentiles_ms=percentiles,
        non_2xx=int(non_2xx.group(1)) if non_2xx else 0,
        socket_errors=socket_errors,
        output=output,
    )


def wrk_command(
    url: str,
    seconds: float,
    connections: int,
    threads: int,
    headers: dict[str, str] | None = None,
    cpus: str | None = None,
    timeout_s: float = 10.0,
) -> list[str]:
    """The wrk command line (with taskset in front when cpus is given)."""
    argv = [
        require_wrk(),
        f"-t{threads}",
        f"-c{connections}",
        f"-d{max(1, round(seconds))}s",
        f"--timeout={timeout_s:g}s",
        "--latency",
    ]
    for key, value in (headers or {}).items():
        argv += ["-H", f"{key}: {value}"]
    argv.append(url)
    if cpus is not None:
        argv = [_require_tool("taskset"), "--cpu-list", cpus, *argv]
    return argv


def wrk(
    url: str,
    seconds: float = 5,
    connections: int = 32,
    threads: int = 1,
    headers: dict[str, str] | None = None,
    *,
    cpus: str | None = None,
    allow_errors: bool = False,
) -> WrkResult:
    """Load url with the wrk process for `seconds`; raises if any answer was not 2xx/3xx.

    A benchmark that silently measures 401s or 429s would measure the wrong thing, so
    errors stop it unless allow_errors.
    """
    argv = wrk_command(url, seconds, connections, threads, headers, cpus)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + 60)
    if done.returncode != 0:
        raise RuntimeError(f"wrk failed ({done.returncode}): {done.stderr or done.stdout}")
    result = parse_wrk(done.stdout)
    if result.errors and not allow_errors:
        raise RuntimeError(
            f"wrk saw {result.non_2xx} non-2xx answers and socket errors "
            f"{result.socket_errors} on {url}:\n{done.stdout}"
        )
    return result


# --- latency of single requests ------------------------------------------------------


@dataclass
class LatencyResult:
    """Per-request latencies of n sequential requests on one kept-alive connection."""

    samples_ms: list[float]

    @property
    def median_ms(self) -> float:
        return median(self.samples_ms)

    def percentile_ms(self, p: float) -> float:
        ordered = sorted(self.samples_ms)
        return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]

    @property
    def p90_ms(self) -> float:
        return self.percentile_ms(90)

    @property
    def p99_ms(self) -> float:
        return self.percentile_ms(99)


def latency(
    url: str | Sequence[str],
    n: int = 200,
    headers: dict[str, str] | None = None,
    *,
    method: str = "GET",
    body: bytes | None = None,
    warmup: int = 10,
    expect_status: Iterable[int] = (200,),
    timeout: float = 60.0,
) -> LatencyResult:
    """Time n requests one after another over one persistent http.client connection.

    For endpoints too slow or too heavy for wrk: the figure is the time a single
    client waits, without queueing behind other requests. Given a list of URLs (of one
    server, at least warmup + n), request i asks for the i-th: no answer is asked twice.
    """
    urls = [url] * (warmup + n) if isinstance(url, str) else list(url)
    if len(urls) < warmup + n:
        raise ValueError(f"latency needs {warmup + n} URLs, got {len(urls)}")
    targets = []
    for each in urls:  # split before timing
        parts = urlsplit(each)
        targets.append((parts.path or "/") + (f"?{parts.query}" if parts.query else ""))
    wanted = set(expect_status)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    samples: list[float] = []
    try:
        for i in range(warmup + n):
            start = time.perf_counter()
            conn.request(method, targets[i], body=body, headers=headers or {})
            resp = conn.getresponse()
            payload = resp.read()
            elapsed = (time.perf_counter() - start) * 1000
            if resp.status not in wanted:
                raise RuntimeError(f"{method} {urls[i]} answered {resp.status}: {payload[:300]!r}")
            if resp.will_close:
                conn.close()  # http.client reopens on the next request
            if i >= warmup:
                samples.append(elapsed)
    finally:
        conn.close()
    return LatencyResult(samples)


# --- figures -------------------------------------------------------------------------


def median(values: Iterable[float]) -> float:
    """The median of the values (of the rounds, usually)."""
    values = list(values)
    if not values:
        raise ValueError("median of no values")
    return statistics.median(values)


def spread(values: Iterable[float]) -> str:
    """min–max of the rounds as text, to show how noisy the median is."""
    values = list(values)
    return f"{min(values):.0f}–{max(values):.0f}" if values else "-"


def report(
    name: str,
    value: float,
    unit: str = "",
    baseline: float | None = None,
    baseline_name: str = "baseline",
    target: float | None = None,
    higher_is_better: bool = True,
    note: str = "",
    digits: int = 1,
) -> str:
    """Print and return `name: value unit (ratio X vs baseline)`, with a target verdict."""
    text = f"{name}: {value:,.{digits}f}{(' ' + unit) if unit else ''}"
    if baseline:
        ratio = value / baseline
        text += f" (ratio {ratio:.2f} vs {baseline_name}"
        if target is not None:
            ok = ratio >= target if higher_is_better else ratio <= target
            text += f"; target {'≥' if higher_is_better else '≤'} {target:g}: "
            text += "met" if ok else "NOT MET"
        text += ")"
    if note:
        text += f"  [{note}]"
    print(text, flush=True)
    return text
