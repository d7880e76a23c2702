"""Answers kept by commit, the branch tip read without a thread, and the prune stamp, against git."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from hubsvc.git.answers import (
    Answers,
    branch_tip,
    ensure_prune_stamp,
    prune_stamp,
    replace_prune_stamp,
)
from hubsvc.git.repo import GitRepo

ENV = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
ENV.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull)
ENV.update(GIT_AUTHOR_NAME="a", GIT_AUTHOR_EMAIL="a@x", GIT_COMMITTER_NAME="a")
ENV.update(GIT_COMMITTER_EMAIL="a@x")


def git(git_dir: Path, *args: str, stdin: bytes | None = None, check: bool = True) -> str:
    return subprocess.run(
        ["git", f"--git-dir={git_dir}", *args],
        input=stdin,
        env=ENV,
        capture_output=True,
        check=check,
    ).stdout.decode()


def commit(git_dir: Path, branch: str, text: str) -> str:
    """A commit of one file on top of branch (or a root one), with branch moved to it."""
    blob = git(git_dir, "hash-object", "-w", "--stdin", stdin=text.encode()).strip()
    tree = git(git_dir, "mktree", stdin=f"100644 blob {blob}\tf\n".encode()).strip()
    parent = git(git_dir, "rev-parse", "-q", "--verify", f"refs/heads/{branch}", check=False)
    oid = git(git_dir, "commit-tree", tree, "-m", text, *(["-p", parent.strip()] if parent else []))
    git(git_dir, "update-ref", f"refs/heads/{branch}", oid.strip())
    return oid.strip()


def test_the_tip_is_what_git_and_dulwich_resolve_loose_packed_and_moved(tmp_path):
    repo = tmp_path / "r.git"
    GitRepo.init_bare(repo, "main").close()
    assert branch_tip(repo, "main") is None  # unborn: the thread path says "empty"
    first = commit(repo, "main", "one")
    commit(repo, "feature/x", "x")
    assert branch_tip(repo, "main") == first
    assert branch_tip(repo, "feature") is None  # a folder where the ref would be
    git(repo, "pack-refs", "--all")
    assert not (repo / "refs/heads/main").exists()
    assert branch_tip(repo, "main") == first  # from packed-refs
    second = commit(repo, "main", "two")  # a loose ref over the packed one wins
    assert branch_tip(repo, "main") == second
    with GitRepo(repo) as g:
        for name in ("main", "feature/x"):
            assert branch_tip(repo, name) == g.resolve(name)
    git(repo, "pack-refs", "--all")
    git(repo, "update-ref", "-d", "refs/heads/feature/x")
    assert branch_tip(repo, "feature/x") is None  # gone from packed-refs too
    git(repo, "symbolic-ref", "refs/heads/alias", "refs/heads/main")
    assert branch_tip(repo, "alias") is None  # a symbolic ref: dulwich follows it
    for odd in ("../HEAD", "a..b", "-x", "HEAD", first, "main.lock", ""):
        assert branch_tip(repo, odd) is None, odd
    assert branch_tip(tmp_path / "missing.git", "main") is None


def test_a_prune_replaces_the_stamp(tmp_path):
    repo = tmp_path / "r.git"
    GitRepo.init_bare(repo, "main").close()
    assert prune_stamp(repo) is None
    first = ensure_prune_stamp(repo)
    assert first is not None and prune_stamp(repo) == first == ensure_prune_stamp(repo)
    replace_prune_stamp(repo)
    assert prune_stamp(repo) not in (None, first)
    commit(repo, "main", "one")
    before = prune_stamp(repo)
    with GitRepo(repo) as g:
        g.prune_unreachable()
    assert prune_stamp(repo) != before
    assert [p.name for p in repo.iterdir() if p.name.startswith("hubsvc-pruned.")] == []


def test_answers_are_bounded_by_weight():
    kept = Answers(limit=100, most_one=60)
    kept.put("a", 1, 50)
    kept.put("b", 2, 40)
    assert kept.get("a") == 1  # a is now the most recent
    kept.put("c", 3, 30)  # over 100: b, the least recent, goes
    assert (kept.get("a"), kept.get("b"), kept.get("c")) == (1, None, 3)
    kept.put("big", 4, 61)
    assert kept.get("big") is None
    assert kept.weight == 80
