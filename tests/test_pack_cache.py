"""The pack cache (uploadpack.packObjectsHook) with the real git CLI against the real server."""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
from pathlib import Path

from hubsvc.app import create_app
from hubsvc.git.answers import replace_prune_stamp
from hubsvc.git.files import REPO_FILES
from hubsvc.git.pack_cache import JOURNAL, PackCache
from hubsvc.metrics import REGISTRY

from .conftest import make_config, sign_up
from .gitcli import git, remote
from .test_git_http import pushed_repo
from .test_repos import create


def cache_of(client) -> PackCache:
    cache = client.app[REPO_FILES].pack_cache
    assert cache is not None and cache.enabled
    return cache


def packs(cache: PackCache) -> dict[str, int]:
    """The kept packs by name, with their inode: a miss renames a new file into place."""
    return {p.name: p.stat().st_ino for p in cache.folder.glob("*.pack")}


def journal(cache: PackCache) -> list[str]:
    """The hook's hit/miss words since the folder was made (sweeps are held off by the test)."""
    path = cache.folder / JOURNAL
    return [line.split()[0] for line in path.read_text().splitlines()] if path.exists() else []


def hold_sweeps(cache: PackCache) -> None:
    """No sweep after a fetch while the test reads the journal (a sweep reads and drops it)."""
    cache.sweep_every = float("inf")


async def head_of(clone: Path) -> str:
    return (await git("rev-parse", "HEAD", cwd=clone))[1].strip()


async def test_a_second_identical_clone_is_sent_from_the_cache(client, alice, tmp_path):
    cache = cache_of(client)
    hold_sweeps(cache)
    _, refs = await pushed_repo(client, alice, tmp_path)
    url = remote(client, alice, "alice", "demo")
    await git("clone", "-q", url, str(tmp_path / "one"))
    first = packs(cache)
    assert len(first) == 1 and journal(cache) == ["miss"]
    await git("clone", "-q", url, str(tmp_path / "two"))
    assert packs(cache) == first  # the same file: nothing was computed again
    assert journal(cache) == ["miss", "hit"]
    clone = tmp_path / "two"
    assert await head_of(clone) == refs["refs/heads/main"]
    assert (await git("fsck", "--strict", cwd=clone))[0] == 0
    # Progress flags shape stderr only: a clone showing progress is the same request.
    await git("clone", "--progress", url, str(tmp_path / "three"))
    assert journal(cache) == ["miss", "hit", "hit"]
    # A sweep counts the journal into the metrics.
    before = {r: _counted(r) for r in ("hit", "miss")}
    cache.sweep()
    assert {r: _counted(r) - before[r] for r in before} == {"hit": 2, "miss": 1}


def _counted(result: str) -> float:
    return REGISTRY.get_sample_value("hubsvc_git_pack_cache_total", {"result": result}) or 0.0


async def test_a_push_makes_the_next_clone_miss_and_a_fetch_with_haves_is_right(
    client, alice, tmp_path
):
    cache = cache_of(client)
    hold_sweeps(cache)
    work, _ = await pushed_repo(client, alice, tmp_path)
    url = remote(client, alice, "alice", "demo")
    old = tmp_path / "old"
    await git("clone", "-q", url, str(old))
    (work / "new.txt").write_text("new\n")
    await git("add", "new.txt", cwd=work)
    await git("commit", "-qm", "new", cwd=work)
    await git("push", "-q", url, "main", cwd=work)
    new_head = await head_of(work)

    fresh = tmp_path / "fresh"
    await git("clone", "-q", url, str(fresh))
    assert await head_of(fresh) == new_head
    assert journal(cache) == ["miss", "miss"] and len(packs(cache)) == 2

    # A fetch names what it has: only the new commit's objects come, from pack-objects.
    second_old = tmp_path / "second-old"
    shutil.copytree(old, second_old)  # the same refs and objects: the same haves
    for clone in (old, second_old):
        await git("fetch", "-q", "origin", cwd=clone)
        assert (await git("rev-parse", "origin/main", cwd=clone))[1].strip() == new_head
        assert (await git("fsck", "--strict", cwd=clone))[0] == 0
    # The same haves and wants the second time: the same pack.
    assert journal(cache) == ["miss", "miss", "miss", "hit"]


async def test_concurrent_identical_clones_compute_the_pack_once(client, alice, tmp_path):
    cache = cache_of(client)
    hold_sweeps(cache)
    _, refs = await pushed_repo(client, alice, tmp_path)
    url = remote(client, alice, "alice", "demo")
    clones = [tmp_path / f"c{n}" for n in range(3)]
    await asyncio.gather(*(git("clone", "-q", url, str(c)) for c in clones))
    for clone in clones:
        assert await head_of(clone) == refs["refs/heads/main"]
        assert (await git("fsck", "--strict", cwd=clone))[0] == 0
    # One computed the pack; the others waited for it (or came after it was kept). In any
    # order: a clone arriving between the miss's rename and its journal line logs first.
    assert sorted(journal(cache)) == ["hit", "hit", "miss"]
    (kept,) = packs(cache)
    # No temp file is left behind; the lock file stays until a sweep finds it old.
    assert sorted(p.name for p in cache.folder.iterdir()) == sorted(
        [JOURNAL, kept, kept.replace(".pack", ".lock")]
    )


async def test_no_pack_crosses_repositories_or_a_prune(client, alice, tmp_path):
    cache = cache_of(client)
    hold_sweeps(cache)
    work, _ = await pushed_repo(client, alice, tmp_path, private=True)
    await create(client, alice, "twin", private=True)
    await git("push", "-q", remote(client, alice, "alice", "twin"), "--all", cwd=work)
    await git("push", "-q", remote(client, alice, "alice", "twin"), "--tags", cwd=work)
    for name in ("demo", "twin"):
        await git("clone", "-q", remote(client, alice, "alice", name), str(tmp_path / name))
    # Same objects, same request: still one pack each, kept by the repository.
    assert journal(cache) == ["miss", "miss"] and len(packs(cache)) == 2
    # A prune replaces the stamp: what was kept before it is never sent again.
    files = client.app[REPO_FILES]
    replace_prune_stamp(files.path(1))
    await git("clone", "-q", remote(client, alice, "alice", "demo"), str(tmp_path / "after"))
    assert journal(cache) == ["miss", "miss", "miss"]
    # Only the server's user may read what a private repository's packs hold.
    assert stat.S_IMODE(cache.folder.stat().st_mode) == 0o700
    for pack in cache.folder.glob("*.pack"):
        assert stat.S_IMODE(pack.stat().st_mode) == 0o600


async def test_the_sweep_keeps_the_cache_within_its_bounds(client, alice, tmp_path):
    cache = cache_of(client)
    hold_sweeps(cache)
    work, _ = await pushed_repo(client, alice, tmp_path)
    url = remote(client, alice, "alice", "demo")
    await git("clone", "-q", url, str(tmp_path / "one"))
    (work / "more.txt").write_text("more\n")
    await git("add", "more.txt", cwd=work)
    await git("commit", "-qm", "more", cwd=work)
    await git("push", "-q", url, "main", cwd=work)
    await git("clone", "-q", url, str(tmp_path / "two"))
    kept = sorted(cache.folder.glob("*.pack"), key=lambda p: p.stat().st_mtime)
    assert len(kept) == 2
    older, newer = kept
    os.utime(older, (older.stat().st_atime, older.stat().st_mtime - 60))
    # Stale temp files of a hook that was killed go too; a live hook's stay.
    dead = cache.folder / f"{'0' * 64}.99999.part"
    dead.write_text("x")
    os.utime(dead, (0, 0))
    live = cache.folder / f"{'0' * 64}.99998.part"
    live.write_text("x")
    taken = cache.folder / f"{JOURNAL}.99999.1"  # a sweep killed while counting
    taken.write_text("hit x\n")
    os.utime(taken, (0, 0))

    cache.max_bytes = newer.stat().st_size  # room for one: the oldest goes
    cache.sweep()
    assert [p.name for p in cache.folder.glob("*.pack")] == [newer.name]
    assert not dead.exists() and not taken.exists() and live.exists()
    assert not (cache.folder / JOURNAL).exists()  # counted into the metrics

    cache.max_age = 0  # past its age: everything goes, and a clone still works
    cache.max_bytes = 1 << 20  # room again (a full folder keeps nothing new)
    cache.sweep()
    assert packs(cache) == {}
    await git("clone", "-q", url, str(tmp_path / "three"))
    assert len(packs(cache)) == 1


async def test_a_cache_that_cannot_be_written_never_fails_a_fetch(client, alice, tmp_path):
    cache = cache_of(client)
    hold_sweeps(cache)
    _, refs = await pushed_repo(client, alice, tmp_path)
    shutil.rmtree(cache.folder)  # as a full disk would: no lock, no temp file, no pack
    clone = tmp_path / "clone"
    _, _, err = await git("clone", "--progress", remote(client, alice, "alice", "demo"), str(clone))
    assert await head_of(clone) == refs["refs/heads/main"]
    assert (await git("fsck", "--strict", cwd=clone))[0] == 0
    assert "pack-cache" not in err  # no word of the cache's own paths reaches the client
    cache.sweep()  # makes the folder again: the next fetches are kept
    await git("clone", "-q", remote(client, alice, "alice", "demo"), str(tmp_path / "again"))
    assert journal(cache) == ["miss"]


async def _cloned_twice(client, tmp_path: Path) -> PackCache:
    """The server's cache after a new repository was cloned twice (sweeps held off)."""
    cache = cache_of(client)
    hold_sweeps(cache)
    user = await sign_up(client, "dora")
    await create(client, user, "twice", autoInit=True)
    for n in (1, 2):
        await git("clone", "-q", remote(client, user, "dora", "twice"), str(tmp_path / f"c{n}"))
    return cache


async def test_a_data_folder_with_spaces_and_quotes_still_caches(aiohttp_client, tmp_path):
    # The hook runs through a shell: its paths must arrive whole.
    odd = tmp_path / 'it\'s a "data" $HOME folder'
    client = await aiohttp_client(create_app(make_config(odd)))
    assert journal(await _cloned_twice(client, tmp_path)) == ["miss", "hit"]


async def test_a_relative_data_folder_still_caches(aiohttp_client, tmp_path, monkeypatch):
    # git runs the hook in the repository's folder: every path it is given is absolute.
    monkeypatch.chdir(tmp_path)
    client = await aiohttp_client(create_app(make_config(tmp_path, storage__data_dir="./rel")))
    cache = await _cloned_twice(client, tmp_path)
    assert journal(cache) == ["miss", "hit"]
    assert cache.folder == tmp_path / "rel" / "pack-cache"


async def test_the_cache_can_be_turned_off(aiohttp_client, tmp_path):
    client = await aiohttp_client(create_app(make_config(tmp_path, git__pack_cache_mb=0)))
    user = await sign_up(client, "carol")
    await create(client, user, "plain", autoInit=True)
    await git("clone", "-q", remote(client, user, "carol", "plain"), str(tmp_path / "c"))
    assert not (tmp_path / "data" / "pack-cache").exists()


async def test_shallow_and_partial_clones_are_kept_apart_and_right(client, alice, tmp_path):
    cache = cache_of(client)
    hold_sweeps(cache)
    work, refs = await pushed_repo(client, alice, tmp_path)
    url = remote(client, alice, "alice", "demo")
    shapes = {
        "shallow": ("--depth", "1"),
        "partial": ("--filter=blob:none",),
        "full": (),
    }
    for round_ in (1, 2):
        for name, extra in shapes.items():
            clone = tmp_path / f"{name}-{round_}"
            await git("clone", "-q", *extra, url, str(clone))
            assert await head_of(clone) == refs["refs/heads/main"]
            assert (clone / "README.md").read_bytes() == (work / "README.md").read_bytes()
            assert (await git("fsck", cwd=clone))[0] == 0
    # Four packs: the shallow one, the partial one, the blobs its checkout then fetched
    # lazily, the full one; each sent again from the cache the second time.
    assert journal(cache) == ["miss"] * 4 + ["hit"] * 4
    assert len(packs(cache)) == 4
    shallow = (await git("rev-list", "--count", "HEAD", cwd=tmp_path / "shallow-2"))[1]
    assert shallow.strip() == "1"


async def test_a_full_cache_keeps_nothing_more_and_still_answers(client, alice, tmp_path):
    cache = cache_of(client)
    hold_sweeps(cache)
    _, refs = await pushed_repo(client, alice, tmp_path)
    url = remote(client, alice, "alice", "demo")
    # The folder itself takes more than 1 KiB on disk: it is over its bound.
    cache.max_bytes = 1 << 10
    for name in ("one", "two"):
        clone = tmp_path / name
        await git("clone", "-q", url, str(clone))
        assert await head_of(clone) == refs["refs/heads/main"]
        assert (await git("fsck", "--strict", cwd=clone))[0] == 0
    assert packs(cache) == {} and journal(cache) == []
    assert not list(cache.folder.glob("*.part"))
    cache.max_bytes = 1 << 20
    await git("clone", "-q", url, str(tmp_path / "three"))
    assert len(packs(cache)) == 1 and journal(cache) == ["miss"]


async def test_a_start_drops_the_packs_kept_before_it(client, alice, tmp_path):
    cache = cache_of(client)
    hold_sweeps(cache)
    await pushed_repo(client, alice, tmp_path)
    url = remote(client, alice, "alice", "demo")
    await git("clone", "-q", url, str(tmp_path / "one"))
    assert len(packs(cache)) == 1
    live = cache.folder / f"{'0' * 64}.99998.part"  # a hook still writing its pack
    live.write_text("x")
    # As a process starting after a crash of the machine: a kept pack may be short.
    cache.prepare()
    assert packs(cache) == {} and live.exists()
    await git("clone", "-q", url, str(tmp_path / "two"))
    # Computed again (the start's sweep counted the first clone's word and dropped it).
    assert journal(cache) == ["miss"] and len(packs(cache)) == 1
