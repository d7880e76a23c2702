"""A merge writes exactly the head its branch protection was checked on (GitHub's `sha`)."""

from __future__ import annotations

import asyncio
import threading

from hubsvc.git.repo import GitRepo
from hubsvc.keys import STORE
from hubsvc.services import pulls
from hubsvc.services.pulls import MERGE_LOCKS

from .gitcli import git, remote
from .test_repos import create

REPO = "/api/repositories/alice/proj"


async def setup(client, alice, bob, tmp_path):
    """alice/proj, main needing one approval; bob (writer) opens #1 from feature and #2."""
    repo = await create(client, alice, "proj", autoInit=True)
    await client.put(
        REPO + "/collaborators/bob", json={"permission": "write"}, headers=alice.headers
    )
    resp = await client.put(
        REPO + "/branches/main/protection",
        json={"requiredPullRequestReviews": {"requiredApprovingReviewCount": 1}},
        headers=alice.headers,
    )
    assert resp.status == 200, await resp.text()
    work = tmp_path / "bob"
    await git("clone", "-q", remote(client, bob, "alice", "proj"), str(work))
    for branch in ("feature", "other"):
        await git("checkout", "-q", "-b", branch, "origin/main", cwd=work)
        (work / f"{branch}.txt").write_text(f"{branch}\n")
        await git("add", ".", cwd=work)
        await git("commit", "-q", "-m", f"reviewed {branch}", cwd=work)
        await git("push", "-q", "origin", branch, cwd=work)
        resp = await client.post(
            REPO + "/pulls", json={"title": branch, "head": branch}, headers=bob.headers
        )
        assert resp.status == 201, await resp.text()
    await git("checkout", "-q", "feature", cwd=work)
    return int(repo["id"]), work, await head_of(work)


async def head_of(work) -> str:
    return (await git("rev-parse", "HEAD", cwd=work))[1].strip()


async def approve(client, alice, number: int) -> None:
    resp = await client.post(
        f"{REPO}/pulls/{number}/reviews", json={"event": "APPROVE"}, headers=alice.headers
    )
    assert resp.status == 201, await resp.text()


async def push_unreviewed(work) -> str:
    """bob's new commit on feature, pushed with the stock git client."""
    (work / "feature.txt").write_text("unreviewed\n")
    await git("commit", "-q", "-am", "unreviewed", cwd=work)
    await git("push", "-q", "origin", "feature", cwd=work)
    return await head_of(work)


async def main_contains(work, oid: str) -> bool:
    await git("fetch", "-q", "origin", cwd=work)
    code, _, _ = await git("merge-base", "--is-ancestor", oid, "origin/main", cwd=work, check=False)
    return code == 0


def merge(client, user, number: int, **body):
    return client.post(f"{REPO}/pulls/{number}/merge", json=body, headers=user.headers)


class SlowMerge:
    """Holds the next merge just before it moves the base branch, as a large merge is slow.

    A wrapper around the real git step, which still runs once opened: nothing is faked.
    """

    def __init__(self, monkeypatch) -> None:
        self.reached = threading.Event()
        self.opened = threading.Event()
        real = GitRepo.update_branch

        def slow(repo: GitRepo, branch: str, new: str, old: str) -> bool:
            if not self.reached.is_set():
                self.reached.set()
                self.opened.wait(30)
            return real(repo, branch, new, old)

        monkeypatch.setattr(GitRepo, "update_branch", slow)

    async def wait_reached(self) -> None:
        assert await asyncio.to_thread(self.reached.wait, 30), "the merge never got there"


class WatchedLock(asyncio.Lock):
    """The repository's merge lock, telling the test when a merge queues behind it."""

    def __init__(self) -> None:
        super().__init__()
        self.queued = asyncio.Event()

    async def acquire(self) -> bool:
        if self.locked():
            self.queued.set()
        return await super().acquire()


async def test_a_push_while_the_merge_waits_for_the_lock_is_not_merged(
    client, alice, bob, tmp_path, monkeypatch
):
    repo_id, work, reviewed = await setup(client, alice, bob, tmp_path)
    await approve(client, alice, 1)
    lock = client.app[MERGE_LOCKS][repo_id] = WatchedLock()
    slow = SlowMerge(monkeypatch)
    # alice (exempt as the owner) merges #2 slowly: it holds the repository's merge lock.
    other = asyncio.create_task(merge(client, alice, 2))
    await slow.wait_reached()
    # bob merges his approved #1; it queues behind #2 ...
    attack = asyncio.create_task(merge(client, bob, 1))
    await asyncio.wait_for(lock.queued.wait(), 10)
    # ... and meanwhile pushes a commit nobody reviewed to its head.
    unreviewed = await push_unreviewed(work)
    slow.opened.set()
    assert (await other).status == 200
    resp = await attack
    text = await resp.text()
    assert resp.status == 405, text
    assert "approvals 0 of 1" in text
    assert not await main_contains(work, unreviewed)
    assert not await main_contains(work, reviewed)
    # Once the new head is approved, it merges.
    await approve(client, alice, 1)
    resp = await merge(client, bob, 1, sha=unreviewed)
    assert resp.status == 200, await resp.text()
    assert await main_contains(work, unreviewed)


async def test_a_push_while_the_merge_holds_the_lock_merges_only_the_checked_head(
    client, alice, bob, tmp_path, monkeypatch
):
    repo_id, work, reviewed = await setup(client, alice, bob, tmp_path)
    await approve(client, alice, 1)
    before = await client.app[STORE].issues.get(repo_id, 1, True)
    slow = SlowMerge(monkeypatch)
    attack = asyncio.create_task(merge(client, bob, 1))
    await slow.wait_reached()
    unreviewed = await push_unreviewed(work)
    slow.opened.set()
    resp = await attack
    assert resp.status == 200, await resp.text()
    assert (await resp.json())["pullRequest"]["headSha"] == reviewed
    assert await main_contains(work, reviewed)
    assert not await main_contains(work, unreviewed)
    # The mergeable check of that push may finish after the merge: the record of what
    # was merged stays.
    await pulls.refresh(client.app, before)
    got = await (await client.get(REPO + "/pulls/1", headers=bob.headers)).json()
    assert got["pullRequest"]["headSha"] == reviewed
    commits = await (await client.get(REPO + "/pulls/1/commits", headers=bob.headers)).json()
    assert [c["oid"] for c in commits["commits"]] == [reviewed]


async def test_sha_must_be_the_current_head(client, alice, bob, tmp_path):
    _, work, reviewed = await setup(client, alice, bob, tmp_path)
    await approve(client, alice, 1)
    for bad in ("abc", reviewed + "\n", "g" * 40, 7):
        resp = await merge(client, bob, 1, sha=bad)
        assert resp.status == 400, (bad, await resp.text())
        assert "sha" in (await resp.json())["error"]
    unreviewed = await push_unreviewed(work)
    resp = await merge(client, bob, 1, sha=reviewed)
    assert resp.status == 409
    assert (await resp.json())["error"] == (
        "Head branch was modified. Review and try the merge again."
    )
    # Without sha, protection judges the head as it is: not approved.
    resp = await merge(client, bob, 1)
    assert resp.status == 405 and "approvals 0 of 1" in (await resp.json())["error"]
    await approve(client, alice, 1)
    resp = await merge(client, bob, 1, sha=reviewed)
    assert resp.status == 409
    resp = await merge(client, bob, 1, sha=unreviewed.upper(), method="squash")
    assert resp.status == 200, await resp.text()
    assert (await resp.json())["pullRequest"]["headSha"] == unreviewed
    assert await main_contains(work, reviewed) is False  # squashed: one new commit
    got = (await git("show", "-s", "--format=%s", "origin/main", cwd=work))[1].strip()
    assert got == "feature (#1)"
