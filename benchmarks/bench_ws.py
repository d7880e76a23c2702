"""WebSocket fan-out benchmark: 1,000 subscribed clients, delivery latency and RSS per socket.

    python benchmarks/bench_ws.py [--clients 1000 --events 50 --rounds 5 --gap 0.05
                                   --users 4 --baseline on --compress --pin]

Starts hubsvc (`run.py`, rate limit off, bcrypt cost 4, `[websocket] max_per_ip` raised
to clients + 100) and, unless `--baseline off`, a bare aiohttp broadcaster (this file run
as `bench_ws.py _baseline --port P`), each as its own process. This process is the
client side: one asyncio loop holding `--clients` sockets to each server
(`aiohttp.ClientSession.ws_connect`), every one subscribed to the same repository with
`{"type": "subscribe", "repository": {owner, name}}`, the tokens of `--users` ordinary
accounts shared round-robin (none of them owns the repository, so the hub reaches them
through the subscription, not as watchers).

Seeding through the API: sign-up of the owner `wsowner` and `--users` others,
`POST /api/repositories {name: live}` (public). Then, per server, a warm-up (a few
clients, a few events, closed again), VmRSS "before", the clients connect and subscribe,
VmRSS "after"; (after − before) ÷ clients is the RSS one connected client costs. It is
taken again after the events (a socket's deflate compressor, say, is only made for its
first message), and the target is checked against the larger of the two.

Events (made and timed by a process of their own, `bench_ws.py _poster`, so that a
saturated client loop cannot delay t0): the owner opens an issue with
`POST /api/repositories/wsowner/live/issues {title: "ws-bench <n>"}`; hubsvc publishes an `issue` notification to every subscriber.
The baseline gets `POST /publish` whose body is the same notification text (a copy of
one hubsvc sent, with the title swapped), answers 202, then sends that one
pre-serialized string to every subscribed socket in a plain `for ws in sockets: await
ws.send_str(text)` loop, timing the loop. Per event, on the machine's clock
(time.perf_counter, CLOCK_MONOTONIC, the same in every process):

    t0      = the POST's answer has been read by the poster, less the time the server
              says it waited for its fan-out (`Server-Timing: fanout;dur=`, hubsvc only):
              about when the event committed
    t_last  = the last of the clients has read the notification (matched by its title)
    latency = t_last - t0       (also the median client's and the first client's)

`--events` events per server, one after another with `--gap` seconds after each one is
complete, in `--rounds` interleaved rounds (hubsvc and the baseline alternate which goes
first). p50/p99 are over all events (with 50 events p99 is the slowest one). Each
server's CPU time (utime + stime from /proc/<pid>/stat) over the events ÷ events is
printed too: it is steadier than the latencies on a shared machine.

The clients do not offer permessage-deflate (aiohttp's client default, and what the
reference figures were taken with); `--compress` makes them offer it, as browsers do,
and both servers accept it.

File descriptors: this process needs about 2 × clients, each server about clients. The
soft RLIMIT_NOFILE of this process is raised with resource.setrlimit (up to the hard
limit; the hard limit too when running as root) before the servers start, and the
servers, started with subprocess, inherit it; the output shows each process's limit as
read from /proc/<pid>/limits.

Writers (`--writers N`, issue 14's "while 50 clients create issues in a busy
repository"): during each server's measured events, N more accounts create issues (or
publish, on the baseline) one after another, each as soon as its last one was answered.
`--writers-repo busy` (default): in a private repository of their own, `wsowner/busy`,
where each writer is a collaborator and holds a socket of its own, so every write is an
event the hub must check access for and deliver, beside the measured repository.
`--writers-repo live`: in the measured repository itself, so every write is also sent
to all `--clients` sockets: a saturation test (N closed-loop writers offer as many
broadcasts as the server can make), whose latency is the length of the queue, for the
baseline as much as for hubsvc.

Targets (issue 25 item 1): server CPU per event ≤ 0.3 × the bare hub's; last-client
latency p99 ≤ the bare hub's (≤ 100 ms with `--baseline off`); RSS per connected client
≤ 16 KiB. Exit code 0 when all are met, 1 when one is not.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gc
import http.client
import json
import os
import re
import resource
import shlex
import sys
import time
import urllib.parse
import uuid
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import harness
from aiohttp import WSMsgType, web

OWNER = "wsowner"
REPO = "live"
LATENCY_TARGET_MS = 100.0  # last-client p99, without a baseline to compare with
LATENCY_TARGET_RATIO = 1.0  # last-client p99 ÷ the bare hub's (issue 25 item 1)
CPU_TARGET_RATIO = 0.3  # server CPU per notification ÷ the bare hub's (issue 25 item 1)
RSS_TARGET_KIB = 16.0
WARMUP_CLIENTS = 20
WARMUP_EVENTS = 3
EVENT_TIMEOUT = 15.0  # seconds to wait for every client to have one notification
CLK_TCK = os.sysconf("SC_CLK_TCK")


# --- the bare aiohttp baseline (run as its own process) ------------------------------


def baseline_server(argv: list[str]) -> int:
    """`bench_ws.py _baseline --port P`: the bare broadcaster, the denominator.

    GET /health; GET /ws (sends {"type": "connected"}, answers subscribe with subscribed,
    and only subscribed sockets get broadcasts); POST /publish[?channel=NAME] (answers
    202 first, then sends the body, as is, to every socket subscribed to repository NAME,
    default `live`, in one loop and records how long the loop took for `live`); GET /stats → {"loops_ms": [...]}. No access log, no heartbeat.
    """
    parser = argparse.ArgumentParser(prog="bench_ws.py _baseline")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    # Sockets by the repository name they subscribed to: /publish?channel= picks one.
    subscribed: defaultdict[str, set[web.WebSocketResponse]] = defaultdict(set)
    loops_ms: list[float] = []
    routes = web.RouteTableDef()

    @routes.get("/health")
    async def health(request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    @routes.get("/ws")
    async def ws_handler(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(max_msg_size=64 * 1024)
        await ws.prepare(request)
        await ws.send_str(json.dumps({"type": "connected", "userId": "0", "username": "baseline"}))
        channels: set[str] = set()
        try:
            async for msg in ws:
                if msg.type != WSMsgType.TEXT:
                    continue
                message = json.loads(msg.data)
                if message.get("type") == "subscribe":
                    channel = (message.get("repository") or {}).get("name", "")
                    channels.add(channel)
                    subscribed[channel].add(ws)
                    await ws.send_str(
                        json.dumps({"type": "subscribed", "repository": message.get("repository")})
                    )
        finally:
            for channel in channels:
                subscribed[channel].discard(ws)
        return ws

    @routes.post("/publish")
    async def publish(request: web.Request) -> web.StreamResponse:
        text = await request.text()
        channel = request.query.get("channel", REPO)
        resp = web.Response(status=202)
        await resp.prepare(request)
        await resp.write_eof()  # the answer is on the wire before the first send
        start = time.perf_counter()
        for ws in list(subscribed[channel]):
            try:
                await ws.send_str(text)
            except (ConnectionResetError, RuntimeError):
                pass
        if channel != REPO:
            return resp  # a --writers message: not one of the timed loops
        loops_ms.append((time.perf_counter() - start) * 1000)
        return resp

    @routes.get("/stats")
    async def stats(request: web.Request) -> web.Response:
        return web.json_response({"loops_ms": loops_ms, "subscribed": len(subscribed[REPO])})

    app = web.Application()
    app.router.add_routes(routes)
    web.run_app(
        app, host=args.host, port=args.port, print=None, access_log=None, shutdown_timeout=5
    )
    return 0


# --- the poster (run as its own process) ---------------------------------------------

FANOUT_TIMING = re.compile(r"fanout;dur=([0-9.]+)")


def poster_main() -> int:
    """`bench_ws.py _poster`: make each POST read from stdin, print when it went and came back.

    One JSON object per line in, {url, body, headers}; one per line out, {status, sent,
    answered, waited, body}: perf_counter() (CLOCK_MONOTONIC, the same clock in every
    process of the machine) before the request and once the whole answer was read, and
    the seconds the server said the answer waited for its fan-out (Server-Timing:
    fanout;dur=). A fresh connection per POST: the connect is before `answered`, which
    is all that t0 depends on.
    """
    for line in sys.stdin:
        req = json.loads(line)
        parts = urllib.parse.urlsplit(req["url"])
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        sent = time.perf_counter()
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        try:
            conn.request("POST", target, body=req["body"].encode(), headers=req["headers"])
            resp = conn.getresponse()
            data = resp.read()
            answered = time.perf_counter()
        finally:
            conn.close()
        found = FANOUT_TIMING.search(resp.getheader("Server-Timing") or "")
        print(
            json.dumps(
                {
                    "status": resp.status,
                    "sent": sent,
                    "answered": answered,
                    "waited": float(found.group(1)) / 1000 if found else 0.0,
                    "body": data[:300].decode("utf-8", "replace"),
                }
            ),
            flush=True,
        )
    return 0


class Poster:
    """The measured POSTs, made and timed by a process of their own (see Target.event)."""

    def __init__(self) -> None:
        self.proc: asyncio.subprocess.Process | None = None
        self.lock = asyncio.Lock()

    async def start(self) -> None:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            os.path.abspath(__file__),
            "_poster",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )

    async def post(
        self, url: str, body: str, headers: dict[str, str], wanted: int
    ) -> tuple[float, float, float]:
        """(sent, answered, waited) of one POST; raises unless it answered `wanted`."""
        assert self.proc is not None and self.proc.stdin and self.proc.stdout
        async with self.lock:
            self.proc.stdin.write(
                json.dumps({"url": url, "body": body, "headers": headers}).encode() + b"\n"
            )
            await self.proc.stdin.drain()
            line = await self.proc.stdout.readline()
        if not line:
            raise RuntimeError("the poster process ended")
        got = json.loads(line)
        if got["status"] != wanted:
            raise RuntimeError(f"POST {url} answered {got['status']}: {got['body']!r}")
        return got["sent"], got["answered"], got["waited"]

    async def stop(self) -> None:
        if self.proc is not None and self.proc.stdin:
            self.proc.stdin.close()
            await self.proc.wait()


# --- helpers -------------------------------------------------------------------------


def pct(values: list[float], p: float) -> float:
    """The p-th percentile, the way harness.LatencyResult takes it (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def nofile_limits(pid: int | str = "self") -> tuple[str, str]:
    """(soft, hard) 'Max open files' of a process, from /proc/<pid>/limits."""
    with open(f"/proc/{pid}/limits") as fh:
        for line in fh:
            if line.startswith("Max open files"):
                soft, hard = line.split()[3:5]
                return soft, hard
    return "?", "?"


def raise_nofile(needed: int) -> bool:
    """Raise this process's soft RLIMIT_NOFILE to at least `needed` (children inherit it).

    False when the hard limit is lower and cannot be raised (only with CAP_SYS_RESOURCE).
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= needed:
        return True
    if hard == resource.RLIM_INFINITY or hard >= needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
        return True
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, needed))
    except (ValueError, OSError):
        return False
    return True


def loadavg() -> str:
    """The 1/5/15-minute load averages: a busy machine shows in the spread."""
    with open("/proc/loadavg") as fh:
        return " ".join(fh.read().split()[:3])


def cpu_times(pid: int) -> tuple[float, float]:
    """(utime, stime) of a process in seconds, from /proc/<pid>/stat."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


TITLE_MARK = '"title": "ws-bench '


def title_of(text: str) -> str | None:
    """The issue title of a notification, else None; json.loads only when the fast path fails.

    Both servers write json.dumps' default separators, so the title is found by a
    substring search, which keeps this process's cost per message (it delays the later
    receipts) low; other spellings fall back to parsing.
    """
    at = text.find(TITLE_MARK)
    if at >= 0 and text.startswith('{"type": "notification"'):
        start = at + len('"title": "')
        return text[start : text.index('"', start)]
    message = json.loads(text)
    if message.get("type") != "notification":
        return None
    return message["notification"]["data"]["issue"]["title"]


# --- the clients ---------------------------------------------------------------------

BUSY = "busy "  # titles of the --writers' issues: delivered, not timed


class Fleet:
    """`n` WebSocket clients of one server, recording when each notification arrived.

    A notification is matched by `notification.data.issue.title`; arrivals[title] is
    the list of perf_counter() times, one per client that read it.
    """

    def __init__(
        self, name: str, ws_url: str, tokens: list[str], compress: int = 0, repo: str = REPO
    ) -> None:
        self.name = name
        self.repo = repo
        self.compress = compress
        self.ws_url = ws_url
        self.tokens = tokens
        self.sockets: list[aiohttp.ClientWebSocketResponse] = []
        self.readers: list[asyncio.Task] = []
        self.arrivals: dict[str, list[float]] = defaultdict(list)
        self.waiting: dict[str, tuple[int, asyncio.Future]] = {}
        self.closed_early = 0
        self.closing: set[aiohttp.ClientWebSocketResponse] = set()
        self.sample_text = ""  # one notification as the server sent it
        self.session: aiohttp.ClientSession | None = None

    async def open(self) -> None:
        # limit=0: the default connector limit (100) would queue the 101st ws_connect.
        self.session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))

    async def connect(self, n: int, concurrency: int = 50) -> float:
        """Connect and subscribe n more clients; returns the seconds it took."""
        gate = asyncio.Semaphore(concurrency)
        start = time.perf_counter()
        first = len(self.sockets)

        async def one(i: int) -> None:
            async with gate:
                token = self.tokens[i % len(self.tokens)]
                ws = await self.session.ws_connect(
                    f"{self.ws_url}?token={token}",
                    autoping=True,
                    max_msg_size=1 << 20,
                    compress=self.compress,
                )
                hello = await ws.receive_json(timeout=30)
                if hello.get("type") != "connected":
                    raise RuntimeError(f"{self.name}: first message {hello}")
                await ws.send_json(
                    {"type": "subscribe", "repository": {"owner": OWNER, "name": self.repo}}
                )
                while True:
                    reply = await ws.receive_json(timeout=30)
                    if reply.get("type") == "subscribed":
                        break
                    if reply.get("type") == "error":
                        raise RuntimeError(f"{self.name}: subscribe failed: {reply}")
                self.sockets.append(ws)
                self.readers.append(asyncio.create_task(self._read(ws)))

        await asyncio.gather(*(one(i) for i in range(first, first + n)))
        return time.perf_counter() - start

    async def _read(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        async for msg in ws:
            now = time.perf_counter()
            if msg.type != WSMsgType.TEXT:
                continue
            title = title_of(msg.data)
            if title is None or title.startswith(BUSY):
                continue  # hubsvc's {"type": "ping"}, or a --writers issue
            if not self.sample_text:
                self.sample_text = msg.data
            times = self.arrivals[title]
            times.append(now)
            wanted = self.waiting.get(title)
            if wanted is not None and len(times) >= wanted[0] and not wanted[1].done():
                wanted[1].set_result(None)
        if ws not in self.closing:
            self.closed_early += 1  # the server closed it (e.g. "too slow"), not us

    def expect(self, title: str) -> asyncio.Future:
        """A future done once every connected client has read the notification `title`."""
        fut = asyncio.get_running_loop().create_future()
        self.waiting[title] = (len(self.sockets), fut)
        if len(self.arrivals.get(title, ())) >= len(self.sockets):
            fut.set_result(None)
        return fut

    async def close_all(self, keep: int = 0) -> None:
        """Close every socket but the first `keep` (close frames, in batches)."""
        doomed, self.sockets = self.sockets[keep:], self.sockets[:keep]
        readers, self.readers = self.readers[keep:], self.readers[:keep]
        self.closing.update(doomed)
        for i in range(0, len(doomed), 100):
            await asyncio.gather(
                *(ws.close() for ws in doomed[i : i + 100]), return_exceptions=True
            )
        await asyncio.gather(*readers, return_exceptions=True)
        self.closing.clear()

    async def shutdown(self) -> None:
        await self.close_all()
        if self.session is not None:
            await self.session.close()


class Target:
    """One server under test: how to publish an event to it, its fleet and its figures."""

    def __init__(
        self,
        label: str,
        server: harness.Server,
        fleet: Fleet,
        post: Callable[[str], Awaitable[tuple[float, float, float]]],
    ) -> None:
        self.label = label
        self.server = server
        self.fleet = fleet
        self.post = post
        self.seq = 0
        self.rss: dict[str, int] = {}
        self.connect_s = 0.0
        self.last_ms: list[float] = []
        self.median_ms: list[float] = []
        self.first_ms: list[float] = []
        self.post_ms: list[float] = []
        self.waited_ms: list[float] = []
        self.rounds: list[tuple[float, float]] = []
        self.server_cpu_s = 0.0
        self.server_sys_s = 0.0  # the kernel's part of server_cpu_s (the sends' syscalls)
        self.client_cpu_s = 0.0
        self.events_done = 0
        # --writers: write(i, title) makes writer i's event; their own sockets, if any.
        self.write: Callable[[int, str], Awaitable[None]] | None = None
        self.writer_fleet: Fleet | None = None

    async def event(self, record: bool = True) -> None:
        """Publish one event and wait until every client has it; record its latencies."""
        self.seq += 1
        title = f"ws-bench {self.label} {self.seq}"
        done = self.fleet.expect(title)
        sent, answered, waited = await self.post(title)
        # The event committed before its answer waited for the fan-out (Server-Timing).
        t0 = answered - waited
        try:
            await asyncio.wait_for(done, EVENT_TIMEOUT)
        except TimeoutError:
            got = len(self.fleet.arrivals.get(title, ()))
            raise RuntimeError(
                f"{self.label}: only {got} of {len(self.fleet.sockets)} clients "
                f"had event {title!r} after {EVENT_TIMEOUT:g} s"
            ) from None
        times = self.fleet.arrivals.pop(title)
        self.fleet.waiting.pop(title, None)
        if record:
            self.post_ms.append((answered - sent) * 1000)
            self.waited_ms.append(waited * 1000)
            self.last_ms.append((max(times) - t0) * 1000)
            self.median_ms.append((sorted(times)[len(times) // 2] - t0) * 1000)
            self.first_ms.append((min(times) - t0) * 1000)

    async def events(self, n: int, gap: float, busy: Callable[[], Any] | None = None) -> None:
        start = len(self.last_ms)
        background = busy() if busy is not None else None
        (user, system), cpu_client = cpu_times(self.server.pid), time.process_time()
        try:
            for _ in range(n):
                await self.event()
                await asyncio.sleep(gap)
        finally:
            if background is not None:
                await background()
        user_end, system_end = cpu_times(self.server.pid)
        self.server_cpu_s += user_end - user + system_end - system
        self.server_sys_s += system_end - system
        self.client_cpu_s += time.process_time() - cpu_client
        self.events_done += n
        mine = self.last_ms[start:]
        self.rounds.append((pct(mine, 50), max(mine)))


# --- the run -------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--clients", type=int, default=1000, help="WebSocket clients per server (default 1000)"
    )
    parser.add_argument(
        "--events", type=int, default=50, help="measured events per server (default 50)"
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=5,
        help="interleaved rounds the events are split into (default 5)",
    )
    parser.add_argument(
        "--gap",
        type=float,
        default=0.05,
        help="seconds between one event being complete and the next POST",
    )
    parser.add_argument(
        "--users", type=int, default=4, help="accounts whose tokens the clients share (default 4)"
    )
    parser.add_argument(
        "--baseline",
        choices=("on", "off"),
        default="on",
        help="also run the bare aiohttp broadcaster (default on)",
    )
    parser.add_argument(
        "--compress",
        action="store_true",
        help="offer permessage-deflate like browsers do (both servers accept "
        "it); off by default, like aiohttp's client",
    )
    parser.add_argument(
        "--pin",
        action="store_true",
        help="servers on CPU 0 (taskset), this client process on CPU 1",
    )
    parser.add_argument(
        "--writers",
        type=int,
        default=0,
        help="clients creating issues one after another each while a "
        "server's events are measured (issue 14: 50)",
    )
    parser.add_argument(
        "--writers-repo",
        default="busy",
        help="where the writers create issues: `busy` (default), a private "
        "repository of their own that the writers watch with a socket "
        "each; `live`, the measured clients' repository, so that every "
        "write is also sent to all of them",
    )
    args = parser.parse_args(argv)
    if args.clients < 1 or args.events < 1 or args.users < 1:
        parser.error("--clients, --events and --users must be positive")
    args.rounds = max(1, min(args.rounds, args.events))
    return args


def seed(url: str, users: int, writers: int, writers_repo: str) -> tuple[str, list[str], list[str]]:
    """The owner's token (with its public repository), `users` tokens, `writers` tokens.

    With writers in their own repository, that one is private and every writer is a
    collaborator: its events reach the writers' own sockets after a read-access check,
    and none of the measured clients.
    """
    owner = harness.sign_up(url, OWNER)
    harness.expect(
        *harness.request_json(
            url + "/api/repositories", "POST", {"name": REPO}, harness.bearer(owner)
        ),
        201,
    )
    tokens = [harness.sign_up(url, f"wsuser{i}") for i in range(users)]
    writer_tokens = [harness.sign_up(url, f"wswriter{i}") for i in range(writers)]
    if writers and writers_repo != REPO:
        harness.expect(
            *harness.request_json(
                url + "/api/repositories",
                "POST",
                {"name": writers_repo, "visibility": "private"},
                harness.bearer(owner),
            ),
            201,
        )
        for i in range(writers):
            harness.expect(
                *harness.request_json(
                    f"{url}/api/repositories/{OWNER}/{writers_repo}/collaborators/wswriter{i}",
                    "PUT",
                    {"permission": "write"},
                    harness.bearer(owner),
                ),
                200,
                201,
                204,
            )
    return owner, tokens, writer_tokens


def show_rss(target: Target) -> None:
    for key, kib in target.rss.items():
        print(f"# {target.label} RSS {key}: {harness.mib(kib):.1f} MiB", flush=True)


async def run(args: argparse.Namespace, hub: harness.Server, base: harness.Server | None) -> int:
    owner, tokens, writer_tokens = seed(hub.url, args.users, args.writers, args.writers_repo)
    ws_hub = hub.url.replace("http://", "ws://") + "/ws"
    post_session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))

    async def post_hub(title: str, repo: str = REPO, token: str = owner) -> None:
        async with post_session.post(
            f"{hub.url}/api/repositories/{OWNER}/{repo}/issues",
            json={"title": title},
            headers=harness.bearer(token),
        ) as resp:
            body = await resp.read()
            if resp.status != 201:
                raise RuntimeError(f"POST issues answered {resp.status}: {body[:300]!r}")

    poster = Poster()
    await poster.start()

    async def measured_hub(title: str) -> tuple[float, float, float]:
        return await poster.post(
            f"{hub.url}/api/repositories/{OWNER}/{REPO}/issues",
            json.dumps({"title": title}),
            {**harness.bearer(owner), "Content-Type": "application/json"},
            201,
        )

    writes: defaultdict[str, int] = defaultdict(int)

    def busy(target: Target) -> Callable[[], Awaitable[None]] | None:
        """Start --writers issue creators; returns the coroutine function that stops them."""
        if not args.writers:
            return None
        stop = asyncio.Event()

        async def writer(i: int) -> None:
            n = 0
            while not stop.is_set():
                n += 1
                await target.write(i, f"{BUSY}{i} {n}")
                writes[target.label] += 1

        tasks = [asyncio.create_task(writer(i)) for i in range(args.writers)]

        async def end() -> None:
            stop.set()
            await asyncio.gather(*tasks)

        return end

    targets: list[Target] = []
    compress = 15 if args.compress else 0
    hub_target = Target("hubsvc", hub, Fleet("hubsvc", ws_hub, tokens, compress), measured_hub)
    hub_target.write = lambda i, title: post_hub(title, args.writers_repo, writer_tokens[i])
    targets.append(hub_target)
    template: dict[str, Any] = {}

    if base is not None:

        def copy(title: str) -> str:
            message = json.loads(json.dumps(template))
            message["notification"]["id"] = uuid.uuid4().hex
            message["notification"]["data"]["issue"]["title"] = title
            return json.dumps(message)

        async def measured_base(title: str) -> tuple[float, float, float]:
            return await poster.post(
                base.url + "/publish", copy(title), {"Content-Type": "application/json"}, 202
            )

        async def post_base(title: str, channel: str = REPO) -> None:
            async with post_session.post(
                base.url + "/publish",
                params={"channel": channel},
                data=copy(title),
                headers={"Content-Type": "application/json"},
            ) as resp:
                body = await resp.read()
                if resp.status != 202:
                    raise RuntimeError(f"POST /publish answered {resp.status}: {body[:300]!r}")

        ws_base = base.url.replace("http://", "ws://") + "/ws"
        base_fleet = Fleet("bare aiohttp", ws_base, ["-"], compress)
        base_target = Target("bare aiohttp", base, base_fleet, measured_base)
        base_target.write = lambda i, title: post_base(title, args.writers_repo)
        targets.append(base_target)
    if args.writers and args.writers_repo != REPO:
        # The writers watch their own repository: its events have an audience too.
        hub_target.writer_fleet = Fleet(
            "hubsvc writers", ws_hub, writer_tokens, compress, repo=args.writers_repo
        )
        if base is not None:
            base_target.writer_fleet = Fleet(
                "bare aiohttp writers", ws_base, ["-"], compress, repo=args.writers_repo
            )

    try:
        for target in targets:  # hubsvc first: the baseline copies its notification
            fleet = target.fleet
            await fleet.open()
            target.rss["at start"] = harness.rss_kib(target.server.pid)
            # Warm-up: the first socket, subscribe and event load code and fill caches
            # that are not a per-client cost; then "before" is read with none connected.
            await fleet.connect(WARMUP_CLIENTS)
            for _ in range(WARMUP_EVENTS):
                await target.event(record=False)
            if target is hub_target:
                template.update(json.loads(fleet.sample_text))
            await fleet.close_all()
            await asyncio.sleep(0.5)
            target.rss["before clients"] = harness.rss_kib(target.server.pid)
            target.connect_s = await fleet.connect(args.clients)
            await asyncio.sleep(1.0)
            target.rss["after clients"] = harness.rss_kib(target.server.pid)
            deflate = sum(1 for ws in fleet.sockets if ws.compress)
            print(
                f"# {target.label}: {args.clients} clients connected and subscribed in "
                f"{target.connect_s:.1f} s; server open files: "
                f"{len(os.listdir(f'/proc/{target.server.pid}/fd'))}; permessage-deflate "
                f"on {deflate}",
                flush=True,
            )
            if args.one_at_a_time:
                await fleet.close_all()  # reconnected for each of its rounds
            if target.writer_fleet is not None:
                # After "after clients": the writers' sockets are not in the per-client
                # figure when connected, and only add to the after-the-events one.
                await target.writer_fleet.open()
                await target.writer_fleet.connect(args.writers)
        print(
            f"# notification size: {len(hub_target.fleet.sample_text)} bytes "
            f"(the baseline broadcasts a copy of it)",
            flush=True,
        )

        # This process only measures; a full collection in the middle of a fan-out would
        # delay the receipts, so the connected state is frozen out of the collector.
        gc.collect()
        gc.freeze()

        per_round = [
            args.events // args.rounds + (1 if r < args.events % args.rounds else 0)
            for r in range(args.rounds)
        ]
        for r, n in enumerate(per_round):
            order = targets if r % 2 == 0 else targets[::-1]
            for target in order:
                if args.one_at_a_time:
                    took = await target.fleet.connect(args.clients)
                    gc.collect()
                    gc.freeze()
                    print(f"# {target.label}: clients reconnected in {took:.1f} s", flush=True)
                await target.events(n, args.gap, functools.partial(busy, target))
                # Each round's end overwrites it: the figure is after the last round.
                target.rss["after events"] = harness.rss_kib(target.server.pid)
                if args.one_at_a_time:
                    await target.fleet.close_all()
                    gc.unfreeze()
                    gc.collect()
                p50, worst = target.rounds[-1]
                print(
                    f"# round {r + 1} {target.label}: {n} events, last client p50 "
                    f"{p50:.1f} ms, max {worst:.1f} ms",
                    flush=True,
                )

        base_loops: list[float] = []
        if base is not None:
            async with post_session.get(base.url + "/stats") as resp:
                base_loops = (await resp.json())["loops_ms"][-args.events :]
    finally:
        for target in targets:
            await target.fleet.shutdown()
            if target.writer_fleet is not None:
                await target.writer_fleet.shutdown()
        await post_session.close()
        await poster.stop()

    # --- figures ---
    print(f"# load average at the end: {loadavg()}", flush=True)
    for target in targets:
        show_rss(target)
    if args.writers:
        where = (
            f"{OWNER}/{REPO}, sent to every measured client too"
            if args.writers_repo == REPO
            else f"{OWNER}/{args.writers_repo} (private, watched by the writers' "
            f"{args.writers} sockets)"
        )
        for target in targets:
            print(
                f"# {target.label}: {args.writers} writers made {writes[target.label]} "
                f"events in {where} while its events were measured",
                flush=True,
            )
    dropped = hub_target.fleet.closed_early
    print(f"# hubsvc sockets closed by the server during the run: {dropped}", flush=True)

    ok = True
    bname = "bare aiohttp"
    h = hub_target
    b = targets[1] if base is not None else None
    print(flush=True)
    if b is not None:
        print(
            f"bare aiohttp send loop ({args.clients} sockets): p50 "
            f"{pct(base_loops, 50):.1f} ms, p99 {pct(base_loops, 99):.1f} ms",
            flush=True,
        )
    harness.report(
        "hubsvc POST issues answer",
        pct(h.post_ms, 50),
        "ms",
        note=f"p99 {pct(h.post_ms, 99):.1f} ms, of which waiting for the fan-out "
        f"(Server-Timing) p50 {pct(h.waited_ms, 50):.1f} ms, p99 "
        f"{pct(h.waited_ms, 99):.1f} ms; not part of the latency",
    )
    first = f"first client p50 {pct(h.first_ms, 50):.1f} ms"
    if b is not None:
        first += f", bare aiohttp {pct(b.first_ms, 50):.1f} ms"
    print(f"# {first} (from t0 to the first socket written and read)", flush=True)
    for target in targets:
        early = sum(1 for ms in target.first_ms if ms < 0)
        if early:
            # The server starts sending once the event commits, which may be before
            # its answer is on the wire: a receipt may come before t0.
            print(
                f"# {target.label}: in {early} of {len(target.first_ms)} events the first "
                f"client read the notification before t0 (by {-min(target.first_ms):.1f} "
                f"ms at most)",
                flush=True,
            )
    p99 = pct(h.last_ms, 99)
    for who, attr in (("median-client", "median_ms"), ("last-client", "last_ms")):
        for p in (50, 99):
            name = f"{who} latency p{p}"
            theirs = pct(getattr(b, attr), p) if b is not None else None
            if b is not None:
                harness.report(f"bare aiohttp {name}", theirs, "ms")
            note = ""
            if attr == "last_ms" and p == 99 and theirs is not None:
                met = p99 <= LATENCY_TARGET_RATIO * theirs
                ok &= met
                note = f"target ratio ≤ {LATENCY_TARGET_RATIO:g}: {'met' if met else 'NOT MET'}"
            elif attr == "last_ms" and p == 99:
                met = p99 <= LATENCY_TARGET_MS
                ok &= met
                note = f"target ≤ {LATENCY_TARGET_MS:g} ms: {'met' if met else 'NOT MET'}"
            harness.report(
                f"hubsvc {name}", pct(getattr(h, attr), p), "ms", theirs, bname, note=note
            )
    base_cpu = b.server_cpu_s / b.events_done * 1000 if b is not None else None
    for target in targets[::-1]:
        cpu = target.server_cpu_s / target.events_done * 1000
        system = target.server_sys_s / target.events_done * 1000
        note = f"user {cpu - system:.1f} + system {system:.1f} ms"
        if target is h and base_cpu is not None:
            met = cpu <= CPU_TARGET_RATIO * base_cpu
            ok &= met
            note += f"; target ratio ≤ {CPU_TARGET_RATIO:g}: {'met' if met else 'NOT MET'}"
        harness.report(
            f"{target.label} server CPU per event",
            cpu,
            "ms",
            base_cpu if target is h else None,
            bname,
            note=note,
        )
    # Who sets the last receipt: this one client process reads every socket's message,
    # one after another, while the server writes them; each CPU figure is the time that
    # process was busy per event, beside the last receipt's median.
    for target in targets[::-1]:
        last = pct(target.last_ms, 50)
        server = target.server_cpu_s / target.events_done * 1000
        client = target.client_cpu_s / target.events_done * 1000
        print(
            f"# {target.label} last receipt p50 {last:.1f} ms: server CPU per event "
            f"{server:.1f} ms ({server / last:.0%}), client process CPU per event "
            f"{client:.1f} ms ({client / last:.0%})",
            flush=True,
        )

    def per_client(t: Target, when: str) -> float:
        return (t.rss[when] - t.rss["before clients"]) / args.clients

    for target in targets[::-1]:
        harness.report(
            f"{target.label} RSS before clients", harness.mib(target.rss["before clients"]), "MiB"
        )
        harness.report(
            f"{target.label} RSS with {args.clients} clients",
            harness.mib(target.rss["after clients"]),
            "MiB",
            note=f"after the events {harness.mib(target.rss['after events']):.1f} MiB",
        )
    # Per client: once connected and subscribed, and once every socket has carried the
    # events (a compressor, say, is only made for the first message sent); the target
    # is checked against the larger.
    for when, label in (("after clients", "connected"), ("after events", "after the events")):
        cost = per_client(h, when)
        base_cost = per_client(b, when) if b is not None else None
        if b is not None:
            harness.report(f"bare aiohttp RSS per client ({label})", base_cost, "KiB")
        note = ""
        if when == "after events":
            worst = max(cost, per_client(h, "after clients"))
            met = worst <= RSS_TARGET_KIB
            ok &= met
            note = (
                f"target ≤ {RSS_TARGET_KIB:g} KiB (the larger of the two, {worst:.1f}): "
                f"{'met' if met else 'NOT MET'}"
            )
        harness.report(f"hubsvc RSS per client ({label})", cost, "KiB", base_cost, bname, note=note)
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_baseline"]:
        return baseline_server(argv[1:])
    if argv[:1] == ["_poster"]:
        return poster_main()
    args = parse_args(argv)
    print(f"# command: {shlex.join([sys.executable, *sys.argv])}", flush=True)
    print(
        f"# effective: --clients {args.clients} --events {args.events} --rounds "
        f"{args.rounds} --gap {args.gap:g} --users {args.users} --baseline {args.baseline}"
        f"{' --compress' if args.compress else ''}{' --pin' if args.pin else ''}"
        f"{f' --writers {args.writers} --writers-repo {args.writers_repo}' if args.writers else ''}",
        flush=True,
    )
    servers = 2 if args.baseline == "on" else 1
    # Both fleets held at once need 2 × clients files here; past the hard limit (which
    # only CAP_SYS_RESOURCE raises) each server's clients connect for its rounds only.
    args.one_at_a_time = not raise_nofile(servers * args.clients + 256)
    if args.one_at_a_time and not raise_nofile(args.clients + 256):
        raise SystemExit(
            f"bench_ws: need {args.clients + 256} open files but the hard limit is "
            f"{resource.getrlimit(resource.RLIMIT_NOFILE)[1]}; raise it (ulimit -Hn) "
            "or lower --clients"
        )
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    print(f"# load average at start: {loadavg()}", flush=True)
    print(
        f"# {os.cpu_count()} CPUs; RLIMIT_NOFILE of this client process: soft {soft}, "
        f"hard {hard} (the servers inherit it)",
        flush=True,
    )
    if args.one_at_a_time:
        print(
            f"# {servers} × {args.clients} sockets do not fit under the hard limit: each "
            "server's clients connect before its rounds and close after them",
            flush=True,
        )
    server_cpus = None
    if args.pin:
        server_cpus = "0"
        os.sched_setaffinity(0, {1})
    settings = {"websocket": {"max_per_ip": args.clients + 100}}
    with harness.Server(settings, cpus=server_cpus) as hub:
        print(
            f"# hubsvc pid {hub.pid}, open files limit {'/'.join(nofile_limits(hub.pid))}",
            flush=True,
        )
        if args.baseline == "on":
            base = harness.Server(
                command=[sys.executable, os.path.abspath(__file__), "_baseline"],
                cpus=server_cpus,
                name="bare-aiohttp",
            )
            with base:
                print(
                    f"# bare aiohttp pid {base.pid}, open files limit "
                    f"{'/'.join(nofile_limits(base.pid))}",
                    flush=True,
                )
                return asyncio.run(run(args, hub, base))
        return asyncio.run(run(args, hub, None))


if __name__ == "__main__":
    sys.exit(main())
