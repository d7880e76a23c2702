"""Generate a bare benchmark repository with `git fast-import`.

`make_repo(path)` writes a bare repository at `path` (created; it must not exist or
be empty) whose `main` branch has `commits` commits over `files` text files in
nested folders. The first commit adds a tenth of the files, later commits add the
rest one by one and each edits one to three files, so history looks like a real
project's. Output is deterministic for a given seed. One fast-import process
builds everything, so 5,000 commits take a few seconds instead of minutes of
`git commit` spawns.

    python benchmarks/make_repo.py /tmp/bench.git --commits 5000 --files 500
"""

from __future__ import annotations

import argparse
import random
import subprocess
import time
from pathlib import Path
from typing import IO

WORDS = [
    "account",
    "branch",
    "buffer",
    "cache",
    "client",
    "commit",
    "config",
    "context",
    "cursor",
    "data",
    "default",
    "diff",
    "entry",
    "event",
    "field",
    "filter",
    "handler",
    "index",
    "issue",
    "limit",
    "listener",
    "message",
    "module",
    "offset",
    "option",
    "owner",
    "page",
    "parser",
    "path",
    "payload",
    "queue",
    "reader",
    "record",
    "request",
    "response",
    "result",
    "review",
    "schema",
    "search",
    "session",
    "source",
    "state",
    "stream",
    "token",
    "tree",
    "update",
    "user",
    "value",
    "worker",
    "writer",
]
AUTHORS = [
    ("Ada Lovelace", "ada@example.com", "+0000"),
    ("Grace Hopper", "grace@example.com", "-0500"),
    ("Linus Benedict", "linus@example.com", "+0200"),
    ("Margaret Hamilton", "margaret@example.com", "-0800"),
    ("Ken Thompson", "ken@example.com", "+0100"),
    ("Barbara Liskov", "barbara@example.com", "+0530"),
]
TOP_DIRS = ("src", "docs", "tests", "tools", "lib")
START = 1577836800  # 2020-01-01T00:00:00Z, so dates are reproducible


def _paths(rng: random.Random, count: int) -> list[str]:
    """Unique file paths one to three folders deep."""
    paths: set[str] = set()
    while len(paths) < count:
        depth = rng.randint(1, 3)
        folders = [rng.choice(TOP_DIRS)] + [rng.choice(WORDS) for _ in range(depth - 1)]
        ext = ".md" if folders[0] == "docs" else ".py"
        paths.add("/".join(folders + [f"{rng.choice(WORDS)}_{rng.choice(WORDS)}{ext}"]))
    return sorted(paths)


def _line(rng: random.Random) -> str:
    kind = rng.random()
    a, b = rng.choice(WORDS), rng.choice(WORDS)
    if kind < 0.2:
        return f"def {a}_{b}(value, limit={rng.randint(1, 500)}):"
    if kind < 0.5:
        return f"    {a} = {b}.get_{rng.choice(WORDS)}(value)"
    if kind < 0.7:
        return f"    # keep the {a} close to the {b} so later reads stay cheap"
    if kind < 0.9:
        return f"    return {a}_{b}({rng.randint(0, 99)})"
    return ""


def _edit(rng: random.Random, lines: list[str]) -> None:
    """Replace, insert and maybe delete a few lines, like a small change."""
    for _ in range(rng.randint(1, 3)):
        lines[rng.randrange(len(lines))] = _line(rng)
    for _ in range(rng.randint(0, 2)):
        lines.insert(rng.randint(0, len(lines)), _line(rng))
    if len(lines) > 20 and rng.random() < 0.3:
        del lines[rng.randrange(len(lines))]


def _data(out: IO[bytes], payload: bytes) -> None:
    out.write(b"data %d\n" % len(payload))
    out.write(payload)
    out.write(b"\n")


def _stream(out: IO[bytes], commits: int, files: int, seed: int) -> None:
    """Write the whole fast-import stream."""
    rng = random.Random(seed)
    paths = _paths(rng, files)
    contents: dict[str, list[str]] = {}
    pending = paths[:]
    rng.shuffle(pending)
    first = max(1, files // 10)
    # Spread the remaining additions evenly over the later commits.
    add_every = max(1, (commits - 1) // max(1, files - first))
    when = START
    for n in range(1, commits + 1):
        name, email, tz = rng.choice(AUTHORS)
        when += rng.randint(300, 7200)
        if n == 1:
            touched = [pending.pop() for _ in range(min(first, len(pending)))]
        else:
            touched = rng.sample(sorted(contents), k=min(len(contents), rng.randint(1, 3)))
            if pending and n % add_every == 0:
                touched.append(pending.pop())
        for path in touched:
            if path in contents:
                _edit(rng, contents[path])
            else:
                contents[path] = [_line(rng) for _ in range(rng.randint(30, 120))]
        name_part = touched[0].rsplit("/", 1)[-1]
        subject = f"Update {name_part}: {rng.choice(WORDS)} {rng.choice(WORDS)}"
        body = "" if rng.random() < 0.6 else f"\nTouch the {rng.choice(WORDS)} path.\n"
        ident = f"{name} <{email}> {when} {tz}".encode()
        out.write(b"commit refs/heads/main\nmark :%d\n" % n)
        out.write(b"author " + ident + b"\ncommitter " + ident + b"\n")
        _data(out, f"{subject}\n{body}".encode())
        if n > 1:
            out.write(b"from :%d\n" % (n - 1))
        for path in touched:
            out.write(f"M 100644 inline {path}\n".encode())
            _data(out, ("\n".join(contents[path]) + "\n").encode())
        out.write(b"\n")
    out.write(b"done\n")


def make_repo(path: str | Path, commits: int = 5000, files: int = 500, seed: int = 1) -> Path:
    """Create a bare repository at path with generated history; return the path."""
    path = Path(path)
    subprocess.run(
        ["git", "init", "--quiet", "--bare", "--initial-branch=main", str(path)], check=True
    )
    proc = subprocess.Popen(
        ["git", f"--git-dir={path}", "fast-import", "--quiet", "--done"], stdin=subprocess.PIPE
    )
    assert proc.stdin is not None
    try:
        _stream(proc.stdin, commits, files, seed)
    finally:
        proc.stdin.close()
    if proc.wait() != 0:
        raise RuntimeError("git fast-import failed")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path")
    parser.add_argument("--commits", type=int, default=5000)
    parser.add_argument("--files", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    started = time.perf_counter()
    make_repo(args.path, args.commits, args.files, args.seed)
    print(f"{args.path}: {args.commits} commits in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
