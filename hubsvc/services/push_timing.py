"""Where a push's time goes: named phases, one DEBUG line on `hubsvc.push.timing`.

Off by default (a DEBUG logger); benchmarks/bench_push.py turns it on and prints the
medians. With it on, git's receive-pack also writes a trace2 event file, from which the
line splits git's own time into its children (index-pack, the connectivity walk, hooks).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

log = logging.getLogger("hubsvc.push.timing")


class PushClock:
    """Phase durations of one push, each the time since the previous mark."""

    def __init__(self) -> None:
        self.on = log.isEnabledFor(logging.DEBUG)
        self.started = self.last = time.perf_counter()
        self.spans: dict[str, float] = {}

    def mark(self, phase: str) -> None:
        """The time since the previous mark goes to phase."""
        now = time.perf_counter()
        self.spans[phase] = self.spans.get(phase, 0.0) + now - self.last
        self.last = now

    def span(self, phase: str, seconds: float) -> None:
        """A span that overlapped the others (not a step of the sequence)."""
        self.spans[phase] = self.spans.get(phase, 0.0) + seconds

    def git_children(self, trace: Path) -> None:
        """Add receive-pack's own children as git.* spans, from the trace2 folder it wrote
        (a file per process, as git writes into a folder: cheaper than one shared file)."""
        try:
            files = list(trace.iterdir())
        except OSError:
            return
        for path in files:
            names: dict[int, str] = {}
            for line in path.read_text("utf-8", "replace").splitlines():
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if "/" in event.get("sid", "/"):
                    break  # a child's file: counted in receive-pack's own
                if event.get("event") == "child_start":
                    argv = event.get("argv") or ["?"]
                    name = event.get("hook_name") or (argv[1] if argv[0] == "git" else argv[0])
                    names[event["child_id"]] = name
                elif event.get("event") == "child_exit" and event.get("child_id") in names:
                    phase = "git." + names[event["child_id"]]
                    self.spans[phase] = self.spans.get(phase, 0.0) + float(event.get("t_rel", 0))

    def log(self, repo_id: int) -> None:
        """The DEBUG line: total and each phase in ms, in the order they happened."""
        if not self.on:
            return
        total = time.perf_counter() - self.started
        log.debug(
            "push to repository %s: total=%.1f %s",
            repo_id,
            total * 1000,
            " ".join(f"{name}={seconds * 1000:.1f}" for name, seconds in self.spans.items()),
        )
