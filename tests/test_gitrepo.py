"""GitRepo against repositories built with the real git CLI."""

from __future__ import annotations

import base64
import importlib.util
import os
import re
import shutil
import struct
import subprocess
import threading
import time
import zlib
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

from hubsvc.errors import BadRequest, Conflict, NotFound
from hubsvc.git import diffs as gitdiffs
from hubsvc.git.objects import clean_path
from hubsvc.git.repo import GitRepo

ROOT = Path(__file__).resolve().parents[1]
FAKE_SUBMODULE = "0123456789abcdef0123456789abcdef01234567"
UNKNOWN_OID = "f" * 40
BAD_PATHS = [
    "..",
    "a/../b",
    "a/..",
    "../a",
    "/etc/passwd",
    "/",
    "a\\b",
    "..\\a",
    "a\x00b",
    "./a",
    "a/./b",
    "a/.",
    "x" * 5000,
]


def git_env(home: Path, when: int = 1767323045) -> dict[str, str]:
    """An environment that makes commits reproducible and ignores user config."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        HOME=str(home),
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_AUTHOR_NAME="Ada Lovelace",
        GIT_AUTHOR_EMAIL="ada@example.com",
        GIT_COMMITTER_NAME="Grace Hopper",
        GIT_COMMITTER_EMAIL="grace@example.com",
        GIT_AUTHOR_DATE=f"{when} +0200",
        GIT_COMMITTER_DATE=f"{when + 61} -0330",
    )
    return env


def run(
    *args: str, cwd: Path | None = None, env: dict | None = None, text: bool = True
) -> str | bytes:
    done = subprocess.run(
        ["git", *args],
        cwd=cwd,
        env=env or git_env(Path("/nonexistent")),
        capture_output=True,
        check=True,
    )
    return done.stdout.decode("utf-8", "replace") if text else done.stdout


def tiny_png() -> bytes:
    """A valid 1x1 PNG built by hand."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00"))
        + chunk(b"IEND", b"")
    )


def iso(epoch: str) -> str:
    return datetime.fromtimestamp(int(epoch), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def raw_message(git_dir: Path, oid: str) -> str:
    """A commit's message exactly as stored."""
    raw = run(f"--git-dir={git_dir}", "cat-file", "commit", oid)
    return raw.split("\n\n", 1)[1]


@pytest.fixture(scope="module")
def fx(tmp_path_factory):
    """A bare repository (made by init_bare, filled by git push) and its work tree."""
    base = tmp_path_factory.mktemp("gitrepo")
    work = base / "work"
    hours = iter(range(1, 1000))

    def env() -> dict:
        return git_env(base, 1767323045 + 3600 * next(hours))

    def git(*args: str) -> str:
        return run(*args, cwd=work, env=env())

    def write(path: str, data: bytes | str) -> None:
        target = work / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data.encode() if isinstance(data, str) else data)

    work.mkdir()
    git("init", "--quiet", "--initial-branch=main")
    main_py = "".join(f"line {n}\n" for n in range(1, 13))
    write("README.md", "# Demo\n\nHello.\n")
    write("src/app/main.py", main_py)
    write("src/app/util.py", "def util():\n    return 1\n")
    write("src/app/deep/er/x.txt", "deep\n")
    write("docs/guide.md", "".join(f"Guide line {n}.\n" for n in range(30)))
    write("data.bin", bytes(range(256)) * 4)
    write("logo.png", tiny_png())
    write("latin1.txt", "caf\u00e9\n".encode("latin-1"))
    write("icon.svg", '<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>\n')
    write("old.txt", "to be deleted\n")
    write("mac.txt", b"one\rtwo\rthree\n" + b"".join(b"row %d\n" % n for n in range(9)))
    write("was_binary.dat", b"\x00\x01\x02")
    os.symlink("README.md", work / "link")
    git("add", "-A")
    git("update-index", "--add", "--cacheinfo", f"160000,{FAKE_SUBMODULE},vendor/lib")
    (work / "vendor" / "lib").mkdir(parents=True)  # an unpopulated submodule, so -a keeps it
    git("commit", "--quiet", "-m", "Initial import\n\nWith \u00fcn\u00efcode body.")
    git("branch", "topic/x")
    git("tag", "light")

    write("src/app/main.py", main_py.replace("line 3\n", "line three\n") + "line 13\nline 14\n")
    git("mv", "docs/guide.md", "docs/manual.md")
    write("data.bin", bytes(range(256)) * 5)
    write("mac.txt", b"one\rtwo\rTHREE\n" + b"".join(b"row %d\n" % n for n in range(9)))
    first = git("rev-parse", "HEAD").strip()
    # A gitlink whose commit is in this repository: file() must still refuse it.
    git("update-index", "--add", "--cacheinfo", f"160000,{first},vendor/self")
    (work / "vendor" / "self").mkdir()
    git("commit", "--quiet", "-am", "Rename guide, edit main")
    git("tag", "-a", "v1.0", "-m", "Version 1.0")

    git("checkout", "--quiet", "-b", "feature")
    write("feature.txt", "a feature\n")
    write("src/app/util.py", "def util():\n    return 2\n")
    git("add", "-A")
    git("commit", "--quiet", "-m", "Add feature")

    git("checkout", "--quiet", "main")
    write("README.md", "# Demo\n\nHello, world.\n")
    write("was_binary.dat", "now text\n")
    git("rm", "--quiet", "old.txt")
    git("commit", "--quiet", "-am", "Edit README")
    git("merge", "--quiet", "--no-ff", "-m", "Merge branch 'feature'", "feature")

    bare = base / "hosted" / "demo.git"
    GitRepo.init_bare(bare, "main").close()
    # Keep pushed objects packed, as a real push of any size leaves them.
    run("config", "--file", str(bare / "config"), "receive.unpackLimit", "1")
    git("push", "--quiet", str(bare), "--all")
    git("push", "--quiet", str(bare), "--tags")
    oids = run("log", "--format=%H", "main", cwd=work).split()
    return SimpleNamespace(
        base=base,
        work=work,
        bare=bare,
        git=git,
        merge=oids[0],
        readme=oids[1],
        feature=run("rev-parse", "feature", cwd=work).strip(),
        second=oids[-2],
        first=oids[-1],
    )


@pytest.fixture
def repo(fx):
    with GitRepo(fx.bare) as opened:
        yield opened


def bare_git(fx, *args: str, text: bool = True):
    return run(f"--git-dir={fx.bare}", *args, text=text)


def copy_bare(fx, dest: Path) -> Path:
    shutil.copytree(fx.bare, dest, symlinks=True)
    return dest


# -- creating -------------------------------------------------------------------


def test_init_bare_makes_an_empty_repository(tmp_path):
    path = tmp_path / "nested" / "dirs" / "r.git"
    with GitRepo.init_bare(path, "trunk") as repo:
        assert run(f"--git-dir={path}", "symbolic-ref", "HEAD").strip() == "refs/heads/trunk"
        config = path / "config"
        assert run("config", "--file", str(config), "--bool", "http.receivepack").strip() == "true"
        assert (
            run("config", "--file", str(config), "--bool", "receive.denyNonFastForwards").strip()
            == "false"
        )
        assert repo.is_empty()
        assert repo.default_branch() == "trunk"
        assert repo.branches() == []
        assert repo.head_oids() == {}
        assert repo.resolve("trunk") is None
        assert repo.commits("trunk", 30, 0) == ([], False)
        assert repo.commits("no-such", 30, 5) == ([], False)
        assert repo.tree("trunk", "") == []
        with pytest.raises(NotFound):
            repo.file("trunk", "README.md")
        with pytest.raises(NotFound):
            repo.blob_stream_info("trunk", "README.md")
        with pytest.raises(NotFound):
            repo.diff(UNKNOWN_OID)
        with pytest.raises(BadRequest):
            repo.tree("trunk", "../x")


def test_init_bare_refuses_bad_branch_and_existing_content(tmp_path):
    for name in ("", "-x", "a..b", "a b", "HEAD", "x.lock", "a:b"):
        with pytest.raises(BadRequest):
            GitRepo.init_bare(tmp_path / f"r{len(name)}.git", name)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep").write_text("x")
    with pytest.raises(FileExistsError):
        GitRepo.init_bare(tmp_path / "full")


def test_set_default_branch(tmp_path):
    path = tmp_path / "r.git"
    with GitRepo.init_bare(path) as repo:
        repo.set_default_branch("dev/next")
        assert run(f"--git-dir={path}", "symbolic-ref", "HEAD").strip() == "refs/heads/dev/next"
        assert repo.default_branch() == "dev/next"
        for bad in ("", "..", "-f", "a~1", "x\x00"):
            with pytest.raises(BadRequest):
                repo.set_default_branch(bad)
        assert repo.default_branch() == "dev/next"


def test_auto_init_commit_is_readable_by_git(tmp_path):
    path = tmp_path / "r.git"
    with GitRepo.init_bare(path) as repo:
        oid = repo.auto_init("main", "Ada <Lovelace>", "ada@example.com", "# Hi \u2603\n")
        log = run(f"--git-dir={path}", "log", "--format=%H|%an|%ae|%s", "main").splitlines()
        assert log == [f"{oid}|Ada Lovelace|ada@example.com|Initial commit"]
        readme = run(f"--git-dir={path}", "cat-file", "blob", "main:README.md", text=False)
        assert readme == "# Hi \u2603\n".encode()
        run(f"--git-dir={path}", "fsck", "--strict")
        assert not repo.is_empty()
        assert repo.resolve("main") == oid
        blob = run(f"--git-dir={path}", "rev-parse", "main:README.md").strip()
        assert repo.tree("main", "") == [
            {  # a loose object, not in a pack
                "name": "README.md",
                "path": "README.md",
                "type": "file",
                "size": len(readme),
                "oid": blob,
                "mode": "100644",
            }
        ]
        with pytest.raises(Conflict):
            repo.auto_init("main", "Ada", "ada@example.com", "again")


def test_clone_bare_is_independent_of_its_source(fx, tmp_path):
    source = copy_bare(fx, tmp_path / "source.git")
    run(f"--git-dir={source}", "symbolic-ref", "HEAD", "refs/heads/feature")
    refs = run(f"--git-dir={source}", "show-ref", "-d")
    fork_path = tmp_path / "forks" / "fork.git"
    GitRepo.clone_bare(source, fork_path).close()
    shutil.rmtree(source)

    assert not (fork_path / "objects" / "info" / "alternates").exists()
    assert not (fork_path / "hooks").exists()  # no sample hooks from git's templates
    assert run(f"--git-dir={fork_path}", "show-ref", "-d") == refs
    assert run(f"--git-dir={fork_path}", "symbolic-ref", "HEAD").strip() == "refs/heads/feature"
    config = str(fork_path / "config")
    assert "remote" not in run("config", "--file", config, "--list")
    assert run("config", "--file", config, "--bool", "http.receivepack").strip() == "true"
    fsck = subprocess.run(
        ["git", f"--git-dir={fork_path}", "fsck", "--full", "--strict"],
        capture_output=True,
        text=True,
    )
    assert fsck.returncode == 0 and "missing" not in fsck.stdout + fsck.stderr
    with GitRepo(fork_path) as fork:
        assert [c["oid"] for c in fork.commits("main", 100, 0)[0]] == bare_git(
            fx, "log", "--format=%H", "main"
        ).split()
        assert fork.file("main", "README.md")["content"] == "# Demo\n\nHello, world.\n"


def test_clone_bare_of_an_empty_repository_keeps_head(tmp_path):
    GitRepo.init_bare(tmp_path / "empty.git", "trunk").close()
    with GitRepo.clone_bare(tmp_path / "empty.git", tmp_path / "fork.git") as fork:
        assert fork.is_empty()
        assert fork.default_branch() == "trunk"


# -- refs -----------------------------------------------------------------------


def test_branches_match_git(fx, repo):
    names = bare_git(fx, "for-each-ref", "--format=%(refname:short)", "refs/heads").split()
    branches = repo.branches()
    assert [b["name"] for b in branches] == sorted(names) == ["feature", "main", "topic/x"]
    for branch in branches:
        oid, ctime = bare_git(fx, "log", "-1", "--format=%H %ct", branch["name"]).split()
        assert branch["commit"] == {
            "oid": oid,
            "message": raw_message(fx.bare, oid),
            "date": iso(ctime),
        }
        assert branch["isDefault"] is (branch["name"] == "main")
    assert branches[2]["commit"]["message"] == "Initial import\n\nWith \u00fcn\u00efcode body.\n"


def test_head_oids_match_show_ref(fx, repo):
    expected = {}
    for line in bare_git(fx, "show-ref", "--heads", "--tags", "-d").splitlines():
        oid, ref = line.split()
        expected[ref.removesuffix("^{}")] = oid  # the peeled line comes last and wins
    assert repo.head_oids() == expected
    assert expected["refs/tags/v1.0"] == fx.second
    assert bare_git(fx, "rev-parse", "refs/tags/v1.0").strip() != fx.second


def test_resolve_names_tags_and_oids(fx, repo):
    assert repo.resolve("main") == fx.merge
    assert repo.resolve("topic/x") == fx.first
    assert repo.resolve("v1.0") == fx.second
    assert repo.resolve("light") == fx.first
    assert repo.resolve(fx.readme) == fx.readme
    assert repo.resolve(fx.readme.upper()) == fx.readme
    tree = bare_git(fx, "rev-parse", "main^{tree}").strip()
    blob = bare_git(fx, "rev-parse", "main:README.md").strip()
    assert repo.resolve(fx.readme[:12]) == fx.readme  # an abbreviated oid, as in git
    assert repo.resolve(fx.readme[:7].upper()) == fx.readme
    for rev in (
        "nope",
        UNKNOWN_OID,
        tree,
        blob,
        fx.readme[:6],
        tree[:12],
        "refs/heads/main",
        "..",
        "main..feature",
        "-main",
        "--all",
        "main~1",
        "main^",
        "HEAD",
        "@",
        "",
        "a b",
        "refs/../x",
        "x:y",
        "main.lock",
        "feature/",
        "ma\x00in",
        "main@{0}",
    ):
        assert repo.resolve(rev) is None, rev


# -- history --------------------------------------------------------------------


def test_commits_match_git_log(fx, repo):
    expected = bare_git(fx, "log", "--format=%H", "main").split()
    items, more = repo.commits("main", 100, 0)
    assert [c["oid"] for c in items] == expected and more is False
    fmt = "%H%x00%P%x00%an%x00%ae%x00%at%x00%cn%x00%ce%x00%ct"
    for item in items:
        oid, parents, an, ae, at, cn, ce, ct = (
            bare_git(fx, "log", "-1", f"--format={fmt}", item["oid"]).rstrip("\n").split("\x00")
        )
        assert item == {
            "oid": oid,
            "message": raw_message(fx.bare, oid),
            "author": {"name": an, "email": ae, "date": iso(at)},
            "committer": {"name": cn, "email": ce, "date": iso(ct)},
            "parents": parents.split(),
            "timestamp": int(at) * 1000,
        }
        # The list (git CLI) and the diff (dulwich) must describe a commit alike.
        assert repo.diff(oid)["commit"] == item
    assert items[0]["parents"] == [fx.readme, fx.feature]
    author_iso = bare_git(fx, "log", "-1", "--format=%aI", fx.first).strip()
    assert author_iso.endswith("+02:00")
    utc = datetime.fromisoformat(author_iso).astimezone(UTC)
    assert items[-1]["author"]["date"] == utc.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_dates_are_utc_whatever_the_local_zone(fx, repo, monkeypatch):
    expected = iso(bare_git(fx, "log", "-1", "--format=%ct", "main").strip())
    monkeypatch.setenv("TZ", "Asia/Kathmandu")
    time.tzset()
    try:
        assert repo.commits("main", 1, 0)[0][0]["committer"]["date"] == expected
        assert repo.diff(fx.merge)["commit"]["committer"]["date"] == expected
        assert repo.branches()[1]["commit"]["date"] == expected
    finally:
        monkeypatch.undo()
        time.tzset()


def test_commits_pages_and_revs(fx, repo):
    expected = bare_git(fx, "log", "--format=%H", "main").split()
    total = len(expected)
    page, more = repo.commits("main", 2, 1)
    assert [c["oid"] for c in page] == expected[1:3] and more is True
    assert repo.commits("main", total, 0)[1] is False
    assert repo.commits("main", total - 1, 0)[1] is True
    assert repo.commits("main", 2, total - 2)[1] is False
    assert repo.commits("main", 5, total) == ([], False)
    assert [c["oid"] for c in repo.commits("v1.0", 10, 0)[0]] == [fx.second, fx.first]
    assert [c["oid"] for c in repo.commits(fx.readme, 1, 0)[0]] == [fx.readme]
    feature = bare_git(fx, "log", "--format=%H", "feature").split()
    assert [c["oid"] for c in repo.commits("feature", 10, 0)[0]] == feature
    for rev in ("nope", UNKNOWN_OID, "../main", "-n1"):
        with pytest.raises(NotFound):
            repo.commits(rev, 10, 0)
    with pytest.raises(BadRequest):
        repo.commits("main", -1, 0)


def test_commits_between_matches_rev_list(fx, repo):
    expected = bare_git(fx, "rev-list", fx.merge, f"^{fx.second}").split()
    items, total = repo.commits_between(fx.second, fx.merge, 10)
    assert [c["oid"] for c in items] == expected and total == len(expected) == 3
    items, total = repo.commits_between(fx.second, fx.merge, 1)
    assert [c["oid"] for c in items] == expected[:1] and total == 3
    everything = bare_git(fx, "rev-list", fx.merge).split()
    for old in (None, "0" * 40):
        items, total = repo.commits_between(old, fx.merge, 100)
        assert [c["oid"] for c in items] == everything and total == len(everything)
    assert repo.commits_between(fx.merge, fx.merge, 5) == ([], 0)
    assert repo.commits_between(fx.merge, "0" * 40, 5) == ([], 0)
    with pytest.raises(BadRequest):
        repo.commits_between("--all", fx.merge, 5)
    with pytest.raises(BadRequest):
        repo.commits_between(None, "main", 5)


def test_write_commit_graph(fx, tmp_path):
    path = copy_bare(fx, tmp_path / "r.git")
    with GitRepo(path) as repo:
        before = repo.commits("main", 3, 1)
        repo.write_commit_graph()
        assert (path / "objects" / "info" / "commit-graph").is_file()
        run(f"--git-dir={path}", "commit-graph", "verify")
        assert repo.commits("main", 3, 1) == before


# -- diffs ----------------------------------------------------------------------


def git_hunks(fx, *args: str) -> str:
    """The hunks of `git diff-tree -p` for one file, without the file headers."""
    out = bare_git(fx, "diff-tree", "-p", "-M", "--root", *args)
    hunks = out[out.index("@@") :] if "@@" in out else ""
    # GitRepo leaves out the enclosing-function hint git puts after a hunk header.
    return re.sub(r"(?m)^(@@ [^@]* @@).*$", r"\1", hunks)


def numstat(fx, *revs: str) -> dict[str, tuple[str, str]]:
    out = bare_git(
        fx, "diff-tree", "-r", "--root", "--numstat", "--no-renames", "--no-commit-id", *revs
    )
    return {line.split("\t")[2]: tuple(line.split("\t")[:2]) for line in out.splitlines()}


def test_diff_of_the_first_commit_adds_everything(fx, repo):
    result = repo.diff(fx.first)
    files = {f["path"]: f for f in result["files"]}
    expected = numstat(fx, fx.first)
    assert sorted(files) == [f["path"] for f in result["files"]] == sorted(expected)
    for path, (adds, dels) in expected.items():
        item = files[path]
        assert item["status"] == "added" and item["oldPath"] is None, path
        if adds == "-":
            assert item["binary"] is True and item["patch"] == "", path
            assert item["additions"] == item["deletions"] == 0
        else:
            assert item["binary"] is False, path
            assert (item["additions"], item["deletions"]) == (int(adds), int(dels)), path
            assert item["patch"] == git_hunks(fx, fx.first, "--", path), path
    assert files["link"]["patch"] == "@@ -0,0 +1 @@\n+README.md\n\\ No newline at end of file\n"
    assert files["vendor/lib"]["patch"] == f"@@ -0,0 +1 @@\n+Subproject commit {FAKE_SUBMODULE}\n"
    assert {f["path"] for f in result["files"] if f["binary"]} == {
        "data.bin",
        "logo.png",
        "was_binary.dat",
    }
    assert result["stats"] == {
        "additions": sum(f["additions"] for f in result["files"]),
        "deletions": 0,
        "filesChanged": len(expected),
    }
    assert result["commit"]["oid"] == fx.first and result["commit"]["parents"] == []


def test_diff_detects_renames_and_modifications(fx, repo):
    files = {f["path"]: f for f in repo.diff(fx.second)["files"]}
    status = bare_git(fx, "diff-tree", "-r", "-M", "--name-status", fx.second).split()
    assert status[0] == fx.second and "R100" in status
    assert set(files) == {"docs/manual.md", "src/app/main.py", "data.bin", "mac.txt", "vendor/self"}
    assert files["mac.txt"]["patch"] == git_hunks(fx, fx.second, "--", "mac.txt")
    assert (files["mac.txt"]["additions"], files["mac.txt"]["deletions"]) == (1, 1)
    renamed = files["docs/manual.md"]
    assert (renamed["status"], renamed["oldPath"]) == ("renamed", "docs/guide.md")
    assert (renamed["additions"], renamed["deletions"], renamed["patch"]) == (0, 0, "")
    edited = files["src/app/main.py"]
    assert (edited["status"], edited["oldPath"]) == ("modified", "src/app/main.py")
    assert (edited["additions"], edited["deletions"]) == (3, 1)
    assert edited["patch"] == git_hunks(fx, fx.second, "--", "src/app/main.py")
    assert edited["patch"].count("@@ -") == 2
    binary = files["data.bin"]
    assert binary["status"] == "modified" and binary["binary"] is True
    assert (binary["additions"], binary["deletions"], binary["patch"]) == (0, 0, "")
    assert "truncated" not in edited


def test_diff_of_a_merge_is_against_the_first_parent(fx, repo):
    result = repo.diff(fx.merge)
    changed = bare_git(fx, "diff-tree", "-r", "--name-status", fx.readme, fx.merge).split()
    assert changed == ["A", "feature.txt", "M", "src/app/util.py"]
    assert [(f["path"], f["status"]) for f in result["files"]] == [
        ("feature.txt", "added"),
        ("src/app/util.py", "modified"),
    ]
    assert result["stats"] == {"additions": 2, "deletions": 1, "filesChanged": 2}
    files = repo.diff(fx.readme)["files"]
    assert [(f["path"], f["status"], f["oldPath"]) for f in files if f["status"] == "deleted"] == [
        ("old.txt", "deleted", "old.txt")
    ]
    # Binary on either side makes the change binary, as in git.
    was_binary = next(f for f in files if f["path"] == "was_binary.dat")
    assert (was_binary["binary"], was_binary["patch"], was_binary["additions"]) == (True, "", 0)
    assert numstat(fx, fx.readme)["was_binary.dat"] == ("-", "-")


def test_diff_truncates_long_patches(fx, repo, monkeypatch):
    monkeypatch.setattr(gitdiffs, "PATCH_LIMIT", 40)
    item = next(f for f in repo.diff(fx.first)["files"] if f["path"] == "docs/guide.md")
    assert item["truncated"] is True
    assert 0 < len(item["patch"].encode()) <= 40
    assert item["additions"] == 30
    monkeypatch.setattr(gitdiffs, "DIFF_MAX_BLOB", 100)
    item = next(f for f in repo.diff(fx.first)["files"] if f["path"] == "docs/guide.md")
    assert (item["truncated"], item["patch"], item["additions"]) == (True, "", 0)
    readme = next(f for f in repo.diff(fx.first)["files"] if f["path"] == "README.md")
    assert readme["additions"] == 3 and "truncated" not in readme


def test_diff_rejects_malformed_and_unknown_oids(fx, repo):
    for bad in ("xyz", fx.merge[:12], fx.merge + "0", "g" * 40, "", "-" + fx.merge[1:]):
        with pytest.raises(BadRequest):
            repo.diff(bad)
    tag_object = bare_git(fx, "rev-parse", "refs/tags/v1.0").strip()
    tree = bare_git(fx, "rev-parse", "main^{tree}").strip()
    blob = bare_git(fx, "rev-parse", "main:README.md").strip()
    for missing in (UNKNOWN_OID, tag_object, tree, blob):
        with pytest.raises(NotFound):
            repo.diff(missing)
    assert repo.diff(fx.merge.upper())["commit"]["oid"] == fx.merge


# -- trees and files ------------------------------------------------------------

KINDS = {"tree": "dir", "commit": "submodule"}


def ls_tree(fx, treeish: str, prefix: str = "") -> list[dict]:
    """`git ls-tree -l` as tree entries, in the API's order."""
    entries = []
    for line in bare_git(fx, "ls-tree", "-l", treeish).splitlines():
        meta, name = line.split("\t")
        mode, kind, oid, size = meta.split()
        kind = KINDS.get(kind, "symlink" if mode == "120000" else "file")
        entries.append(
            {
                "name": name,
                "path": prefix + name,
                "type": kind,
                "size": None if size == "-" else int(size),
                "oid": oid,
                "mode": mode,
            }
        )
    return sorted(entries, key=lambda e: (e["type"] != "dir", e["name"]))


def test_tree_root_matches_ls_tree(fx, repo):
    entries = repo.tree("main", "")
    assert entries == ls_tree(fx, "main")
    assert [e["name"] for e in entries] == [
        "docs",
        "src",
        "vendor",
        "README.md",
        "data.bin",
        "feature.txt",
        "icon.svg",
        "latin1.txt",
        "link",
        "logo.png",
        "mac.txt",
        "was_binary.dat",
    ]
    vendor = repo.tree("main", "vendor")
    assert vendor == [
        {
            "name": "lib",
            "path": "vendor/lib",
            "type": "submodule",
            "size": None,
            "oid": FAKE_SUBMODULE,
            "mode": "160000",
        },
        {
            "name": "self",
            "path": "vendor/self",
            "type": "submodule",
            "size": None,
            "oid": fx.first,
            "mode": "160000",
        },
    ]
    link = next(e for e in entries if e["name"] == "link")
    assert (link["type"], link["size"], link["mode"]) == ("symlink", 9, "120000")


def test_tree_nested_paths_and_revs(fx, repo):
    assert repo.tree("main", "src/app/") == ls_tree(fx, "main:src/app", "src/app/")
    assert repo.tree("main", "src//app") == repo.tree("main", "src/app")
    assert repo.tree("main", "src/app/deep/er") == ls_tree(
        fx, "main:src/app/deep/er", "src/app/deep/er/"
    )
    assert [e["name"] for e in repo.tree("v1.0", "docs")] == ["manual.md"]
    assert [e["name"] for e in repo.tree("light", "docs")] == ["guide.md"]
    assert repo.tree(fx.first, "") == ls_tree(fx, fx.first)


def test_tree_errors(fx, repo):
    for path in (
        "README.md",
        "missing",
        "src/missing",
        "src/app/main.py/x",
        "vendor/lib",
        "vendor/self",
        "vendor/self/README.md",
        "link",
        "link/x",
    ):
        with pytest.raises(NotFound):
            repo.tree("main", path)
    with pytest.raises(NotFound, match="branch not found"):
        repo.tree("nope", "")
    for path in BAD_PATHS:
        with pytest.raises(BadRequest):
            repo.tree("main", path)


def test_clean_path():
    assert clean_path("") == []
    assert clean_path("a/b/") == ["a", "b"]
    assert clean_path("a//b") == ["a", "b"]
    assert clean_path("..a/b..") == ["..a", "b.."]
    assert clean_path("\u00e9t\u00e9/x") == ["\u00e9t\u00e9", "x"]
    for path in BAD_PATHS + ["\ud800"]:
        with pytest.raises(BadRequest, match="invalid path"):
            clean_path(path)


def cat_file(fx, spec: str) -> bytes:
    return bare_git(fx, "cat-file", "blob", spec, text=False)


def test_file_text(fx, repo):
    item = repo.file("main", "src/app/main.py")
    raw = cat_file(fx, "main:src/app/main.py")
    assert item == {
        "path": "src/app/main.py",
        "name": "main.py",
        "size": len(raw),
        "oid": bare_git(fx, "rev-parse", "main:src/app/main.py").strip(),
        "isBinary": False,
        "encoding": "utf-8",
        "content": raw.decode(),
    }
    assert repo.file("light", "docs/guide.md")["content"].startswith("Guide line 0.")
    assert repo.file("main", "link")["content"] == "README.md"
    assert repo.file("main", "icon.svg")["encoding"] == "utf-8"


def test_file_binary_is_base64(fx, repo):
    for path in ("data.bin", "logo.png", "latin1.txt"):
        item = repo.file("main", path)
        raw = cat_file(fx, f"main:{path}")
        assert item["isBinary"] is True and item["encoding"] == "base64", path
        assert base64.b64decode(item["content"]) == raw and item["size"] == len(raw)


def test_file_errors(fx, repo):
    for path in ("", "src", "src/app/", "missing.txt", "vendor/lib", "vendor/self", "README.md/x"):
        with pytest.raises(NotFound):
            repo.file("main", path)
    with pytest.raises(NotFound, match="branch not found"):
        repo.file("nope", "README.md")
    for path in BAD_PATHS:
        with pytest.raises(BadRequest):
            repo.file("main", path)
        with pytest.raises(BadRequest):
            repo.blob_stream_info("main", path)


def test_blob_stream_info_content_types(fx, repo):
    expected = {
        "README.md": "text/plain; charset=utf-8",
        "icon.svg": "text/plain; charset=utf-8",
        "logo.png": "image/png",
        "data.bin": "application/octet-stream",
        "latin1.txt": "application/octet-stream",
    }
    for path, content_type in expected.items():
        data, got = repo.blob_stream_info("main", path)
        assert got == content_type, path
        assert data == cat_file(fx, f"main:{path}")
    with pytest.raises(NotFound):
        repo.blob_stream_info("main", "src")


# -- living with other processes and threads ------------------------------------


def test_an_open_instance_sees_later_pushes(fx, tmp_path):
    path = copy_bare(fx, tmp_path / "r.git")
    # A pack, not loose objects, so dulwich must notice a pack it has not opened.
    run("config", "--file", str(path / "config"), "receive.unpackLimit", "1")
    with GitRepo(path) as repo:
        assert repo.resolve("later") is None and repo.tree("main", "")
        new = fx.git("commit-tree", f"{fx.merge}^{{tree}}", "-p", fx.merge, "-m", "Later").strip()
        fx.git("push", "--quiet", str(path), f"{new}:refs/heads/later")
        assert repo.resolve("later") == new
        assert repo.diff(new)["files"] == []
        assert [c["oid"] for c in repo.commits("later", 2, 0)[0]] == [new, fx.merge]


def test_one_instance_shared_by_threads(fx, repo):
    def work() -> tuple:
        return (
            repo.tree("main", "src/app"),
            repo.file("main", "data.bin"),
            repo.diff(fx.second),
            repo.branches(),
        )

    expected = work()
    results: list = []
    threads = [threading.Thread(target=lambda: results.append(work())) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [expected] * 8


# -- the benchmark generator ----------------------------------------------------


def test_make_repo_generates_history(tmp_path):
    script = ROOT / "benchmarks" / "make_repo.py"
    spec = importlib.util.spec_from_file_location("make_repo", script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path = module.make_repo(tmp_path / "bench.git", commits=40, files=12)
    assert run(f"--git-dir={path}", "rev-list", "--count", "main").strip() == "40"
    files = run(f"--git-dir={path}", "ls-tree", "-r", "--name-only", "main").split()
    assert len(files) == 12 and all("/" in name for name in files)
    with GitRepo(path) as repo:
        page, more = repo.commits("main", 30, 0)
        assert len(page) == 30 and more is True
        # fast-import stores most blobs as deltas: sizes come from delta headers.
        for folder in {name.split("/")[0] for name in files}:
            listing = run(f"--git-dir={path}", "ls-tree", "-l", f"main:{folder}")
            expected = {line.split("\t")[1]: line.split()[3] for line in listing.splitlines()}
            got = {
                e["name"]: str(e["size"] if e["size"] is not None else "-")
                for e in repo.tree("main", folder)
            }
            assert got == expected


def test_a_command_that_overruns_is_killed_and_reported():
    from hubsvc.git.process import GitError, _spawn

    started = time.monotonic()
    with pytest.raises(GitError, match="timed out"):
        _spawn(["sleep", "5"], None, dict(os.environ), 0.2)
    assert time.monotonic() - started < 2
    assert _spawn(["true"], None, dict(os.environ), 5)[0] == 0


def test_one_watchdog_kills_each_overrun_in_deadline_order():
    from hubsvc.git.process import _Watchdog

    watchdog = _Watchdog()
    procs = [subprocess.Popen(["sleep", "30"]) for _ in range(3)]
    late = watchdog.watch(procs[0], 1.0)
    spared = watchdog.watch(procs[1], 0.3)
    soon = watchdog.watch(procs[2], 0.2)  # the earliest, added last: the thread wakes for it
    spared.cancel()
    assert procs[2].wait(5) == -9 and soon.fired.is_set()
    assert procs[0].poll() is None and not late.fired.is_set()  # its deadline is 0.8 s on
    assert procs[0].wait(5) == -9 and late.fired.is_set()
    assert procs[1].poll() is None and not spared.fired.is_set()
    procs[1].kill()
    procs[1].wait()
    late.cancel()  # after it fired: nothing changes
    assert late.fired.is_set() and not late.cancelled
    # Cancelled deadlines do not pile up: the heap is rebuilt once they are half of it.
    for _ in range(200):
        watchdog.watch(procs[1], 60).cancel()
    assert len(watchdog._heap) < 100
