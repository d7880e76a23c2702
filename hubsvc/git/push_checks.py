"""The checks hubsvc adds to a push, run by the server on git's quarantine: no pushed
object over `[git] max_object_bytes`, and how many commits each branch update brings.

receive-pack keeps a push's objects in a quarantine folder until its pre-receive hook
says yes. A pack of 100 objects or more arrives through index-pack, which writes a
`.keep` naming receive-pack's pid before the pack and its `.idx`; once the `.idx` is
there (find_quarantine) the checks can start, and they run while receive-pack's own
connectivity walk does (100-300 ms on a 5,000-commit push), on the other core, instead
of after it in the hook. A smaller push is unpacked to loose objects: its checks start
when the hook asks, as before.

- The size check: `cat-file --batch-all-objects` over the quarantine alone lists every
  pushed object's size (a delta's from its own header: the size it unpacks to, however
  well it compressed); only when one is over the limit are the new objects walked, to
  name the file in the refusal and refuse blobs alone.
- The counts: every new branch in one `rev-list --topo-order --parents` walk, each
  update of a branch with its own `rev-list --count`. A count left out (a tip already on
  a branch, a walk that failed) is counted by the server when it records the push.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from . import pipes
from .process import _git_env

ZERO = "0" * 40
MIB = 1048576
RefUpdate = tuple[str, str, str]  # (old, new, ref)
# receive-pack's default receive.unpackLimit: a smaller pack is unpacked to loose objects
# (no .keep, no .idx to wait for).
UNPACK_LIMIT = 100
CHUNK = 65536
_COMMAND = re.compile(rb"([0-9a-f]{40}) ([0-9a-f]{40}) ([^\0\n]+)")


def parse_commands(head: bytes) -> tuple[list[RefUpdate] | None, int | None]:
    """The ref commands and the pack's object count at the start of a receive-pack body.

    None for what head does not hold whole (commands past it, a push certificate, push
    options before the pack): those checks then start when the hook asks.
    """
    updates: list[RefUpdate] = []
    at = 0
    while True:
        size = head[at : at + 4]
        if len(size) < 4 or not re.fullmatch(rb"[0-9a-f]{4}", size):
            return None, None
        length = int(size, 16)
        if length == 0:
            at += 4
            break
        if length < 4 or at + length > len(head):
            return None, None
        found = _COMMAND.match(head, at + 4, at + length)
        if found is None:
            return None, None  # a push certificate: its commands are inside it
        updates.append((found[1].decode(), found[2].decode(), found[3].decode("utf-8", "replace")))
        at += length
    pack = head[at : at + 12]
    objects = int.from_bytes(pack[8:12], "big") if pack[:4] == b"PACK" and len(pack) == 12 else None
    return updates, objects


def find_quarantine(objects: Path, pid: int) -> Path | None:
    """The quarantine whose pack index-pack, run by receive-pack pid, has finished."""
    keep = f"receive-pack {pid} on ".encode()
    try:
        folders = [e.path for e in os.scandir(objects) if e.name.startswith("tmp_objdir-incoming-")]
    except OSError:
        return None
    for folder in folders:
        try:
            names = os.listdir(os.path.join(folder, "pack"))
        except OSError:
            continue
        for name in names:
            # index-pack writes the .keep first and renames the .idx into place last.
            if name.endswith(".keep") and name[:-5] + ".idx" in names:
                try:
                    with open(os.path.join(folder, "pack", name), "rb") as f:
                        if f.read(len(keep)) == keep:
                            return Path(folder)
                except OSError:
                    continue
    return None


async def pack_landed(objects: Path, pid: int, poll: float) -> Path:
    """The quarantine of receive-pack pid, once index-pack has finished its pack there."""
    indexer = _index_pack(pid)
    if indexer is not None:
        # One wake-up when index-pack exits, not a look every few ms while it runs.
        with contextlib.suppress(OSError):
            await _exited(indexer)
    while (found := find_quarantine(objects, pid)) is None:
        await asyncio.sleep(poll)
    return found


def _index_pack(pid: int) -> int | None:
    """receive-pack's index-pack child, if it has one running."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            children = f.read().split()
        for child in children:
            with open(f"/proc/{child}/cmdline", "rb") as f:
                if b"\0index-pack\0" in f.read():
                    return int(child)
    except (OSError, ValueError):
        pass
    return None


async def _exited(pid: int) -> None:
    """Return once process pid has exited (awaited on a pidfd)."""
    fd = os.pidfd_open(pid)
    loop = asyncio.get_running_loop()
    done = loop.create_future()

    def readable() -> None:
        if not done.done():
            done.set_result(None)

    loop.add_reader(fd, readable)
    try:
        await done
    finally:
        loop.remove_reader(fd)
        os.close(fd)


def quarantine_env(repo: Path, quarantine: Path) -> dict[str, str]:
    """The variables receive-pack gives its hooks for this quarantine."""
    return {
        "GIT_OBJECT_DIRECTORY": str(quarantine),
        "GIT_ALTERNATE_OBJECT_DIRECTORIES": str(repo / "objects"),
        "GIT_QUARANTINE_PATH": str(quarantine),
    }


Each = Callable[[bytes], Awaitable[None] | None]  # a block of lines; awaited if async


async def _git(
    repo: Path,
    args: Sequence[str],
    env: dict[str, str],
    each: Each,
    stdin: bytes = b"",
) -> int:
    """git's exit code, its output handed to each in blocks of whole lines as it comes
    (never held whole: a walk of a million commits writes ~80 MB); killed when cancelled."""
    proc = await pipes.start(
        ["git", f"--git-dir={repo}", *args], {**_git_env(), **env}, stdin=bool(stdin), stderr=False
    )
    feeder = asyncio.ensure_future(_feed(proc.stdin, stdin)) if proc.stdin is not None else None
    try:
        assert proc.stdout is not None
        await _lines(proc.stdout, each)
        if feeder is not None:
            await feeder
        return await proc.wait()
    finally:
        if feeder is not None:
            feeder.cancel()
        if proc.returncode is None:
            proc.kill()
        proc.close()
        await proc.wait()


async def _lines(stream: asyncio.StreamReader, each: Each) -> None:
    rest = b""
    while chunk := await stream.read(CHUNK):
        block = rest + chunk
        cut = block.rfind(b"\n") + 1
        if cut and (waiting := each(block[:cut])) is not None:
            await waiting
        rest = block[cut:]
    if rest and (waiting := each(rest)) is not None:
        await waiting


async def _feed(into: asyncio.StreamWriter, data: bytes) -> None:
    try:
        into.write(data)
        await into.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass  # git stopped reading: its exit code says why
    finally:
        into.close()


async def check_push(
    repo: Path, env: dict[str, str], updates: Sequence[RefUpdate], limit: int
) -> tuple[list[str], dict[RefUpdate, int]]:
    """(the lines refusing the push for its sizes, [] when none; each branch update's count).

    env: the quarantine's variables (quarantine_env, or as git gave them to the hook).
    """
    news = sorted({new for _, new, _ in updates if new != ZERO})
    sizes, counts = await asyncio.gather(
        _sizes_ok(repo, env, news, limit), count_commits(repo, env, updates)
    )
    problems = [] if sizes else await _name_big_files(repo, env, news, limit)
    return problems, counts


async def _sizes_ok(repo: Path, env: dict[str, str], news: list[str], limit: int) -> bool:
    """Whether every object in the quarantine is within limit (False: look closer)."""
    if not news:
        return True
    if not env.get("GIT_QUARANTINE_PATH"):
        return False  # no quarantine to list: the new objects are walked instead
    # Only a size with as many digits as limit can be over it: 44,436 lines looked at
    # by the regex engine, not by a Python loop.
    long = re.compile(rb"^[0-9]{%d,}$" % len(str(limit)), re.MULTILINE)
    over = False

    def look(block: bytes) -> None:
        nonlocal over
        over = over or any(int(size) > limit for size in long.findall(block))

    # The repository's own objects come in as alternates, left out here.
    code = await _git(
        repo,
        ["cat-file", "--batch-all-objects", "--unordered", "--batch-check=%(objectsize)"],
        {**env, "GIT_ALTERNATE_OBJECT_DIRECTORIES": ""},
        look,
    )
    return code == 0 and not over


async def _name_big_files(
    repo: Path, env: dict[str, str], news: list[str], limit: int
) -> list[str]:
    """Walk the new objects: a refusal line for each file over limit ([] when none)."""
    check = await pipes.start(
        [
            "git",
            f"--git-dir={repo}",
            "cat-file",
            "--batch-check=%(objecttype) %(objectsize) %(rest)",
        ],
        {**_git_env(), **env},
        stdin=True,
        stderr=False,
    )
    assert check.stdin is not None and check.stdout is not None
    into = check.stdin
    problems: list[str] = []
    ok = True

    async def relay(block: bytes) -> None:  # rev-list's objects, into cat-file as they come
        into.write(block)
        await into.drain()

    def judge(block: bytes) -> None:
        nonlocal ok
        for line in block.decode("utf-8", "replace").splitlines():
            kind, _, rest = line.partition(" ")
            size, _, path = rest.partition(" ")
            if size == "missing" or not size.isdigit():
                ok = False
            elif kind == "blob" and int(size) > limit:
                problems.append(
                    f"error: {path or 'a file'} is {int(size) / MIB:.1f} MiB; this server "
                    f"refuses files over {limit / MIB:.1f} MiB ([git] max_object_bytes)"
                )

    async def walk() -> int:
        try:
            return await _git(
                repo,
                ["rev-list", "--objects", "--stdin", "--not", "--all"],
                env,
                relay,
                "".join(f"{oid}\n" for oid in news).encode(),
            )
        except (BrokenPipeError, ConnectionResetError):
            return -1  # cat-file stopped reading: its exit code says why
        finally:
            into.close()

    try:
        walked, _ = await asyncio.gather(walk(), _lines(check.stdout, judge))
        checked = await check.wait()
    finally:
        if check.returncode is None:
            check.kill()
        check.close()
        await check.wait()
    if not (ok and walked == 0 and checked == 0):
        problems.append("error: hubsvc could not check the pushed objects")
    return problems


async def count_commits(
    repo: Path, env: dict[str, str], updates: Sequence[RefUpdate]
) -> dict[RefUpdate, int]:
    """How many commits each branch update brings (those git could count)."""
    created = [u for u in updates if u[2].startswith("refs/heads/") and u[0] == ZERO != u[1]]
    moved = [u for u in updates if u[2].startswith("refs/heads/") and ZERO not in (u[0], u[1])]
    counts: dict[RefUpdate, int] = {}
    if created:
        # A new branch brings what no branch had: all of them in one walk, children first.
        # The tips come on stdin (a push may create more than a command line holds),
        # after a second --not, so they count as wanted whichever way git applies it.
        tips = "".join(f"{new}\n" for _, new, _ in created).encode()
        walk = ["rev-list", "--topo-order", "--parents", "--not", "--branches", "--not", "--stdin"]
        walked = Walked(created)
        if await _git(repo, walk, env, walked.feed, tips) == 0:
            counts.update(walked.counts())
    for update in moved:  # an update brings what old lacked
        out = bytearray()
        stdin = f"{update[1]}\n^{update[0]}\n".encode()
        code = await _git(repo, ["rev-list", "--count", "--stdin"], env, out.extend, stdin)
        if code == 0 and out.strip().isdigit():
            counts[update] = int(out)
    return counts


class Walked:
    """Each new branch's count, from one `--topo-order --parents` walk of them all, read
    as it comes: memory for the walk's frontier, not for the history."""

    def __init__(self, created: list[RefUpdate]) -> None:
        self.created = created
        # Each commit's mask holds the tips that reach it; --topo-order lists every child
        # before its parents, so a mask is whole when its commit's line comes.
        self.masks: dict[bytes, int] = {}
        for bit, (_, new, _) in enumerate(created):
            self.masks[new.encode()] = self.masks.get(new.encode(), 0) | 1 << bit
        self.tips = set(self.masks)
        self.seen: set[bytes] = set()
        self.totals = [0] * len(created)

    def feed(self, block: bytes) -> None:
        """Whole lines of the walk's output."""
        masks, totals = self.masks, self.totals
        for line in block.splitlines():
            commit, *parents = line.split()
            mask = masks.pop(commit, 0)
            if commit in self.tips:
                self.seen.add(commit)
            for parent in parents:
                masks[parent] = masks.get(parent, 0) | mask
            while mask:
                low = mask & -mask
                totals[low.bit_length() - 1] += 1
                mask ^= low

    def counts(self) -> dict[RefUpdate, int]:
        """A tip the walk never listed is reachable from a branch already, or not a commit:
        the server counts that one itself."""
        return {
            update: self.totals[bit]
            for bit, update in enumerate(self.created)
            if update[1].encode() in self.seen
        }
