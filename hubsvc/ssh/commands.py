"""What an SSH client may ask for: git's three commands on one repository, and nothing else."""

from __future__ import annotations

import shlex
from typing import NamedTuple

SERVICES = ("git-upload-pack", "git-receive-pack", "git-upload-archive")
NOT_FOUND = "ERROR: Repository not found."
ONLY_GIT = (
    "ERROR: hubsvc serves git only (git-upload-pack, git-receive-pack, git-upload-archive "
    "with a repository path)"
)


class Command(NamedTuple):
    """A git command on owner/name."""

    service: str
    owner: str
    name: str


def parse(line: str) -> Command | None:
    """The git command in an exec request, or None for anything else.

    git sends `git-upload-pack 'owner/name.git'` (scp-like URLs), `'/owner/name.git'`
    (ssh:// URLs) or `'~owner/name'`; some clients `git upload-pack …` with a space.
    """
    try:
        words = shlex.split(line)
    except ValueError:
        return None
    if len(words) == 3 and words[0] == "git":
        words = [f"git-{words[1]}", words[2]]
    if len(words) != 2 or words[0] not in SERVICES:
        return None
    path = words[1].removeprefix("/").removeprefix("~").removesuffix("/")
    owner, slash, name = path.partition("/")
    name = name.removesuffix(".git") if name.lower().endswith(".git") else name
    # Exactly owner/name: no deeper path, no empty part, nothing the shell or a disk path
    # would read differently (the names are looked up in the database, never joined).
    if not slash or not owner or not name or "/" in name or "\0" in path:
        return None
    if owner in (".", "..") or name in (".", ".."):
        return None
    return Command(words[0], owner, name)
