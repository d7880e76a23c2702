"""tools/perf/measure with its server CPU per event split into user and system time.

    HUBSVC_SSH_PORT=0 python benchmarks/ws_split.py /work/shared/tools/perf/measure \
        --only ws --clients 10000 --python $PWD/.venv/bin/python --hello-uvloop

Runs the tool unchanged, in this process, with its `cpu_seconds(pid)` (user + system from
/proc/PID/stat, read before the first timed event and after the last) also keeping the
two apart; after its table, one line per server: user and system ms per event, from the
same two readings the tool's own figure comes from.

To attribute, not to judge (both go before the tool's own options):
  --hub-config 'heartbeat_seconds = 3600'   a line added to the tool's [websocket] section
                                            of hubsvc's config (e.g. to take the heartbeat out)
  --py-spy FILE                             py-spy records hubsvc (raw, idle samples too,
                                            --native) from the tool's first CPU reading to
                                            its second: exactly the window it charges
  --perf FILE                               the same with `perf record -e cpu-clock -g`
                                            (CPU samples only: user and kernel apart)
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import signal
import subprocess
import sys


def _times(pid: int) -> tuple[float, float]:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def _threads(pid: int) -> dict[str, tuple[float, float]]:
    """User and system seconds of each thread, by name (threads of one name summed)."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, tuple[float, float]] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                head, rest = f.read().rsplit(")", 1)
        except OSError:
            continue
        name = head.split("(", 1)[1] if tid != str(pid) else "(main)"
        fields = rest.split()
        u, s = out.get(name, (0.0, 0.0))
        out[name] = (u + int(fields[11]) / tick, s + int(fields[12]) / tick)
    return out


def _option(args: list[str], name: str) -> str | None:
    if name in args:
        i = args.index(name)
        value = args[i + 1]
        del args[i : i + 2]
        return value
    return None


def main() -> int:
    args = sys.argv[1:]
    extra = _option(args, "--hub-config")
    spy_out = _option(args, "--py-spy")
    perf_out = _option(args, "--perf")
    path = args[0]
    sys.argv = [path] + args[1:]
    loader = importlib.machinery.SourceFileLoader("perf_measure", path)
    spec = importlib.util.spec_from_loader("perf_measure", loader)
    assert spec is not None
    measure = importlib.util.module_from_spec(spec)
    loader.exec_module(measure)
    if extra:
        assert "[websocket]\n" in measure.CONFIG
        measure.CONFIG = measure.CONFIG.replace("[websocket]\n", f"[websocket]\n{extra}\n")
    readings: list[tuple[int, float, float]] = []
    threads: dict[int, list[dict[str, tuple[float, float]]]] = {}
    plain = measure.cpu_seconds
    hub_pid: list[int] = []
    spy: list[subprocess.Popen[bytes]] = []

    def cpu_seconds(pid: int) -> float:
        if (spy_out or perf_out) and hub_pid and pid == hub_pid[0]:
            if not spy:  # the window opens
                if spy_out:
                    py_spy = os.path.join(os.path.dirname(sys.executable), "py-spy")
                    argv = [py_spy, "record", "-p", str(pid), "-r", "200", "-f", "raw", "--idle"]
                    argv += ["--native", "-o", spy_out]
                else:
                    argv = ["perf", "record", "-e", "cpu-clock", "-F", "999", "-g"]
                    argv += ["-p", str(pid), "-o", str(perf_out)]
                spy.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL))
            else:  # it closes: py-spy writes its file on SIGINT
                spy[0].send_signal(signal.SIGINT)
                spy[0].wait(60)
        readings.append((pid, *_times(pid)))
        threads.setdefault(pid, []).append(_threads(pid))
        return plain(pid)

    measure.cpu_seconds = cpu_seconds
    sent: dict[int, int] = {}
    fanout = measure.Run.fanout

    def counted(self, label, port, pid, token, deadline):  # type: ignore[no-untyped-def]
        if label == "hubsvc":
            hub_pid.append(pid)
        res = fanout(self, label, port, pid, token, deadline)
        sent[pid] = res.get("n") or 0
        print(f"[split] {label} pid {pid}", file=sys.stderr)
        return res

    measure.Run.fanout = counted
    status = measure.main()
    by_pid: dict[int, list[tuple[float, float]]] = {}
    for pid, user, system in readings:
        by_pid.setdefault(pid, []).append((user, system))
    for pid, pair in by_pid.items():
        if len(pair) == 2 and sent.get(pid):
            n = sent[pid]
            user = (pair[1][0] - pair[0][0]) * 1000 / n
            system = (pair[1][1] - pair[0][1]) * 1000 / n
            print(
                f"split pid {pid}: {n} events, user {user:.1f} + system {system:.1f} ms per event"
            )
            first, last = threads[pid]
            for name, (u1, s1) in sorted(last.items()):
                u0, s0 = first.get(name, (0.0, 0.0))
                if u1 - u0 or s1 - s0:
                    print(
                        f"  thread {name}: user {(u1 - u0) * 1000 / n:.1f}"
                        f" + system {(s1 - s0) * 1000 / n:.1f} ms per event"
                    )
    return int(status or 0)


if __name__ == "__main__":
    sys.exit(main())
