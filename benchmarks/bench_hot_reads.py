"""Hot reads A/B: CPU per request and req/s of checkouts side by side, interleaved rounds.

    python benchmarks/bench_hot_reads.py --rounds 3 --seconds 3 CHECKOUT [CHECKOUT ...]
        [--databases sqlite,postgres] [--issues 30] [--paths health,me,repo,issues,...]

Each checkout (a folder with run.py, e.g. this one and a `git worktree add --detach`
of the commit before a change) runs as its own server (`run.py`, rate limit off, SSH
off) per database, beside tools/perf's hello_app.py on uvloop (the baseline of
`tools/perf/measure`); each signs up `perfuser`, creates `perfuser/perf` and opens
--issues issues. wrk (-t1 -c64, Bearer) then runs each path against each server, round
after round, the order reversed every other round. Printed per server and path: the
median req/s and its ratio to hello's, the median CPU per request (user + system time
of the server process over the run ÷ requests) and hello's ÷ that, p50 and p99.

On a shared machine req/s swings by half between rounds; CPU per request moves by a few
percent, so compare that one between checkouts. `issues-uncached` asks a random page
(offset 0..269) each request (a wrk Lua script), past any cache.
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

PATHS = {
    "health": ("/health", False),
    "me": ("/api/users/me", True),
    "repo": ("/api/repositories/perfuser/perf", True),
    "issues": ("/api/repositories/perfuser/perf/issues", True),
    "pulls": ("/api/repositories/perfuser/perf/pulls", True),
    "issues-uncached": ("/api/repositories/perfuser/perf/issues?limit=30", True),
}
CONFIG = "[rate_limit]\nenabled = false\n\n[websocket]\nmax_per_ip = 20000\n\n[ssh]\nport = 0\n"
RANDOM_PAGE = """math.randomseed(os.time())
request = function()
  return wrk.format("GET", wrk.path .. "&offset=" .. math.random(0, 269))
end
"""


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wrk(url: str, token: str | None, seconds: int, script: str | None) -> dict | None:
    cmd = ["wrk", "-t1", "-c64", f"-d{seconds}s", "--latency", url]
    if token:
        cmd[1:1] = ["-H", f"Authorization: Bearer {token}"]
    if script:
        cmd[1:1] = ["-s", script]
    out = subprocess.run(cmd, capture_output=True, text=True).stdout
    total = re.search(r"(\d+) requests in", out)
    if not total:
        print("wrk failed:", url, out[-300:], file=sys.stderr)
        return None

    def ms(p: int) -> float:
        m = re.search(rf"\s{p}%\s+([\d.]+)(us|ms|s)", out)
        assert m is not None
        return float(m[1]) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[m[2]]

    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    assert rps is not None
    return {"total": int(total[1]), "rps": float(rps[1]), "p50": ms(50), "p99": ms(99)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("checkouts", nargs="+")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=3)
    parser.add_argument("--issues", type=int, default=30)
    parser.add_argument("--databases", default="sqlite", help="sqlite,postgres")
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("--paths", default="health,me,repo,issues")
    parser.add_argument("--tools", default="../shared/tools/perf", help="tools/perf folder")
    parser.add_argument("--python", default=sys.executable, help="the servers' python")
    args = parser.parse_args()
    sys.path.insert(0, os.path.abspath(args.tools))
    import hubsvc_proc as hp  # tools/perf's process and API helpers

    work = tempfile.mkdtemp(prefix="hot-reads-")
    script = os.path.join(work, "page.lua")
    Path(script).write_text(RANDOM_PAGE)
    made: list[str] = []
    with hp.Cleanup() as cleanup:
        hello_port = hp.free_port()
        hello = cleanup.add(
            hp.Proc(
                "hello",
                [
                    args.python,
                    os.path.join(args.tools, "hello_app.py"),
                    str(hello_port),
                    "--uvloop",
                ],
                os.path.join(work, "hello.log"),
            )
        )
        hp.wait_http(hello_port, "/", hello, 30)
        targets = [("hello", "/", hello.pid, hello_port, None)]
        for n, (checkout, db) in enumerate(
            itertools.product(args.checkouts, args.databases.split(","))
        ):
            config = CONFIG
            if db == "postgres":
                name = f"hot_reads_{os.getpid()}_{n}"
                subprocess.run(
                    ["psql", args.postgres, "-qc", f"CREATE DATABASE {name}"], check=True
                )
                made.append(name)
                config += f'\n[database]\nurl = "{args.postgres}/{name}"\n'
            folder = tempfile.mkdtemp(prefix="server-", dir=work)
            proc, port, _ = hp.start_hubsvc(cleanup, args.python, checkout, folder, config)
            api = hp.Api(port)
            hp.sign_up(api)
            api.request("POST", "/api/repositories", {"name": "perf", "description": "bench"})
            for i in range(args.issues):
                api.request(
                    "POST",
                    "/api/repositories/perfuser/perf/issues",
                    {"title": f"issue {i}", "body": "some body text " * 10},
                )
            label = f"{os.path.basename(os.path.abspath(checkout))} {db}"
            for key in args.paths.split(","):
                path, auth = PATHS[key]
                targets.append(
                    (f"{label} {key}", path, proc.pid, port, api.token if auth else None)
                )
        results: dict[str, list[dict]] = {}
        for t in targets:  # warm-up
            wrk(f"http://127.0.0.1:{t[3]}{t[1]}", t[4], 1, script if "limit=" in t[1] else None)
        for r in range(args.rounds):
            for name, path, pid, port, token in targets if r % 2 == 0 else targets[::-1]:
                before = cpu_seconds(pid)
                got = wrk(
                    f"http://127.0.0.1:{port}{path}",
                    token,
                    args.seconds,
                    script if "limit=" in path else None,
                )
                if got is not None:
                    got["cpu"] = (cpu_seconds(pid) - before) / got["total"] * 1e6
                    results.setdefault(name, []).append(got)
    for name in made:
        subprocess.run(["psql", args.postgres, "-qc", f"DROP DATABASE IF EXISTS {name}"])
    hello_rps = statistics.median(x["rps"] for x in results["hello"])
    hello_cpu = statistics.median(x["cpu"] for x in results["hello"])
    print(
        f"{'target':36} {'req/s':>8} {'÷hello':>6} {'cpu µs/req':>10} {'hello÷this':>10} p50/p99 ms"
    )
    for name, runs in results.items():
        rps = statistics.median(x["rps"] for x in runs)
        cpu = statistics.median(x["cpu"] for x in runs)
        p50 = statistics.median(x["p50"] for x in runs)
        p99 = statistics.median(x["p99"] for x in runs)
        print(
            f"{name:36} {rps:8.0f} {rps / hello_rps:6.2f} {cpu:10.1f} {hello_cpu / cpu:10.2f} {p50:.1f}/{p99:.1f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
