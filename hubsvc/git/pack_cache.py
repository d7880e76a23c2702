"""A cache of the packs upload-pack sends, for the same fetch asked again (CI fleets).

git runs `uploadpack.packObjectsHook` (given on upload-pack's command line: git ignores
it in a repository's config, where a pusher could set it) in pack-objects' place. The
hook below keys the pack by the repository's real path, its prune stamp, pack-objects'
arguments (progress flags aside: they only shape stderr) and its whole standard input
(wants, haves, shallow lines), so the same request gets the same bytes and any other
misses. Objects never change under their ids, and every want was checked by upload-pack
against the refs before the hook runs, so a kept pack is what git would compute again;
a prune replaces the stamp, so nothing pruned since is served from here.

It is a `sh` script, not Python: a hit starts three small programs (cat, sha256sum, cat)
after the shell, about 5 ms here, where an interpreter's start alone is 10-15 ms. The
server only sweeps the folder (by age, then oldest first down to the size bound) and
counts the hook's journal into metrics.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import threading
import time
from pathlib import Path

from prometheus_client import Counter

from ..metrics import REGISTRY
from .answers import Stamp

log = logging.getLogger("hubsvc.git.pack_cache")

PACK_CACHE = Counter(
    "hubsvc_git_pack_cache_total",
    "Packs upload-pack asked of the pack cache, by result (hit: sent from the cache; "
    "miss: computed by pack-objects, and kept when it succeeded)",
    ("result",),
    registry=REGISTRY,
)

JOURNAL = "journal"  # "hit KEY" / "miss KEY" lines the hook appends, read by sweep()
SWEEP_SECONDS = 10.0  # at most this often after a fetch: the folder is listed each time
_SUFFIX = ".pack"

# $1 is the cache folder, $2 the repository (its path and its prune stamp's identity, from
# the server), $3 the cache's bound in KiB; git appends `git pack-objects ARGS`. Temp
# names end in the shell's pid: unique among live hooks. pack-objects' input is text (ids
# and options), so it is held in a variable, not a file: no temp file to remove on a hit,
# where every process costs.
HOOK = r"""#!/bin/sh
# Written by hubsvc (git/pack_cache.py): uploadpack.packObjectsHook. Sends the pack kept
# for the same repository, prune stamp, arguments and standard input, else runs
# pack-objects into a temp file, renames it into place once it has succeeded, and sends it.
umask 077
cache=$1
repo=$2
room=$3
shift 3
input=$(cat; echo .)
input=${input%.}
key=$( {
    printf 'hubsvc-pack-cache 1\0%s\0' "$repo"
    for arg; do
        case $arg in
            --progress|-q|--quiet|--all-progress|--all-progress-implied) ;;
            *) printf '%s\0' "$arg" ;;
        esac
    done
    printf '\0%s' "$input"
} | sha256sum )
key=${key%% *}
pack="$cache/$key.pack"
# Opened before it is read: a sweep removing it now cannot cut the answer short.
if [ -n "$key" ] && { command exec 5< "$pack"; } 2> /dev/null; then
    printf 'hit %s\n' "$key" >> "$cache/journal"
    exec cat <&5
fi
[ -n "$key" ] || { printf '%s' "$input" | "$@"; exit; }
# One hook computes a pack, the others asking for the same one wait for it (a CI fleet
# cloning one commit at once): pack-objects writes to a file, at the disk's pace, never
# at a client's, so a slow reader holds no one up. No flock(1), or 60 s gone: compute too.
if { command exec 6>> "$cache/$key.lock"; } 2> /dev/null && flock -w 60 6 2> /dev/null &&
    { command exec 5< "$pack"; } 2> /dev/null; then
    exec 6>&-
    printf 'hit %s\n' "$key" >> "$cache/journal"
    exec cat <&5
fi
part="$cache/$key.$$.part"
# Kept only while the folder is within its bound: a client choosing a new key each fetch
# (its haves, a want of each commit) must not fill the disk between two sweeps. The
# bound can be passed by the fetches in flight at once, one pack each.
used=$(du -sk "$cache" 2> /dev/null)
used=${used%%[!0-9]*}
[ -n "$used" ] && [ "$used" -lt "$room" ] || { exec 6>&-; printf '%s' "$input" | "$@"; exit; }
# Errors about the cache's own files stay here: the client would read them (and paths).
if { command exec 7> "$part"; } 2> /dev/null && printf '%s' "$input" | "$@" >&7 &&
    exec 7>&- && mv -f "$part" "$pack" 2> /dev/null &&
    { command exec 5< "$pack"; } 2> /dev/null; then
    printf 'miss %s\n' "$key" >> "$cache/journal"
    exec 6>&-
    exec cat <&5
fi
# Nothing was sent yet: whatever failed (a full disk, say), git's own answer still goes.
rm -f "$part" 2> /dev/null
exec 6>&- 7>&-
printf '%s' "$input" | "$@"
"""


class PackCache:
    """The cache folder, its hook, and the sweep that keeps it within its bounds."""

    def __init__(
        self, folder: Path, hook: Path, max_bytes: int, max_age: float, stale_after: float
    ) -> None:
        self.folder = Path(folder).absolute()  # git runs the hook in the repository
        # Outside the folder: emptying the cache by hand must not break every fetch.
        self.hook = Path(hook).absolute()
        self.max_bytes, self.max_age = max_bytes, max_age
        self.stale_after = stale_after  # temp, lock files older: their hook is gone (git's timeout)
        self.enabled = max_bytes > 0
        self.sweep_every = SWEEP_SECONDS
        self._swept = 0.0
        self._lock = threading.Lock()

    def setting(self, repo: Path, stamp: Stamp) -> tuple[str, ...]:
        """upload-pack's `-c` settings for a repository with this prune stamp: the hook."""
        if not self.enabled:
            return ()
        # The repository's part of every key: its path (by id, so never another's) and the
        # stamp a prune replaces. The hook runs through a shell, hence the quoting.
        words = (
            self.hook,
            self.folder,
            f"{repo.absolute()} {stamp[0]}.{stamp[1]}",
            max(1, self.max_bytes >> 10),
        )
        return ("uploadpack.packObjectsHook=" + " ".join(shlex.quote(str(w)) for w in words),)

    def prepare(self) -> None:
        """Write the hook, empty the folder of kept packs (0700) and sweep it."""
        if not self.enabled:
            return
        self.hook.parent.mkdir(parents=True, exist_ok=True)
        if not self.hook.exists() or self.hook.read_text() != HOOK:
            tmp = self.hook.with_name(f"{self.hook.name}.{os.getpid()}.tmp")
            tmp.write_text(HOOK)
            tmp.chmod(0o700)
            os.replace(tmp, self.hook)
        # The hook renames a pack into place without an fsync (one a miss would cost): after
        # a crash of the machine a kept pack may be short, and served to every later
        # identical fetch. A start is the first moment after such a crash, so kept packs go
        # (a hook sending one has it open: it is sent whole).
        with contextlib.suppress(FileNotFoundError):
            for entry in os.scandir(self.folder):
                if entry.name.endswith(_SUFFIX):
                    _remove(entry.path)
        self.sweep()

    def sweep_soon(self) -> bool:
        """Whether a sweep is due (one at most every sweep_every s); claims it if so."""
        now = time.monotonic()
        with self._lock:
            if not self.enabled or now - self._swept < self.sweep_every:
                return False
            self._swept = now
            return True

    def sweep(self) -> None:
        """Count the journal, drop packs past max_age, then the oldest past max_bytes."""
        if not self.enabled:
            return
        # Made again if someone emptied it by hand: until then the hook computes every pack.
        self.folder.mkdir(parents=True, exist_ok=True)
        os.chmod(self.folder, 0o700)  # private repositories' packs: the server's user only
        self._read_journal()
        now = time.time()
        packs: list[tuple[float, int, str]] = []
        try:
            entries = list(os.scandir(self.folder))
        except FileNotFoundError:
            return
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            name = entry.name
            if name.endswith(_SUFFIX):
                if now - st.st_mtime > self.max_age:
                    _remove(entry.path)
                else:
                    packs.append((st.st_mtime, st.st_size, entry.path))
            elif (
                name.endswith((".part", ".lock")) or name.startswith(f"{JOURNAL}.")
            ) and now - st.st_mtime > self.stale_after:
                _remove(entry.path)  # a hook (or a sweep) killed before it cleaned up
        total = sum(size for _, size, _ in packs)
        for _, size, path in sorted(packs):
            if total <= self.max_bytes:
                break
            _remove(path)
            total -= size

    def _read_journal(self) -> None:
        """The hook's hits and misses since the last sweep, into PACK_CACHE."""
        journal = self.folder / JOURNAL
        taken = self.folder / f"{JOURNAL}.{os.getpid()}.{threading.get_ident()}"
        try:
            os.rename(journal, taken)  # hooks append to a fresh file from now on
        except FileNotFoundError:
            return
        try:
            with open(taken, "rb") as fh:
                hits = misses = 0
                for line in fh:
                    if line.startswith(b"hit "):
                        hits += 1
                    elif line.startswith(b"miss "):
                        misses += 1
        finally:
            _remove(str(taken))
        PACK_CACHE.labels("hit").inc(hits)
        PACK_CACHE.labels("miss").inc(misses)
        if hits or misses:
            log.debug("pack cache: %d hits, %d misses kept", hits, misses)


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
