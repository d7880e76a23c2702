"""hubsvc's CPU with N WebSocket clients connected: idle, then per event, by thread.

    HUBSVC_SSH_PORT=0 python benchmarks/ws_idle.py /work/shared/tools/perf --clients 10000 \
        [--hub-config 'heartbeat_seconds = 3600'] [--seconds 15] [--events 15] [--py-spy F | --perf F]

Uses tools/perf's own pieces (hubsvc_proc.py to start `run.py` with the tool's config plus
`[ssh] port = 0`, ws_clients.py for the clients, from its venv), so the sockets are the
tool's. After the clients connect: user and system ms a second of each thread over
--seconds with nothing happening (heartbeats, sweeps, the lease), then ms per event over
--events issues created 1 s apart (the fan-out, the POST, and 1 s of the idle cost). Not
a comparison with any baseline: an attribution of where hubsvc's time goes.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time


def _threads(pid: int) -> dict[str, tuple[float, float]]:
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, tuple[float, float]] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/stat") as f:
            head, rest = f.read().rsplit(")", 1)
        name = "(main)" if tid == str(pid) else head.split("(", 1)[1]
        fields = rest.split()
        u, s = out.get(name, (0.0, 0.0))
        out[name] = (u + int(fields[11]) / tick, s + int(fields[12]) / tick)
    return out


def _report(what: str, a: dict, b: dict, per: float) -> None:
    for name in sorted(b):
        u = (b[name][0] - a.get(name, (0.0, 0.0))[0]) * 1000 / per
        s = (b[name][1] - a.get(name, (0.0, 0.0))[1]) * 1000 / per
        if u or s:
            print(f"{what}: thread {name}: user {u:.1f} + system {s:.1f} ms")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("tools")
    ap.add_argument("--clients", type=int, default=10000)
    ap.add_argument("--hub-config", default="")
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--events", type=int, default=15)
    ap.add_argument("--py-spy", metavar="FILE", help="py-spy (raw, --native) over the events")
    ap.add_argument("--perf", metavar="FILE", help="perf record -e cpu-clock -g over the events")
    a = ap.parse_args()
    sys.path.insert(0, a.tools)
    import hubsvc_proc as hp  # the tool's module, from its folder

    config = (
        "[ssh]\nport = 0\n\n[rate_limit]\nenabled = false\n\n"
        f"[websocket]\nmax_per_ip = 20000\n{a.hub_config}\n"
    )
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    perf_py = os.path.join(hp.TMP, "hubsvc-perf-venv", "bin", "python")
    hp.raise_nofile()
    with hp.Cleanup() as cl:
        work = cl.mkdtemp("ws-idle-")
        hub, port, _ = hp.start_hubsvc(cl, sys.executable, here, work, config)
        api = hp.Api(port)
        owner = hp.sign_up(api)
        api.request("POST", "/api/repositories", {"name": "perf", "visibility": "public"})
        url = f"ws://127.0.0.1:{port}/ws?token={api.token}"
        argv = [perf_py, os.path.join(a.tools, "ws_clients.py"), url, owner, "perf"]
        clients = cl.add(
            hp.Proc(
                "clients",
                [*argv, str(a.clients)],
                os.path.join(work, "clients.log"),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
            )
        )
        print(clients.p.stdout.readline().decode().strip(), flush=True)
        time.sleep(3)
        before, t0 = _threads(hub.pid), time.monotonic()
        time.sleep(a.seconds)
        _report("idle, a second", before, _threads(hub.pid), time.monotonic() - t0)
        spy = None
        if a.py_spy:
            py_spy = os.path.join(os.path.dirname(sys.executable), "py-spy")
            argv = [py_spy, "record", "-p", str(hub.pid), "-r", "200", "-f", "raw", "--native"]
            spy = subprocess.Popen([*argv, "-o", a.py_spy], stdout=subprocess.DEVNULL)
            time.sleep(1)
        elif a.perf:
            argv = ["perf", "record", "-e", "cpu-clock", "-F", "2999", "-g", "-p", str(hub.pid)]
            spy = subprocess.Popen([*argv, "-o", a.perf], stdout=subprocess.DEVNULL)
            time.sleep(1)
        before = _threads(hub.pid)
        for i in range(a.events):
            path = f"/api/repositories/{owner}/perf/issues"
            api.request("POST", path, {"title": f"ws-idle-{i}", "body": "probe"})
            time.sleep(1.0)
        _report("an event, 1 s apart", before, _threads(hub.pid), a.events)
        if spy is not None:
            spy.send_signal(signal.SIGINT)  # both write their file on SIGINT
            spy.wait(60)
        clients.p.stdin.write(b"quit\n")
        clients.p.stdin.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
