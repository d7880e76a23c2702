"""The server's git hooks for receive-pack, and the files they hand back to the server.

post-receive names the ref updates git applied; pre-receive asks the server whether they
may land (hook_fifos.py, its checks in push_checks.py).
"""

from __future__ import annotations

import os
from pathlib import Path

from .process import _git_status

_POST_RECEIVE = """#!/bin/sh
# Written by hubsvc: hands the ref updates receive-pack applied ("old new ref" lines)
# to the server through the file it names, one file per push.
# exec: cat in the shell's place, one process fewer on the way to the push's answer.
if [ -n "$HUBSVC_PUSH_LOG" ]; then exec cat > "$HUBSVC_PUSH_LOG"; fi
exec cat > /dev/null
"""


# Runs in git's quarantine: the pushed objects are visible, no ref has moved yet, and a
# non-zero exit refuses the whole push. What it prints reaches the pusher as "remote: ".
# sh, not Python: this runs on every push's critical path (hook_fifos.py says why and
# how the server answers).
_PRE_RECEIVE = """#!/bin/sh
# Written by hubsvc: asks the server whether the push may land (who pushes and the
# branch rules as they are now, no file over [git] max_object_bytes), through the two
# FIFOs of the folder the server made for this push; exit 1 refuses it whole.
d=$HUBSVC_HOOK_DIR
if [ -z "$d" ] || [ ! -p "$d/answer" ] || ! kill -0 "$HUBSVC_HOOK_PID" 2>/dev/null; then
    echo "hubsvc: this push did not come through the server: refused"
    exit 1
fi
# The answer's end opened before the question is sent: the server closes its own end
# once it has answered, and what it wrote waits here for the reads below.
exec 3<"$d/answer" 4>"$d/ask"
{
    [ -z "${GIT_OBJECT_DIRECTORY+x}" ] || printf 'GIT_OBJECT_DIRECTORY=%s\\n' "$GIT_OBJECT_DIRECTORY"
    [ -z "${GIT_ALTERNATE_OBJECT_DIRECTORIES+x}" ] ||
        printf 'GIT_ALTERNATE_OBJECT_DIRECTORIES=%s\\n' "$GIT_ALTERNATE_OBJECT_DIRECTORIES"
    [ -z "${GIT_QUARANTINE_PATH+x}" ] || printf 'GIT_QUARANTINE_PATH=%s\\n' "$GIT_QUARANTINE_PATH"
    echo
    cat || exit 1  # updates lost on the way: the server must not judge a push of none
    printf '\\n.\\n'
} >&4 || exit 1
exec 4>&-
IFS= read -r verdict <&3
if [ "$verdict" = ok ]; then exit 0; fi
if [ "$verdict" = refused ]; then
    cat <&3
else
    echo "hubsvc: the server did not answer about this push: refused"
fi
exit 1
"""


def hooks_text() -> dict[str, str]:
    """Each hook's script."""
    return {"post-receive": _POST_RECEIVE, "pre-receive": _PRE_RECEIVE}


def install_hooks(folder: Path) -> Path:
    """Write the server's git hooks into folder (idempotent); returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in hooks_text().items():
        hook = folder / name
        if not hook.exists() or hook.read_text() != text:
            tmp = folder / f"{name}.{os.getpid()}.tmp"  # processes starting together
            tmp.write_text(text)
            tmp.chmod(0o755)
            os.replace(tmp, hook)
    return folder


def parse_ref_updates(text: str) -> list[tuple[str, str, str]]:
    """(old, new, ref) for each line git's post-receive got on its standard input."""
    updates = []
    for line in text.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and len(parts[0]) == len(parts[1]) == 40:
            updates.append((parts[0], parts[1], parts[2]))
    return updates


def quarantined_is_ancestor(repo: Path, old: str, new: str, env: dict[str, str]) -> bool:
    """Whether old is an ancestor of new, new being among a push's quarantined objects.

    env is the quarantine's environment as the hook reported it; it must lie inside the
    repository (else False: nothing outside it is read). Blocking: call it in a thread.
    """
    if not within(repo, env):
        return False
    code, _, _ = _git_status(str(repo), "merge-base", "--is-ancestor", old, new, env=env)
    return code == 0


def within(repo: Path, env: dict[str, str]) -> bool:
    """Whether the quarantine's variables (as the hook reported them) name only folders
    inside the repository: nothing outside it is ever read for a push."""
    root = repo.resolve()
    for name in ("GIT_OBJECT_DIRECTORY", "GIT_QUARANTINE_PATH"):
        if name in env and not Path(env[name]).resolve().is_relative_to(root):
            return False
    for alternate in filter(None, env.get("GIT_ALTERNATE_OBJECT_DIRECTORIES", "").split(":")):
        if not Path(alternate).resolve().is_relative_to(root):
            return False
    return True
