"""Running the real git CLI from async tests without blocking the server's event loop."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

ENV = {
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_AUTHOR_NAME": "Tess Ter",
    "GIT_AUTHOR_EMAIL": "tess@example.com",
    "GIT_COMMITTER_NAME": "Tess Ter",
    "GIT_COMMITTER_EMAIL": "tess@example.com",
    "GIT_AUTHOR_DATE": "2026-01-02T03:04:05Z",
    "GIT_COMMITTER_DATE": "2026-01-02T03:04:05Z",
}


async def git(
    *args: str, cwd: Path | str | None = None, check: bool = True, stdin: bytes | None = None
) -> tuple[int, str, str]:
    """Run git; returns (code, stdout, stderr) and raises on failure when check is set."""
    proc = await asyncio.create_subprocess_exec(
        "git",
        *args,
        cwd=cwd,
        env={**os.environ, **ENV},
        stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate(stdin)
    result = (proc.returncode, out.decode(errors="replace"), err.decode(errors="replace"))
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {result[2]}")
    return result


def remote(client, user, owner: str, name: str, secret: str | None = None) -> str:
    """http://user:secret@host:port/owner/name.git for the test server."""
    url = client.make_url(f"/{owner}/{name}.git")
    if user is None:
        return str(url)
    return str(url.with_user(user.username).with_password(secret or user.password))
