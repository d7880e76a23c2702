"""tools/perf/measure with its server CPU per event split into user and system time.

    HUBSVC_SSH_PORT=0 python benchmarks/ws_split.py /work/shared/tools/perf/measure \
        --only ws --clients 10000 --python $PWD/.venv/bin/python --hello-uvloop

Runs the tool unchanged, in this process, with its `cpu_seconds(pid)` (user + system from
/proc/PID/stat, read before the first timed event and after the last) also keeping the
two apart; after its table, one line per server: user and system ms per event, from the
same two readings the tool's own figure comes from.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys


def _times(pid: int) -> tuple[float, float]:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


def main() -> int:
    path = sys.argv[1]
    sys.argv = [path] + sys.argv[2:]
    loader = importlib.machinery.SourceFileLoader("perf_measure", path)
    spec = importlib.util.spec_from_loader("perf_measure", loader)
    assert spec is not None
    measure = importlib.util.module_from_spec(spec)
    loader.exec_module(measure)
    readings: list[tuple[int, float, float]] = []
    plain = measure.cpu_seconds

    def cpu_seconds(pid: int) -> float:
        readings.append((pid, *_times(pid)))
        return plain(pid)

    measure.cpu_seconds = cpu_seconds
    sent: dict[int, int] = {}
    fanout = measure.Run.fanout

    def counted(self, label, port, pid, token, deadline):  # type: ignore[no-untyped-def]
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
    return int(status or 0)


if __name__ == "__main__":
    sys.exit(main())
