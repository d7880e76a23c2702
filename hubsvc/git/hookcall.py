"""The pre-receive hook's program: ask the server whether the push may land and, meanwhile,
size the pushed objects and count the commits each branch gains.

Run by the pre-receive hook (`exec python -I -S hookcall.py`, push_hooks.py) with git's
"old new ref" lines on its standard input. It sends them and the quarantine's
whereabouts to the socket the server named in the hook's environment, with the push's
secret, and prints the server's answer, which git shows the pusher as `remote: …`. Exit
0 lets the push on, 1 refuses it whole; no answer refuses it too.

While the server decides, two git processes run on the pushed objects, so the three
overlap instead of following each other:
- the size check: `cat-file --batch-all-objects` over the quarantine alone lists every
  pushed object's size (a delta's from its own header: the size it unpacks to, however
  well it compressed); only when one is over $HUBSVC_MAX_OBJECT_BYTES are the new
  objects walked, to name the file in the refusal and refuse blobs alone, as before;
- the commit counts the push events carry ($HUBSVC_PUSH_COUNTS, "old new ref count"
  lines): every new branch in one `rev-list --topo-order --parents` walk, each update
  with its own `rev-list --count`. A count left out is counted by the server.

It imports only what starts fast (`_socket`, `select`; not `socket`, `subprocess` or
json: this script starts in 10 ms, `subprocess` alone imports in 50).

The question, in lines: the secret, then NAME=value of the quarantine's variables and of
the push's request id, an empty line, then git's "old new ref" lines. The answer: "ok"
or "refused", then the lines to print.
"""

import _socket
import os
import select
import sys

# Where receive-pack keeps the pushed objects until the hook says yes: the server reads
# them there (a force-push check needs the new commits).
QUARANTINE = ("GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_QUARANTINE_PATH")
# The id of the request that runs the push (requestid.ENV): the server's lines about its
# decision carry it, whichever task answers the socket.
REQUEST_ID = "HUBSVC_REQUEST_ID"
ZERO = "0" * 40
MIB = 1048576
_HEX = frozenset("0123456789abcdef")


class Git:
    """A git process whose output is read as it comes (through Loop)."""

    def __init__(self, args: list[str], env: dict[str, str], stdin: bytes = b"") -> None:
        out, into = os.pipe()  # both close on exec; the child gets its own copies below
        actions: list[tuple] = [(os.POSIX_SPAWN_DUP2, into, 1)]
        feed = None
        if stdin:
            source, feed = os.pipe()
            actions.append((os.POSIX_SPAWN_DUP2, source, 0))
        else:
            actions.append((os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0))
        try:
            self.pid = os.posix_spawnp("git", ["git", *args], env, file_actions=actions)
        finally:
            os.close(into)
            if feed is not None:
                os.close(source)
        if feed is not None:
            # rev-list --stdin reads all of it before it writes a line: no deadlock.
            with open(feed, "wb") as pipe:
                pipe.write(stdin)
        self.fd = out
        self.out = bytearray()
        self.code: int | None = None

    def finish(self) -> int:
        """Its exit code, once its output has ended."""
        os.close(self.fd)
        # The number may be a later Git's pipe from now on: never taken for this one's.
        self.fd = -1
        self.code = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        return self.code

    def kill(self) -> None:
        """End it now (a refused push: nothing it finds matters any more)."""
        if self.code is None:
            try:
                os.kill(self.pid, 9)  # SIGKILL
            except ProcessLookupError:
                pass
            self.finish()


def _updates(text: str) -> list[tuple[str, str, str]]:
    found = []
    for line in text.splitlines():
        old, _, rest = line.partition(" ")
        new, _, ref = rest.partition(" ")
        if len(old) == len(new) == 40 and set(old + new) <= _HEX and ref:
            found.append((old, new, ref))
    return found


def _ask(question: bytes) -> _socket.socket:
    """The question sent to the server; its answer is read from the returned socket."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.connect(os.environ["HUBSVC_HOOK_SOCKET"])
        sock.sendall(question)
        sock.shutdown(_socket.SHUT_WR)
    except BaseException:
        sock.close()
        raise
    return sock


def _count_jobs(updates: list[tuple[str, str, str]]) -> list[tuple[list[str], bytes, list]]:
    """The git runs that count what each branch update brings: (args, stdin, updates)."""
    created = [u for u in updates if u[2].startswith("refs/heads/") and u[0] == ZERO != u[1]]
    moved = [u for u in updates if u[2].startswith("refs/heads/") and ZERO not in (u[0], u[1])]
    jobs: list[tuple[list[str], bytes, list]] = []
    if created:
        # A new branch brings what no branch had: all of them in one walk, children first.
        # The tips come on stdin (a push may create more than a command line holds),
        # after a second --not, so they count as wanted whichever way git applies it.
        tips = "".join(f"{new}\n" for _, new, _ in created).encode()
        walk = ["rev-list", "--topo-order", "--parents", "--not", "--branches", "--not", "--stdin"]
        jobs.append((walk, tips, created))
    for update in moved:  # an update brings what old lacked
        jobs.append(
            (["rev-list", "--count", "--stdin"], f"{update[1]}\n^{update[0]}\n".encode(), [update])
        )
    return jobs


def _counted(job: tuple[list[str], bytes, list], out: bytes) -> list[str]:
    """The "old new ref count" lines of one finished count job."""
    args, _, updates = job
    if "--count" in args:
        old, new, ref = updates[0]
        return [f"{old} {new} {ref} {int(out)}"] if out.strip().isdigit() else []
    # Each commit's mask holds the tips that reach it; --topo-order lists every child
    # before its parents, so a mask is whole when its commit's line comes.
    masks: dict[bytes, int] = {}
    for bit, (_, new, _) in enumerate(updates):
        masks[new.encode()] = masks.get(new.encode(), 0) | 1 << bit
    tips = set(masks)
    counts = [0] * len(updates)
    seen = set()
    for line in out.splitlines():
        commit, *parents = line.split()
        mask = masks.pop(commit, 0)
        if commit in tips:
            seen.add(commit)
        for parent in parents:
            masks[parent] = masks.get(parent, 0) | mask
        while mask:
            low = mask & -mask
            counts[low.bit_length() - 1] += 1
            mask ^= low
    # A tip the walk never listed is reachable from a branch already, or not a commit:
    # the server counts that one itself.
    return [
        f"{old} {new} {ref} {counts[bit]}"
        for bit, (old, new, ref) in enumerate(updates)
        if new.encode() in seen
    ]


def _too_big(sizes: bytes, limit: int) -> bool:
    """Whether cat-file listed a size over limit (only sizes as long as limit can be)."""
    digits = len(str(limit))
    return any(len(size) >= digits and int(size) > limit for size in sizes.split())


def _name_big_files(news: list[str], limit: int) -> list[str]:
    """Walk the new objects: a refusal line for each file over limit ([] when none)."""
    # cat-file reads what rev-list writes, through a pipe of their own.
    walked, into = os.pipe()
    source, feed = os.pipe()
    out, back = os.pipe()
    try:
        walk = os.posix_spawnp(
            "git",
            ["git", "rev-list", "--objects", "--stdin", "--not", "--all"],
            dict(os.environ),
            file_actions=[(os.POSIX_SPAWN_DUP2, source, 0), (os.POSIX_SPAWN_DUP2, into, 1)],
        )
        check = os.posix_spawnp(
            "git",
            ["git", "cat-file", "--batch-check=%(objecttype) %(objectsize) %(rest)"],
            dict(os.environ),
            file_actions=[(os.POSIX_SPAWN_DUP2, walked, 0), (os.POSIX_SPAWN_DUP2, back, 1)],
        )
    finally:
        for fd in (walked, into, source, back):
            os.close(fd)
    with open(feed, "wb") as pipe:
        pipe.write("".join(f"{oid}\n" for oid in news).encode())
    with open(out, "rb") as pipe:
        listed = pipe.read().decode("utf-8", "replace")
    walked_ok = os.waitstatus_to_exitcode(os.waitpid(walk, 0)[1]) == 0
    checked_ok = os.waitstatus_to_exitcode(os.waitpid(check, 0)[1]) == 0
    problems = []
    for line in listed.splitlines():
        kind, _, rest = line.partition(" ")
        size, _, path = rest.partition(" ")
        if size == "missing" or not size.isdigit():
            walked_ok = False
        elif kind == "blob" and int(size) > limit:
            problems.append(
                f"error: {path or 'a file'} is {int(size) / MIB:.1f} MiB; this server refuses "
                f"files over {limit / MIB:.1f} MiB ([git] max_object_bytes)"
            )
    if not (walked_ok and checked_ok):
        problems.append("error: hubsvc could not check the pushed objects")
    return problems


class Hook:
    """One run: the server's answer and the checks' git processes, read as they come."""

    def __init__(self, sock: _socket.socket, sizes: Git | None, jobs: list) -> None:
        self.sock, self.sizes, self.jobs = sock, sizes, jobs
        self.running = [sizes] if sizes is not None else []
        self.counting: Git | None = None
        self.lines: list[str] = []  # the counts
        self.poll = select.poll()
        self.reading: set[int] = set()
        self._read(sock.fileno())
        if sizes is not None:
            self._read(sizes.fd)
        self._next_count()

    def _read(self, fd: int) -> None:
        self.poll.register(fd, select.POLLIN)
        self.reading.add(fd)

    def _next_count(self) -> None:
        self.counting = None
        if self.jobs:
            args, stdin, _ = self.jobs[0]
            self.counting = Git(args, dict(os.environ), stdin)
            self.running.append(self.counting)
            self._read(self.counting.fd)

    def run(self) -> bool:
        """Read to the end; False as soon as the server refuses (its lines printed)."""
        answer = bytearray()
        sock = self.sock.fileno()
        while self.reading:
            for fd, _ in self.poll.poll():
                chunk = self.sock.recv(65536) if fd == sock else os.read(fd, 65536)
                if fd == sock:
                    answer += chunk
                elif self.sizes is not None and fd == self.sizes.fd:
                    self.sizes.out += chunk
                elif self.counting is not None:
                    self.counting.out += chunk
                if chunk:
                    continue
                self.poll.unregister(fd)
                self.reading.discard(fd)
                if fd == sock:
                    verdict, _, said = answer.decode("utf-8", "replace").partition("\n")
                    sys.stdout.write(said)
                    if verdict != "ok":
                        return False
                elif self.sizes is not None and fd == self.sizes.fd:
                    self.sizes.finish()
                elif self.counting is not None:
                    job = self.jobs.pop(0)
                    if self.counting.finish() == 0:
                        self.lines += _counted(job, bytes(self.counting.out))
                    self._next_count()
        return True

    def kill(self) -> None:
        """End every git process still running."""
        for git in self.running:
            git.kill()


def main() -> int:
    """Ask, check, print what refuses the push; exit 0 (accepted) or 1 (refused)."""
    path = os.environ.get("HUBSVC_HOOK_SOCKET", "")
    secret = os.environ.get("HUBSVC_HOOK_SECRET", "")
    if not path or not secret:
        print("hubsvc: this push did not come through the server: refused")
        return 1
    stdin = sys.stdin.buffer.read()
    updates = _updates(stdin.decode("utf-8", "replace"))
    news = sorted({new for _, new, _ in updates if new != ZERO})
    limit_text = os.environ.get("HUBSVC_MAX_OBJECT_BYTES", "")
    limit = int(limit_text) if limit_text.isdigit() and news else None
    counts_path = os.environ.get("HUBSVC_PUSH_COUNTS", "")
    env = "".join(
        f"{name}={os.environ[name]}\n" for name in (*QUARANTINE, REQUEST_ID) if name in os.environ
    )
    sizes = None
    if limit is not None and os.environ.get("GIT_QUARANTINE_PATH"):
        # The objects this push brings are those of git's quarantine, where receive-pack
        # keeps them; the repository's own come in as alternates, left out here.
        sizes = Git(
            ["cat-file", "--batch-all-objects", "--unordered", "--batch-check=%(objectsize)"],
            {**os.environ, "GIT_ALTERNATE_OBJECT_DIRECTORIES": ""},
        )
    try:
        sock = _ask(f"{secret}\n{env}\n".encode() + stdin)
    except OSError as exc:
        if sizes is not None:
            sizes.kill()
        print(f"hubsvc: the server could not be asked about this push ({exc}): refused")
        return 1
    hook = Hook(sock, sizes, _count_jobs(updates) if counts_path else [])
    try:
        try:
            if not hook.run():
                return 1
        except OSError as exc:
            print(f"hubsvc: the server's answer broke off ({exc}): refused")
            return 1
        finally:
            sock.close()
        too_big = sizes is None or sizes.code != 0 or _too_big(bytes(sizes.out), limit or 0)
        if limit is not None and too_big:
            problems = _name_big_files(news, limit)
            if problems:
                print("\n".join(problems))
                return 1
        if counts_path:
            with open(counts_path, "w") as counts:
                counts.write("".join(f"{line}\n" for line in hook.lines))
        return 0
    finally:
        hook.kill()


if __name__ == "__main__":
    sys.exit(main())
