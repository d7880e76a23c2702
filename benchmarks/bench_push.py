"""Push benchmark: a 5,000-commit `git push` to hubsvc against `git http-backend`.

    python benchmarks/bench_push.py [--rounds 7 --commits 5000 --files 500]

Generates a bare repository with make_repo.py, then, round after round (the order
alternating), pushes its `main` with `git push --quiet` into a fresh empty repository
on each side: one created through hubsvc's API, and one `git init --bare` served by
lighttpd running git-http-backend as CGI behind HTTP Basic (so both sides answer git's
first request with a 401 and receive-pack runs as REMOTE_USER, as git-http-backend(1)
sets it up). Prints the median wall time of each and the ratio; target ≤ 1.1.

hubsvc runs with the `hubsvc.push.timing` logger at DEBUG, which logs one line per push
with its phases (hubsvc/services/push_timing.py); the benchmark waits for that line
after each push (so work left after the answer is done before the next round) and
prints each phase's median: where the time goes.

Exit code 0 when the target is met, 1 when not, 2 when lighttpd or git-http-backend
is missing.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import runpy
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

import bench_git
import harness
from bench_git import BACKEND, client_env, lighttpd_path, run
from make_repo import make_repo

PUSH_TARGET = 1.1  # hubsvc push wall time ÷ http-backend push wall time
POST_BUFFER = 1 << 30
USERNAME = "bench"
PASSWORD = "bench-password-1"
TIMING_RE = re.compile(r"push to repository (\d+): total=([\d.]+) ?(.*)$")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="measured rounds (default 7)")
    parser.add_argument("--commits", type=int, default=5000, help="commits on main")
    parser.add_argument("--files", type=int, default=500, help="files in the tree")
    parser.add_argument(
        "--root",
        type=Path,
        default=harness.ROOT,
        help="the hubsvc checkout to run (an older one logs no phases; its push figure stands)",
    )
    return parser.parse_args(argv)


class TimedHub(harness.Server):
    """hubsvc started through `bench_push.py _hubsvc`, with push timing logged."""

    def _argv(self) -> list[str]:
        argv = super()._argv()
        at = argv.index(str(self.root / "run.py"))
        argv[at:at] = [str(Path(__file__).resolve()), "_hubsvc"]
        return argv


def serve_hubsvc(argv: list[str]) -> None:
    """run.py with the push timing logger at DEBUG (run.py sets only the root's level)."""
    logging.getLogger("hubsvc.push.timing").setLevel(logging.DEBUG)
    sys.argv = argv
    runpy.run_path(argv[0], run_name="__main__")


def serve_lighttpd(root: Path, port: int, folder: Path) -> None:
    """bench_git's lighttpd behind HTTP Basic, each git process tracing into trace2/."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ready.txt").write_text("ok\n")
    # Each git process writes its trace2 events into a file of its own there, as
    # hubsvc's receive-pack does when its timing is on: both sides pay for it, and
    # receive-pack's children can be compared.
    (folder / "trace2").mkdir(exist_ok=True)
    users = folder / "users"
    users.write_text(f"{USERNAME}:{PASSWORD}\n")
    env = {"GIT_TRACE2_EVENT": str(folder / "trace2")}
    bench_git.serve_lighttpd(
        root, port, folder, bench_git.lighttpd_config(root, port, folder, env, users)
    )


def children_cpu(pid: int) -> float:
    """cutime + cstime of a process: the CPU of the children (and theirs) it waited for."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def push_seconds(source: Path, url: str, env: dict[str, str]) -> float:
    start = time.perf_counter()
    # A post buffer larger than the pack: git sends it with a Content-Length, which
    # lighttpd streams into the CGI (a chunked body it would spool first, or refuse).
    git = ["git", f"--git-dir={source}", "-c", f"http.postBuffer={POST_BUFFER}"]
    run([*git, "push", "--quiet", url, "main"], env)
    return time.perf_counter() - start


def timing_lines(hub: harness.Server) -> list[tuple[float, dict[str, float]]]:
    """(total, phases) of each push timing line in the server's log so far, in ms."""
    found = []
    for line in hub.log_path.read_text("utf-8", "replace").splitlines():
        match = TIMING_RE.search(line)
        if match:
            phases = {}
            for pair in match.group(3).split():
                name, _, value = pair.partition("=")
                phases[name] = float(value)
            found.append((float(match.group(2)), phases))
    return found


def wait_for_timing(hub: harness.Server, count: int, timeout: float = 60.0) -> None:
    """Wait until the server has logged count push timing lines (its work is done)."""
    deadline = time.monotonic() + timeout
    while len(timing_lines(hub)) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"no push timing line #{count} in the log:\n{hub.logs()}")
        time.sleep(0.02)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(
        "# command: " + shlex.join(getattr(sys, "orig_argv", [sys.executable, *sys.argv])),
        flush=True,
    )
    if not lighttpd_path():
        print("bench_push: `apt-get install -y lighttpd` first", file=sys.stderr)
        return 2
    if not os.access(BACKEND, os.X_OK):
        print(f"bench_push: {BACKEND} not found (git's http-backend)", file=sys.stderr)
        return 2
    print(
        f"# {run(['git', '--version']).decode().strip()}; {os.cpu_count()} CPUs; "
        f"{args.rounds} rounds, medians quoted; load average {os.getloadavg()[0]:.2f} at start",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="bench-push-") as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "home").mkdir()
        cenv = client_env(tmp / "home")
        started = time.perf_counter()
        source = make_repo(tmp / "source.git", args.commits, args.files)
        tip = run(["git", f"--git-dir={source}", "rev-parse", "main"]).decode().strip()
        print(
            f"# generated with make_repo.py: {args.commits} commits over {args.files} files "
            f"in {time.perf_counter() - started:.1f} s",
            flush=True,
        )
        backend_root = tmp / "backend-root"
        backend_root.mkdir()
        backend = harness.Server(
            command=[
                sys.executable,
                str(Path(__file__).resolve()),
                "_serve-lighttpd",
                str(backend_root),
                str(tmp / "lighttpd"),
            ],
            ready_path="/ready.txt",
            name="http-backend-lighttpd",
        )
        with TimedHub(root=args.root) as hub, backend:
            trace2 = tmp / "lighttpd" / "trace2"
            return bench(args, hub, backend, trace2, source, tip, backend_root, cenv)


def bench(
    args: argparse.Namespace,
    hub: harness.Server,
    backend: harness.Server,
    trace2: Path,
    source: Path,
    tip: str,
    backend_root: Path,
    env: dict[str, str],
) -> int:
    token = harness.sign_up(hub.url, USERNAME, PASSWORD)
    secret = quote(PASSWORD, safe="")

    def hub_target(n: int) -> str:
        harness.expect(
            *harness.request_json(
                hub.url + "/api/repositories", "POST", {"name": f"push-{n}"}, harness.bearer(token)
            ),
            201,
        )
        host = hub.url.removeprefix("http://")
        return f"http://{USERNAME}:{secret}@{host}/{USERNAME}/push-{n}.git"

    def backend_target(n: int) -> str:
        folder = backend_root / f"push-{n}.git"
        run(["git", "init", "--quiet", "--bare", "--initial-branch=main", str(folder)])
        host = backend.url.removeprefix("http://")
        return f"http://{USERNAME}:{secret}@{host}/git/push-{n}.git"

    print(
        f"\n## `git push --quiet <url> main` of {args.commits} commits into a fresh empty "
        "repository on each side",
        flush=True,
    )
    times: dict[str, list[float]] = {"hubsvc": [], "http-backend": []}
    pushes, timed = 0, True
    hub_cpu: list[float] = []  # the server process's own CPU time during its pushes
    children: dict[str, list[float]] = {"hubsvc": [], "http-backend": []}
    for round_no in range(args.rounds + 1):  # round 0 warms up, unmeasured
        order = ["hubsvc", "http-backend"] if round_no % 2 == 0 else ["http-backend", "hubsvc"]
        for name in order:
            target = hub_target(round_no) if name == "hubsvc" else backend_target(round_no)
            server = hub if name == "hubsvc" else backend
            cpu, git_cpu = harness.cpu_seconds(hub.pid), children_cpu(server.pid)
            elapsed = push_seconds(source, target, env)
            if name == "hubsvc" and round_no:
                hub_cpu.append(harness.cpu_seconds(hub.pid) - cpu)
            if name == "hubsvc" and timed:
                pushes += 1
                try:
                    wait_for_timing(hub, pushes, timeout=60 if round_no else 5)
                except RuntimeError:
                    if round_no:
                        raise
                    timed = False  # a checkout from before the timing line
                    print("# this hubsvc logs no push phases", flush=True)
            if round_no:  # with the commit-graph written after the answer, when timed
                children[name].append(children_cpu(server.pid) - git_cpu)
            if round_no:
                times[name].append(elapsed)
        if round_no:
            print(
                f"#   round {round_no}: "
                + ", ".join(f"{name} {times[name][-1] * 1000:.0f} ms" for name in times),
                flush=True,
            )
    check_landed(hub, backend_root, tip, args.rounds)

    base = harness.median(times["http-backend"])
    harness.report(
        "push via git http-backend",
        base * 1000,
        "ms",
        digits=0,
        note=f"rounds {harness.spread(t * 1000 for t in times['http-backend'])} ms",
    )
    text = harness.report(
        "push via hubsvc",
        harness.median(times["hubsvc"]) * 1000,
        "ms",
        base * 1000,
        "http-backend",
        target=PUSH_TARGET,
        higher_is_better=False,
        digits=0,
        note=f"rounds {harness.spread(t * 1000 for t in times['hubsvc'])} ms",
    )
    # Each round's two pushes ran back to back: their ratio shrugs off load that comes
    # and goes between rounds, which the ratio of medians does not.
    paired = [h / b for h, b in zip(times["hubsvc"], times["http-backend"], strict=True)]
    print(
        f"# median of the rounds' own ratios: {harness.median(paired):.2f} "
        f"(rounds {min(paired):.2f}–{max(paired):.2f})",
        flush=True,
    )
    print(
        f"# hubsvc's own process used {harness.median(hub_cpu) * 1000:.0f} ms of CPU per push "
        "(its git children not counted)",
        flush=True,
    )
    print(
        "# CPU of the git processes each server waited for, per push: "
        + ", ".join(f"{name} {harness.median(v) * 1000:.0f} ms" for name, v in children.items()),
        flush=True,
    )
    if timed:
        print_phases(timing_lines(hub)[1:], backend_children(trace2)[1:])
    return 1 if "NOT MET" in text else 0


def check_landed(hub: harness.Server, backend_root: Path, tip: str, rounds: int) -> None:
    """Every push landed main at the source's tip, and hubsvc wrote its commit-graph."""
    served = sorted((hub.data_dir / "repositories").glob("*/*.git"))
    folders = served + sorted(backend_root.glob("push-*.git"))
    if len(folders) != 2 * (rounds + 1):
        raise RuntimeError(f"expected {2 * (rounds + 1)} repositories, found {folders}")
    for folder in folders:
        got = run(["git", f"--git-dir={folder}", "rev-parse", "main"]).decode().strip()
        if got != tip:
            raise RuntimeError(f"{folder}: main is {got}, not {tip}")
    missing = [str(f) for f in served if not (f / "objects/info/commit-graph").exists()]
    if missing:
        raise RuntimeError(f"no commit-graph in {missing}")
    print(f"# checked: all {len(folders)} pushes landed main at {tip[:12]}; commit-graphs written")


def backend_children(folder: Path) -> list[dict[str, float]]:
    """receive-pack's children under http-backend, per push in time order, from trace2."""
    pushes = []
    for path in folder.iterdir():
        events = [json.loads(line) for line in path.read_text().splitlines() if line]
        argv = next((e["argv"] for e in events if e["event"] == "start"), [])
        if "receive-pack" not in argv or "--advertise-refs" in argv:
            continue
        own, names, spans = events[0]["sid"], {}, {}
        for event in events:
            if event["sid"] != own:
                continue
            if event["event"] == "child_start":
                args = event.get("argv") or ["?"]
                names[event["child_id"]] = event.get("hook_name") or (
                    args[1] if args[0] == "git" else args[0]
                )
            elif event["event"] == "child_exit" and event["child_id"] in names:
                name = "git." + names[event["child_id"]]
                spans[name] = spans.get(name, 0.0) + event["t_rel"] * 1000
        pushes.append((events[0]["time"], spans))
    return [spans for _time, spans in sorted(pushes, key=lambda item: item[0])]


def print_phases(
    lines: list[tuple[float, dict[str, float]]], backend: list[dict[str, float]]
) -> None:
    """Each phase's median over the measured pushes, in the order the server logged them."""
    print(
        "\n## where hubsvc's time goes (medians of the server's phase timings, ms; "
        "`git.*` are receive-pack's children, inside `body` + `git`, with http-backend's "
        "own receive-pack's beside them)",
        flush=True,
    )
    names: list[str] = []
    for _total, phases in lines:
        names += [name for name in phases if name not in names]
    # receive-pack's own children last: they ran inside `body` and `git`.
    names.sort(key=lambda name: name.startswith("git."))
    after = False
    for name in names:
        values = [phases.get(name, 0.0) for _total, phases in lines]
        where = ""
        if name.startswith("git."):
            theirs = [spans.get(name, 0.0) for spans in backend]
            where = f"  (of body + git; http-backend's {harness.median(theirs or [0]):.1f})"
        where = "  after the answer" if after and not where else where
        print(f"  {name:<22} {harness.median(values):8.1f}{where}", flush=True)
        after |= name == "answer"
    print(f"  {'total':<22} {harness.median(t for t, _ in lines):8.1f}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "_serve-lighttpd":
        root, folder = Path(sys.argv[2]), Path(sys.argv[3])
        serve_lighttpd(root, int(sys.argv[sys.argv.index("--port") + 1]), folder)
    if len(sys.argv) >= 2 and sys.argv[1] == "_hubsvc":
        serve_hubsvc(sys.argv[2:])
        sys.exit(0)
    shutil.which("git") or sys.exit("bench_push: git is not installed")
    sys.exit(main())
