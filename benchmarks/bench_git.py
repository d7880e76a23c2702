"""Git benchmark: clone, browsing latency and clone memory of hubsvc against git itself.

    python benchmarks/bench_git.py [--rounds 5 --commits 5000 --files 500
                                    --requests 50 --runs 30 --baseline auto --only all]

Generates a bare repository with make_repo.py, signs up one user, creates a public
repository and pushes the generated history into it with `git push --mirror`. Every
figure is then measured on the bare repository hubsvc keeps under
<data_dir>/repositories/ (so both sides see the same packs and the same commit-graph,
which hubsvc writes after each push):

1. `git clone --bare -q` wall time through hubsvc ÷ through `git http-backend` (CGI)
   serving that same folder; interleaved rounds, medians. Target ≤ 1.2.
2. Latency of the browsing routes (commits?skip=4000, tree, file, one commit, diff)
   through hubsvc, n sequential requests on one kept-alive connection, ÷ the git command
   doing the same work, timed as a spawned process. Targets (issue 25): tree, file and
   commit ≤ 0.5, diff and commits ≤ 1. The commits page is also timed as a first
   request (each from another start commit), without a target.
3. The server's VmRSS while three clones run one after another: idle before, the peak
   during each, against the pack size. Streaming means no growth with the pack.

The http-backend baseline (`--baseline`):
- `lighttpd`: lighttpd (Debian's `lighttpd` package) running git-http-backend through
  mod_cgi, with streaming request and response bodies; the setup git's own
  documentation gives. `apt-get install -y lighttpd`.
- `bridge`: a stdlib-only Python CGI bridge in this file (one thread per connection,
  HTTP/1.1 keep-alive, the CGI's output streamed in chunks).
- `auto` (default): lighttpd when installed, else the bridge. The choice is printed.

Both run git-http-backend with the environment hubsvc gives git (PATH, HOME,
GIT_CONFIG_NOSYSTEM=1) plus GIT_PROJECT_ROOT and GIT_HTTP_EXPORT_ALL.

Exit code 0 when every target is met, 1 when one is not, 2 when a tool is missing.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

import harness
from make_repo import make_repo

CLONE_TARGET = 1.2  # hubsvc clone wall time ÷ http-backend clone wall time
# hubsvc request latency ÷ the git process doing the same work (issue 25 item 2)
BROWSE_TARGETS = {"commits": 1.0, "tree": 0.5, "file": 0.5, "commit": 0.5, "diff": 1.0}
STREAM_TARGET = 0.5  # RSS growth during a clone ÷ pack size (buffering the pack is ≥ 1)
USERNAME = "bench"
PASSWORD = "bench-password-1"
REPO_NAME = "bench"
SKIP, LIMIT = 4000, 30
BACKEND = "/usr/lib/git-core/git-http-backend"
# The fields hubsvc asks `git log` for (hubsvc/gitrepo.py _LOG_FORMAT), so both sides
# format the same commits the same way.
LOG_FORMAT = "%x00".join(("%H", "%P", "%an", "%ae", "%at", "%cn", "%ce", "%ct", "%B"))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rounds", type=int, default=5, help="interleaved rounds of clones and of latency runs (5)"
    )
    parser.add_argument("--commits", type=int, default=5000, help="generated commits (5000)")
    parser.add_argument("--files", type=int, default=500, help="generated files (500)")
    parser.add_argument(
        "--requests", type=int, default=50, help="hubsvc requests per route per round (50)"
    )
    parser.add_argument(
        "--runs", type=int, default=30, help="git processes per command per round (30)"
    )
    parser.add_argument(
        "--rss-clones",
        type=int,
        default=3,
        help="clones in a row while sampling the server's RSS (3)",
    )
    parser.add_argument(
        "--baseline",
        choices=("auto", "lighttpd", "bridge"),
        default="auto",
        help="what serves git-http-backend (auto: lighttpd if installed)",
    )
    parser.add_argument(
        "--only",
        choices=("all", "browse"),
        default="all",
        help="browse: part 2 alone, no clones, no http-backend baseline (all)",
    )
    return parser.parse_args(argv)


# --- environments ----------------------------------------------------------------------


def git_env() -> dict[str, str]:
    """The environment hubsvc runs its git commands in (gitrepo._git_env)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_TERMINAL_PROMPT="0",
        GIT_NO_REPLACE_OBJECTS="1",
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
    )
    return env


def client_env(home: Path) -> dict[str, str]:
    """The cloning client's environment: no user or system config, no prompts."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        HOME=str(home),
        GIT_TERMINAL_PROMPT="0",
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
    )
    return env


def backend_env(project_root: Path) -> dict[str, str]:
    """What git-http-backend gets besides the CGI variables: hubsvc's git env (githttp._env)."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_PROJECT_ROOT": str(project_root),
        "GIT_HTTP_EXPORT_ALL": "1",
    }


# --- the http-backend baseline, as a process of its own ---------------------------------


def serve_bridge(root: Path, port: int) -> None:
    """A minimal CGI server for git-http-backend under /git/ (the `bridge` baseline)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
    from urllib.parse import unquote

    base_env = backend_env(root)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:  # no access log, like lighttpd here
            pass

        def do_GET(self) -> None:
            self._cgi()

        def do_POST(self) -> None:
            self._cgi()

        def _cgi(self) -> None:
            path, _, query = self.path.partition("?")
            if not path.startswith("/git/"):
                self.send_error(404)
                return
            env = dict(
                base_env,
                GATEWAY_INTERFACE="CGI/1.1",
                SERVER_PROTOCOL="HTTP/1.1",
                REQUEST_METHOD=self.command,
                PATH_INFO=unquote(path[len("/git") :]),
                QUERY_STRING=query,
                REMOTE_ADDR=self.client_address[0],
                SCRIPT_NAME="/git",
                SERVER_NAME="127.0.0.1",
                SERVER_PORT=str(port),
            )
            for key, value in self.headers.items():
                name = key.upper().replace("-", "_")
                if name == "CONTENT_TYPE":
                    env["CONTENT_TYPE"] = value
                elif name == "CONTENT_LENGTH":
                    env["CONTENT_LENGTH"] = value
                elif name not in ("TRANSFER_ENCODING", "CONNECTION", "AUTHORIZATION"):
                    env["HTTP_" + name] = value
            proc = subprocess.Popen(
                [BACKEND], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
            )
            feeder = threading.Thread(target=self._feed, args=(proc.stdin,), daemon=True)
            feeder.start()
            status, headers = 200, []
            while line := proc.stdout.readline().rstrip(b"\r\n"):
                key, _, value = line.decode("latin-1").partition(":")
                if key.lower() == "status":
                    status = int(value.split()[0])
                else:
                    headers.append((key, value.strip()))
            self.send_response(status)
            for key, value in headers:
                self.send_header(key, value)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            while chunk := proc.stdout.read1(65536):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
            proc.wait()
            feeder.join()

        def _feed(self, stdin) -> None:
            try:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    while size := int(self.rfile.readline().split(b";")[0], 16):
                        stdin.write(self.rfile.read(size))
                        self.rfile.readline()
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                else:
                    left = int(self.headers.get("Content-Length") or 0)
                    while left > 0:
                        chunk = self.rfile.read(min(left, 65536))
                        if not chunk:
                            break
                        stdin.write(chunk)
                        left -= len(chunk)
            except BrokenPipeError:
                pass
            finally:
                try:
                    stdin.close()
                except BrokenPipeError:
                    pass

    def stop(*_: object) -> None:
        raise KeyboardInterrupt

    ThreadingHTTPServer.daemon_threads = True
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    signal.signal(signal.SIGTERM, stop)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


def lighttpd_config(
    root: Path,
    port: int,
    folder: Path,
    env: dict[str, str] | None = None,
    users: Path | None = None,
) -> str:
    """lighttpd running git-http-backend as CGI under /git, as git-http-backend(1) shows;
    with `users` (a plain user file), behind HTTP Basic, as it shows for pushes."""
    pairs = ", ".join(f'"{k}" => "{v}"' for k, v in {**backend_env(root), **(env or {})}.items())
    auth = ["mod_auth", "mod_authn_file"] if users else []
    modules = ", ".join(f'"{m}"' for m in ["mod_alias", *auth, "mod_cgi", "mod_setenv"])
    return "\n".join(
        [
            f"server.modules = ({modules})",
            f'server.document-root = "{folder}"',
            'server.bind = "127.0.0.1"',
            f"server.port = {port}",
            f'server.errorlog = "{folder}/error.log"',
            f'server.upload-dirs = ("{folder}")',
            # Stream both bodies instead of spooling them to temp files first.
            "server.stream-request-body = 2",
            "server.stream-response-body = 2",
            "server.max-keep-alive-requests = 1000",
            *(
                [
                    'auth.backend = "plain"',
                    f'auth.backend.plain.userfile = "{users}"',
                    'auth.require = ("/git" => ("method" => "basic", "realm" => "git",'
                    ' "require" => "valid-user"))',
                ]
                if users
                else []
            ),
            f'alias.url = ("/git" => "{BACKEND}")',
            '$HTTP["url"] =~ "^/git" {',
            '  cgi.assign = ("" => "")',
            f"  setenv.set-environment = ({pairs})",
            "}",
            "",
        ]
    )


def serve_lighttpd(root: Path, port: int, folder: Path, config: str | None = None) -> None:
    """Write the config (default: lighttpd_config's) into folder and become lighttpd (so
    SIGTERM reaches it)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "lighttpd.conf"
    path.write_text(config or lighttpd_config(root, port, folder))
    lighttpd = lighttpd_path() or "/usr/sbin/lighttpd"
    os.execv(lighttpd, [lighttpd, "-D", "-f", str(path)])


def lighttpd_path() -> str | None:
    return shutil.which("lighttpd") or (
        "/usr/sbin/lighttpd" if os.access("/usr/sbin/lighttpd", os.X_OK) else None
    )


def backend_server(kind: str, project_root: Path, repo_dir: str, tmp: Path) -> harness.Server:
    sub = "_serve-lighttpd" if kind == "lighttpd" else "_serve-bridge"
    return harness.Server(
        command=[
            sys.executable,
            str(Path(__file__).resolve()),
            sub,
            str(project_root),
            str(tmp / kind),
        ],
        ready_path=f"/git/{repo_dir}/info/refs?service=git-upload-pack",
        name=f"http-backend-{kind}",
    )


# --- memory of a process tree -----------------------------------------------------------


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                kids += [int(x) for x in fh.read().split()]
    except OSError:
        pass
    return kids


def _tree_rss_kib(pid: int) -> int:
    """VmRSS of the descendants of pid (not pid itself), 0 when none."""
    total, todo = 0, _children(pid)
    while todo:
        child = todo.pop()
        try:
            total += harness.rss_kib(child)
        except (OSError, RuntimeError):
            continue  # gone, or a zombie without VmRSS
        todo += _children(child)
    return total


class RssSampler:
    """Samples the server's VmRSS and its git children's summed VmRSS every interval."""

    def __init__(self, pid: int, interval: float = 0.01) -> None:
        self.pid, self.interval = pid, interval
        self.peak_kib = self.children_peak_kib = self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak_kib = max(self.peak_kib, harness.rss_kib(self.pid))
            except (OSError, RuntimeError):
                return
            self.children_peak_kib = max(self.children_peak_kib, _tree_rss_kib(self.pid))
            self.samples += 1
            self._stop.wait(self.interval)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


# --- helpers ----------------------------------------------------------------------------


def run(cmd: list[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> bytes:
    done = subprocess.run(cmd, capture_output=True, env=env, cwd=cwd, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise RuntimeError(
            f"{shlex.join(cmd)} failed ({done.returncode}): "
            f"{done.stderr.decode(errors='replace')[-2000:]}"
        )
    return done.stdout


def time_process(cmd: list[str], env: dict[str, str], n: int, warmup: int = 3) -> list[float]:
    """Wall time in ms of n runs of cmd, each a spawned process, output captured."""
    samples = []
    for i in range(warmup + n):
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, env=env, stdin=subprocess.DEVNULL)
        elapsed = (time.perf_counter() - start) * 1000
        if done.returncode != 0:
            raise RuntimeError(f"{shlex.join(cmd)} failed: {done.stderr[-500:]!r}")
        if i >= warmup:
            samples.append(elapsed)
    return samples


def clone_seconds(url: str, work: Path, env: dict[str, str]) -> tuple[float, int]:
    """Wall time of `git clone --bare -q url`, and the size of the pack it received."""
    dest = Path(tempfile.mkdtemp(dir=work, prefix="clone-"))
    shutil.rmtree(dest)
    start = time.perf_counter()
    run(["git", "clone", "--bare", "-q", url, str(dest)], env=env)
    elapsed = time.perf_counter() - start
    pack = sum(p.stat().st_size for p in (dest / "objects" / "pack").glob("*.pack"))
    shutil.rmtree(dest)
    return elapsed, pack


def commit_graph(repo: Path) -> str:
    info = repo / "objects" / "info"
    single = info / "commit-graph"
    chain = info / "commit-graphs" / "commit-graph-chain"
    if single.exists():
        return f"yes (objects/info/commit-graph, {single.stat().st_size / 1024:.0f} KiB)"
    if chain.exists():
        layers = len(chain.read_text().split())
        return f"yes (a chain of {layers} in objects/info/commit-graphs)"
    return "NO"


def wait_for_commit_graph(repo: Path, timeout: float = 60.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state = commit_graph(repo)
        if state != "NO":
            return state
        time.sleep(0.1)
    return commit_graph(repo)


def pick_paths(repo: Path, env: dict[str, str]) -> tuple[str, int, str, int]:
    """The directory with the most entries at main, and the most-edited file."""
    git = ["git", f"--git-dir={repo}"]
    names = run(git + ["ls-tree", "-r", "-t", "--name-only", "-z", "main"], env).split(b"\0")
    parents = Counter(name.decode().rpartition("/")[0] for name in names if name)
    folder, entries = max(
        ((d, c) for d, c in parents.items() if d), key=lambda item: (item[1], item[0])
    )
    touched = Counter(
        line
        for line in run(git + ["log", "--format=", "--name-only", "main"], env)
        .decode()
        .splitlines()
        if line
    )
    blobs = set(run(git + ["ls-tree", "-r", "--name-only", "main"], env).decode().splitlines())
    path, edits = max(
        ((p, c) for p, c in touched.items() if p in blobs), key=lambda item: (item[1], item[0])
    )
    return folder, entries, path, edits


def ms(values: list[float]) -> str:
    return f"{harness.median(values):.2f} ms"


# --- the benchmark ----------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print(
        "# command: " + shlex.join(getattr(sys, "orig_argv", [sys.executable, *sys.argv])),
        flush=True,
    )
    kind = args.baseline
    if kind == "auto":
        kind = "lighttpd" if lighttpd_path() else "bridge"
    if args.only == "browse":
        kind = "bridge"  # never started: part 2 times git itself
    if kind == "lighttpd" and not lighttpd_path():
        print(
            "bench_git: `lighttpd` is not installed: `apt-get update && apt-get install -y "
            "lighttpd`, or use --baseline bridge",
            file=sys.stderr,
        )
        return 2
    if not os.access(BACKEND, os.X_OK):
        print(f"bench_git: {BACKEND} not found (git's http-backend)", file=sys.stderr)
        return 2
    git_version = run(["git", "--version"]).decode().strip()
    baseline_desc = {
        "lighttpd": (
            run([lighttpd_path(), "-v"]).decode().strip().split(" - ")[0]
            + " running git-http-backend via mod_cgi (streamed bodies)"
        ),
        "bridge": "git-http-backend via the stdlib Python CGI bridge in bench_git.py",
    }[kind]
    print(
        f"# {git_version}; {os.cpu_count()} CPUs; python {sys.version.split()[0]}; "
        f"{args.rounds} rounds, medians quoted; load average "
        f"{os.getloadavg()[0]:.2f} at start",
        flush=True,
    )
    if args.only == "all":
        print(
            f"# baseline: {baseline_desc}, serving hubsvc's own bare repository folder",
            flush=True,
        )

    failed = False
    with tempfile.TemporaryDirectory(prefix="bench-git-") as tmp_name:
        tmp = Path(tmp_name)
        home = tmp / "home"
        home.mkdir()
        cenv, genv = client_env(home), git_env()

        started = time.perf_counter()
        source = make_repo(tmp / "source.git", args.commits, args.files)
        source_pack = sum(p.stat().st_size for p in (source / "objects/pack").glob("*.pack"))
        print(
            f"# generated with make_repo.py: {args.commits} commits over {args.files} files "
            f"in {time.perf_counter() - started:.1f} s ({harness.mib(source_pack / 1024):.1f} "
            f"MiB fast-import pack)",
            flush=True,
        )

        with harness.Server() as hub:
            token = harness.sign_up(hub.url, USERNAME, PASSWORD)
            start_kib = harness.rss_kib(hub.pid)
            harness.expect(
                *harness.request_json(
                    hub.url + "/api/repositories",
                    "POST",
                    {"name": REPO_NAME},
                    harness.bearer(token),
                ),
                201,
            )
            port = hub.url.rsplit(":", 1)[1]
            push_url = (
                f"http://{USERNAME}:{quote(PASSWORD, safe='')}@127.0.0.1:{port}/"
                f"{USERNAME}/{REPO_NAME}.git"
            )
            started = time.perf_counter()
            run(["git", f"--git-dir={source}", "push", "--quiet", "--mirror", push_url], cenv)
            print(
                f"# pushed with `git push --mirror` in {time.perf_counter() - started:.1f} s",
                flush=True,
            )

            found = sorted((hub.data_dir / "repositories").glob("*/*.git"))
            if len(found) != 1:
                raise RuntimeError(f"expected one repository under the data dir, found {found}")
            served = found[0]
            graph = wait_for_commit_graph(served)
            pack_bytes = sum(p.stat().st_size for p in (served / "objects/pack").glob("*.pack"))
            packs = len(list((served / "objects/pack").glob("*.pack")))
            print(f"# hubsvc's bare repository: {served}", flush=True)
            print(
                f"# its packs: {packs} file(s), {harness.mib(pack_bytes / 1024):.2f} MiB; "
                f"commit-graph: {graph}",
                flush=True,
            )

            hub_url = f"{hub.url}/{USERNAME}/{REPO_NAME}.git"
            if args.only == "all":
                # Memory first, so "idle" is the server after the push only, before any clone.
                failed |= bench_memory(args, hub, hub_url, tmp, cenv, pack_bytes, start_kib)
                with backend_server(kind, served.parent, served.name, tmp) as backend:
                    base_url = f"{backend.url}/git/{served.name}"
                    failed |= bench_clones(args, hub_url, base_url, tmp, cenv)
            failed |= bench_browse(args, hub.url, served, genv)
            graph_after = commit_graph(served)
            if graph_after != graph:
                print(f"# commit-graph changed during the run: {graph_after}")
    print(
        f"\n# load average {os.getloadavg()[0]:.2f} at the end (other work on the machine "
        f"shows here)",
        flush=True,
    )
    return 1 if failed else 0


def bench_clones(
    args: argparse.Namespace, hub_url: str, base_url: str, tmp: Path, env: dict[str, str]
) -> bool:
    print("\n## 1. clone: `git clone --bare -q <url>` into a fresh temp folder", flush=True)
    names = {"hubsvc": hub_url, "http-backend": base_url}
    for url in names.values():  # unmeasured warm-up: page cache, first-request costs
        clone_seconds(url, tmp, env)
    times: dict[str, list[float]] = {name: [] for name in names}
    received = 0
    for round_no in range(args.rounds):
        order = list(names) if round_no % 2 == 0 else list(names)[::-1]
        for name in order:
            elapsed, received = clone_seconds(names[name], tmp, env)
            times[name].append(elapsed)
        print(
            f"#   round {round_no + 1}: "
            + ", ".join(f"{name} {times[name][-1] * 1000:.0f} ms" for name in names),
            flush=True,
        )
    base = harness.median(times["http-backend"])
    harness.report(
        "clone via git http-backend",
        base * 1000,
        "ms",
        digits=0,
        note=f"rounds {harness.spread(t * 1000 for t in times['http-backend'])} ms; "
        f"pack received {harness.mib(received / 1024):.2f} MiB",
    )
    hub = harness.median(times["hubsvc"])
    text = harness.report(
        "clone via hubsvc",
        hub * 1000,
        "ms",
        base * 1000,
        "http-backend",
        target=CLONE_TARGET,
        higher_is_better=False,
        digits=0,
        note=f"rounds {harness.spread(t * 1000 for t in times['hubsvc'])} ms",
    )
    return "NOT MET" in text


def bench_browse(args: argparse.Namespace, url: str, repo: Path, env: dict[str, str]) -> bool:
    print(
        f"\n## 2. browsing: hubsvc latency ({args.requests} requests per round on one "
        f"kept-alive connection, anonymous, public repository) ÷ git process time "
        f"({args.runs} spawned runs per round)",
        flush=True,
    )
    api = f"{url}/api/repositories/{USERNAME}/{REPO_NAME}"
    git = ["git", f"--git-dir={repo}"]
    folder, entries, path, edits = pick_paths(repo, env)
    page = harness.expect(
        *harness.request_json(f"{api}/commits?branch=main&limit={LIMIT}&skip={SKIP}"), 200
    )
    if len(page["commits"]) != LIMIT:
        raise RuntimeError(
            f"commits page has {len(page['commits'])} items; use --commits > {SKIP + LIMIT}"
        )
    oid = page["commits"][0]["oid"]
    print(
        f"#   tree: {folder}/ ({entries} entries, the largest folder); file: {path} (edited "
        f"in {edits} commits, the most-edited); diff: {oid[:12]} (first commit of the "
        f"skip={SKIP} page)",
        flush=True,
    )

    cases = {
        f"commits?limit={LIMIT}&skip={SKIP}": (
            f"{api}/commits?branch=main&limit={LIMIT}&skip={SKIP}",
            # hubsvc asks for limit + 1 to know hasMore; the same command here.
            git
            + [
                "log",
                "-z",
                f"--format={LOG_FORMAT}",
                f"--skip={SKIP}",
                f"--max-count={LIMIT + 1}",
                "main",
                "--",
            ],
        ),
        "tree": (
            f"{api}/tree?branch=main&path={quote(folder)}",
            git + ["ls-tree", "-l", "main", folder + "/"],
        ),
        "file": (
            f"{api}/file?branch=main&path={quote(path)}",
            git + ["cat-file", "blob", f"main:{path}"],
        ),
        # One commit by oid: the API's page of one (hasMore from its parents), against
        # git printing that commit's fields.
        "commit": (
            f"{api}/commits?branch={oid}&limit=1",
            git + ["show", "-s", "-z", f"--format={LOG_FORMAT}", oid, "--"],
        ),
        "diff": (f"{api}/commits/{oid}/diff", git + ["show", f"--format={LOG_FORMAT}", "-M", oid]),
    }
    check_same_work(cases, env, page)
    # hubsvc keeps what it learnt of a walk by its start commit: the same page asked again
    # is read from that. Here every request starts from another commit (the API takes an
    # oid for `branch`), so each one costs what a first request does.
    per_round = 10 + args.requests  # harness.latency's warm-up, then the timed ones
    starts = run(git + ["rev-list", f"--max-count={args.rounds * per_round}", "main"], env)
    starts_list = starts.decode().split()
    if (
        len(starts_list) < args.rounds * per_round
        or int(run(git + ["rev-list", "--count", starts_list[-1]], env)) <= SKIP + LIMIT
    ):
        raise RuntimeError("too few commits for the first-request case: raise --commits")
    cold = f"commits?limit={LIMIT}&skip={SKIP}, first request from each start"
    cases[cold] = (
        [f"{api}/commits?branch={start}&limit={LIMIT}&skip={SKIP}" for start in starts_list],
        cases[f"commits?limit={LIMIT}&skip={SKIP}"][1][:-2] + [starts_list[0], "--"],
    )
    first = harness.expect(*harness.request_json(cases[cold][0][-1]), 200)
    if (
        first["commits"]
        != git_log_items(run(cases[cold][1][:-2] + [starts_list[-1], "--"], env))[:LIMIT]
    ):
        raise RuntimeError("hubsvc's page from another start differs from git log's")
    for name, (target, cmd) in cases.items():
        shown = (target if isinstance(target, str) else target[0])[len(url) :]
        print(f"#   {name}: GET {shown}  vs  {shlex.join(cmd)}", flush=True)

    hub_ms: dict[str, list[float]] = {name: [] for name in cases}
    git_ms: dict[str, list[float]] = {name: [] for name in cases}
    names = list(cases)
    for round_no in range(args.rounds):
        order = names[round_no % len(names) :] + names[: round_no % len(names)]
        for name in order:
            target, cmd = cases[name]
            if not isinstance(target, str):  # this round's own start commits
                target = target[round_no * per_round : (round_no + 1) * per_round]
            hub = harness.latency(target, args.requests).samples_ms
            base = time_process(cmd, env, args.runs)
            hub_ms[name] += hub
            git_ms[name] += base
            print(f"#   round {round_no + 1} {name}: hubsvc {ms(hub)}, git {ms(base)}", flush=True)
    failed = False
    for name in names:
        base = harness.median(git_ms[name])
        hub = harness.median(hub_ms[name])
        harness.report(f"git {name}", base, "ms", digits=2, note=f"{len(git_ms[name])} runs")
        text = harness.report(
            f"hubsvc {name}",
            hub,
            "ms",
            base,
            "git",
            target=None if name == cold else BROWSE_TARGETS[name.split("?")[0]],
            higher_is_better=False,
            digits=2,
            note=f"{len(hub_ms[name])} requests, p90 "
            f"{harness.LatencyResult(hub_ms[name]).p90_ms:.2f} ms",
        )
        failed |= "NOT MET" in text
    return failed


def git_log_items(output: bytes) -> list[dict]:
    """The API's commit items from `git log -z --format=LOG_FORMAT` output, field by field."""
    fields = output.split(b"\0")

    def person(name: bytes, email: bytes, seconds: bytes) -> dict:
        when = datetime.fromtimestamp(int(seconds), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return {"name": name.decode(), "email": email.decode(), "date": when}

    items = []
    for i in range(0, len(fields) - 1, 9):
        oid, parents, an, ae, at, cn, ce, ct, message = fields[i : i + 9]
        items.append(
            {
                "oid": oid.decode(),
                "message": message.decode(),
                "author": person(an, ae, at),
                "committer": person(cn, ce, ct),
                "parents": parents.decode().split(),
                "timestamp": int(at) * 1000,
            }
        )
    return items


def check_same_work(cases: dict, env: dict[str, str], page: dict) -> None:
    """Make sure each pair answers the same question before timing it."""
    (c_url, c_cmd), (t_url, t_cmd), (f_url, f_cmd), (o_url, o_cmd), (d_url, d_cmd) = cases.values()
    if git_log_items(run(c_cmd, env))[:LIMIT] != page["commits"]:
        raise RuntimeError("hubsvc's commits page differs from git log's")
    one = harness.expect(*harness.request_json(o_url), 200)
    if one["commits"] != git_log_items(run(o_cmd, env)):
        raise RuntimeError("hubsvc's commit differs from git show's")
    tree = harness.expect(*harness.request_json(t_url), 200)
    if len(tree["files"]) != len(run(t_cmd, env).splitlines()):
        raise RuntimeError("hubsvc's tree differs from git ls-tree's")
    blob = harness.expect(*harness.request_json(f_url), 200)["file"]
    if blob["content"].encode() != run(f_cmd, env):
        raise RuntimeError("hubsvc's file differs from git cat-file's")
    diff = harness.expect(*harness.request_json(d_url), 200)
    shown = run(d_cmd[:-1] + ["--name-only", "--format=", d_cmd[-1]], env).decode().split()
    if sorted(f["path"] for f in diff["files"]) != sorted(shown):
        raise RuntimeError(f"hubsvc's diff files {diff['files']} differ from git show's {shown}")


def bench_memory(
    args: argparse.Namespace,
    hub: harness.Server,
    url: str,
    tmp: Path,
    env: dict[str, str],
    pack_bytes: int,
    start_kib: int,
) -> bool:
    print(
        f"\n## 3. hubsvc memory during {args.rss_clones} clones in a row (VmRSS of the "
        f"server pid sampled every 10 ms; git children summed separately; run before "
        f"parts 1 and 2)",
        flush=True,
    )
    time.sleep(1.0)
    idle = harness.rss_kib(hub.pid)
    harness.report("hubsvc RSS after start and sign-up", harness.mib(start_kib), "MiB")
    harness.report(
        "hubsvc idle RSS before the clones",
        harness.mib(idle),
        "MiB",
        note="after the push, before any clone",
    )
    growths = []
    received = 0
    for n in range(args.rss_clones):
        with RssSampler(hub.pid) as sampler:
            elapsed, received = clone_seconds(url, tmp, env)
        growths.append(sampler.peak_kib - idle)
        harness.report(
            f"hubsvc peak RSS during clone {n + 1}",
            harness.mib(sampler.peak_kib),
            "MiB",
            harness.mib(idle),
            "idle",
            note=f"+{harness.mib(sampler.peak_kib - idle):.2f} MiB; clone "
            f"{elapsed * 1000:.0f} ms; {sampler.samples} samples; git children "
            f"peak {harness.mib(sampler.children_peak_kib):.1f} MiB",
        )
    after = harness.rss_kib(hub.pid)
    harness.report(
        "hubsvc RSS after the clones", harness.mib(after), "MiB", harness.mib(idle), "idle"
    )
    harness.report(
        "pack size",
        harness.mib(pack_bytes / 1024),
        "MiB",
        digits=2,
        note=f"on disk in hubsvc's repository; each clone received "
        f"{harness.mib(received / 1024):.2f} MiB",
    )
    worst = max(growths)
    text = harness.report(
        "hubsvc peak RSS growth during a clone",
        harness.mib(worst),
        "MiB",
        harness.mib(received / 1024),
        "pack received",
        target=STREAM_TARGET,
        higher_is_better=False,
        digits=2,
        note="streaming keeps this flat as packs grow; buffering is ≥ 1",
    )
    return "NOT MET" in text


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] in ("_serve-bridge", "_serve-lighttpd"):
        # Internal: the baseline server process, started by backend_server() as
        # `bench_git.py _serve-… ROOT FOLDER --port P` (harness.Server appends --port).
        sub, root, folder = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
        port = int(sys.argv[sys.argv.index("--port") + 1])
        if sub == "_serve-bridge":
            serve_bridge(root, port)
        else:
            serve_lighttpd(root, port, folder)
        sys.exit(0)
    sys.exit(main())
