"""git's pipes on the event loop: every descriptor closed once, on asyncio's loop and uvloop's."""

from __future__ import annotations

import asyncio
import os

import pytest
import uvloop

from hubsvc.git import pipes


def _open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


@pytest.mark.parametrize("make_loop", [asyncio.new_event_loop, uvloop.new_event_loop])
def test_a_descriptor_opened_while_the_pipes_close_stays_open(make_loop, monkeypatch):
    # What another thread meets in the instant a transport closes its pipe: it opens a
    # pipe of its own, which takes the lowest free number. uvloop's libuv closes the
    # pipe's number and then calls close() on the object it was handed: that second
    # close must not end the newcomer (uvloop issue 763).
    taken: list[tuple[int, int]] = []
    close = pipes._End.close

    def probing_close(self: pipes._End) -> None:
        taken.append(os.pipe())
        close(self)

    monkeypatch.setattr(pipes._End, "close", probing_close)

    async def run() -> tuple[bytes, bytes, int]:
        proc = await pipes.start(["git", "hash-object", "--stdin"], dict(os.environ), stdin=True)
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        proc.stdin.write(b"hello\n")
        proc.stdin.close()
        out, err = await asyncio.gather(proc.stdout.read(), proc.stderr.read())
        code = await proc.wait()
        proc.close()
        await asyncio.sleep(0.05)  # the transports' close runs in a later turn of the loop
        return out, err, code

    loop = make_loop()
    try:
        out, err, code = loop.run_until_complete(run())
    finally:
        loop.close()
    assert (out.strip(), err, code) == (b"ce013625030ba8dba906f756967f9e9ca394464a", b"", 0)
    assert len(taken) == 3  # stdin, stdout and stderr each closed
    try:
        assert all(_open(fd) for pair in taken for fd in pair)
    finally:
        for pair in taken:
            for fd in pair:
                if _open(fd):
                    os.close(fd)


def _pipes() -> set[str]:
    """The pipes this process holds open: other threads of a test worker open and close
    sockets and files meanwhile, so all descriptors would not say."""
    held = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("pipe:"):
            held.add(f"{fd} {target}")
    return held


@pytest.mark.parametrize("make_loop", [asyncio.new_event_loop, uvloop.new_event_loop])
def test_starting_leaves_no_descriptor_behind(make_loop):
    async def run() -> None:
        for _ in range(20):
            proc = await pipes.start(["git", "--version"], dict(os.environ))
            assert proc.stdout is not None and proc.stderr is not None
            await proc.stdout.read()
            await proc.stderr.read()
            await proc.wait()
            proc.close()
        await asyncio.sleep(0.05)

    before = _pipes()
    loop = make_loop()
    try:
        loop.run_until_complete(run())
    finally:
        loop.close()
    # Only pipes this run left open count: a pipe of the worker's other threads may close
    # meanwhile (a closed one of ours would be the double close the test above catches).
    assert _pipes() - before == set()
