"""Git's smart-HTTP protocol, bridged to `git upload-pack`/`receive-pack --stateless-rpc`.

Native git serves packs about ten times faster than dulwich's pure-Python server and
streams instead of holding whole packs in memory, so the pack protocol runs in git
itself; this module only moves bytes between the HTTP request, the process and the
HTTP response.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path

from aiohttp import web

from ..errors import ApiError, BadRequest, BodyTimeout, PayloadTooLarge
from ..metrics import git_operation
from . import pipes
from .pktline import Framer, error_packet, pkt_line

log = logging.getLogger("hubsvc.githttp")

SERVICES = ("git-upload-pack", "git-receive-pack")
CHUNK = 64 * 1024
HEAD_KEPT = 4096
_PROTOCOL_RE = re.compile(r"^[A-Za-z0-9=:._-]{1,100}$")
_GZIP_MAGIC = b"\x1f\x8b"
# Settings every hosted repository gets on the command line, so existing repositories
# need no rewrite of their config. refs/pull/ is the server's namespace: hidden from
# receive-pack, git itself refuses any push that creates, moves or deletes a ref there.
# Filters and reachable wants let `git clone --filter=blob:none` fetch its blobs lazily,
# and only objects reachable from a ref are ever served.
SERVICE_CONFIG = {
    "git-upload-pack": ("uploadpack.allowFilter=true", "uploadpack.allowReachableSHA1InWant=true"),
    "git-receive-pack": ("receive.hideRefs=refs/pull/", "receive.advertisePushOptions=true"),
    "git-upload-archive": (),  # SSH only; git serves archives of refs alone by default
}


def git_command(
    service: str,
    path: Path,
    *args: str,
    hooks: Path | None = None,
    stateless: bool = True,
    settings: Sequence[str] = (),
) -> list[str]:
    """The git command line of a service, with the server's settings.

    stateless: smart HTTP's one request, one answer; SSH keeps git's own conversation.
    settings: more `-c` settings (the pack cache's hook, which git takes only from here).
    """
    cmd = ["git"]
    for setting in (*SERVICE_CONFIG[service], *settings):
        cmd += ["-c", setting]
    if hooks is not None:
        cmd += ["-c", f"core.hooksPath={hooks}"]
    return cmd + [
        service.removeprefix("git-"),
        *(["--stateless-rpc"] if stateless else []),
        *args,
        str(path),
    ]


def git_env(protocol: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """git's environment: nothing of the server's own, and the client's GIT_PROTOCOL if sane."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/"),
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    if _PROTOCOL_RE.match(protocol):
        env["GIT_PROTOCOL"] = protocol  # lets the client use protocol v2
    env.update(extra or {})
    return env


def _env(request: web.Request, extra: dict[str, str] | None = None) -> dict[str, str]:
    return git_env(request.headers.get("Git-Protocol", ""), extra)


async def advertise(
    request: web.Request, service: str, path: Path, timeout: float | None = None
) -> web.StreamResponse:
    """GET info/refs?service=…: the ref advertisement, streamed; git is killed after timeout s."""
    proc = await pipes.start(git_command(service, path, "--advertise-refs"), _env(request))
    assert proc.stdout is not None  # a PIPE
    resp = web.StreamResponse(
        headers={
            "Content-Type": f"application/x-{service}-advertisement",
            "Cache-Control": "no-cache, max-age=0, must-revalidate",
            "Expires": "Fri, 01 Jan 1980 00:00:00 GMT",
            "Pragma": "no-cache",
        }
    )
    try:
        async with asyncio.timeout(timeout):
            await resp.prepare(request)
            if "version=2" not in request.headers.get("Git-Protocol", ""):
                await resp.write(pkt_line(f"# service={service}\n") + b"0000")
            await _pump(proc.stdout, resp)
            await _finish(proc, service)
    except TimeoutError:
        await _reap(proc)
        return _cut(request, resp, f"{service} --advertise-refs ran over {timeout:g} s")
    finally:
        await _reap(proc)
    await resp.write_eof()
    return resp


async def _reap(proc: pipes.Piped) -> None:
    """Kill git and whatever it started (hooks), and wait: no process outlives its request."""
    proc.kill()
    # Pipes left unread (a client that stalled, a body that never came) stay open until
    # their transports close.
    proc.close()
    await proc.wait()


def _cut(request: web.Request, resp: web.StreamResponse, why: str) -> web.StreamResponse:
    """End an answer already under way by closing the connection, so the client sees it cut."""
    log.warning("%s: connection closed", why)
    if request.transport is not None:
        request.transport.close()
    return resp


async def stream_blob(
    request: web.Request, path: Path, oid: str, size: int, headers: dict[str, str], timeout: float
) -> web.StreamResponse:
    """Serve one blob as `git cat-file blob` writes it, never holding more than a chunk."""
    if request.method == "HEAD":
        resp = web.StreamResponse(headers=headers)
        resp.content_length = size
        await resp.prepare(request)
        await resp.write_eof()
        return resp
    proc = await pipes.start(
        ["git", f"--git-dir={path}", "cat-file", "blob", oid],
        {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_CONFIG_NOSYSTEM": "1",
            "HOME": os.environ.get("HOME", "/"),
        },
        stderr=False,
    )
    assert proc.stdout is not None  # a PIPE
    resp = web.StreamResponse(headers=headers)
    resp.content_length = size
    try:
        async with asyncio.timeout(timeout):
            await resp.prepare(request)
            await _pump(proc.stdout, resp)
            await proc.wait()
    except TimeoutError:
        await _reap(proc)
        return _cut(request, resp, f"git cat-file blob {oid} ran over {timeout:g} s")
    finally:
        await _reap(proc)
    await resp.write_eof()
    return resp


class Moved:
    """Bytes of one git operation, each way (metrics)."""

    __slots__ = ("received", "sent")

    def __init__(self) -> None:
        self.received = self.sent = 0


async def _pump(
    stdout: asyncio.StreamReader,
    resp: web.StreamResponse,
    framer: Framer | None = None,
    moved: Moved | None = None,
) -> None:
    while chunk := await stdout.read(CHUNK):
        await resp.write(chunk)
        if moved is not None:
            moved.sent += len(chunk)
        if framer is not None:
            framer.feed(chunk)


async def _finish(proc: pipes.Piped, service: str) -> tuple[int, str]:
    """git's exit code and the last line it printed on stderr."""
    stderr = await proc.stderr.read() if proc.stderr else b""
    code = await proc.wait()
    text = stderr.decode(errors="replace").strip()
    if code != 0:
        log.warning("%s exited %s: %s", service, code, text[:500])
    return code, text.splitlines()[-1] if text else ""


async def _body(request: web.Request) -> AsyncIterator[bytes]:
    """The request body as git wrote it, inflated exactly once."""
    try:
        head = await request.content.readexactly(2)
    except asyncio.IncompleteReadError as exc:
        head = exc.partial
    inflater = None
    # aiohttp may already have inflated a gzip body (auto_decompress); one still gzipped
    # starts with the gzip magic, which no pkt-line (four hex digits) can, so the first
    # two bytes tell which of the two arrived.
    if head == _GZIP_MAGIC and request.headers.get("Content-Encoding", "").lower() == "gzip":
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    async for chunk in _prefixed(head, request.content.iter_chunked(CHUNK)):
        if inflater is None:
            yield chunk
            continue
        try:
            yield inflater.decompress(chunk)
        except zlib.error:
            raise BadRequest("malformed gzip body") from None
    if inflater is not None:
        yield inflater.flush()


async def _prefixed(head: bytes, rest: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    if head:
        yield head
    async for chunk in rest:
        yield chunk


async def _feed(
    request: web.Request,
    stdin: asyncio.StreamWriter,
    limit: int | None,
    head: bytearray | None = None,
    moved: Moved | None = None,
) -> int:
    """Copy the request body into the process, counting bytes against the limit."""
    total = 0
    try:
        async for chunk in _body(request):
            if head is not None and len(head) < HEAD_KEPT:
                head += chunk[: HEAD_KEPT - len(head)]  # where the client names its capabilities
            total += len(chunk)
            if moved is not None:
                moved.received += len(chunk)
            if limit is not None and total > limit:
                raise _too_large(limit)
            try:
                stdin.write(chunk)
                await stdin.drain()
            except (BrokenPipeError, ConnectionResetError):
                # git stopped reading: it failed (a full disk while unpacking) and says
                # why on its output, which goes to the client as git's own error.
                break
    finally:
        if not stdin.is_closing():
            stdin.close()
    return total


def _too_large(limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(f"push is larger than {limit} bytes (the server's limits.push_bytes)")


async def answer_probe(request: web.Request, service: str) -> web.StreamResponse | None:
    """git's probe before a large body, answered as git would; None for any other request.

    Before streaming a body larger than its http.postBuffer, git POSTs a lone flush-pkt
    ("0000", 4 bytes) to learn whether its credentials hold: only the status counts.
    receive-pack answers that with nothing, and no ref can move in it, so neither git nor
    a push's bookkeeping is started for it. No request git makes is 4 bytes otherwise.
    """
    if (
        request.content_length != 4
        or request.content_type != f"application/x-{service}-request"
        or request.headers.get("Content-Encoding", "").lower() == "gzip"
    ):
        return None
    try:
        body = await request.content.readexactly(4)
    except asyncio.IncompleteReadError:
        raise BadRequest("request body ended early") from None
    if body != b"0000":
        raise BadRequest(f"malformed {service} request")
    return web.Response(
        content_type=f"application/x-{service}-result",
        headers={"Cache-Control": "no-cache, max-age=0, must-revalidate"},
    )


async def serve_rpc(
    request: web.Request,
    service: str,
    path: Path,
    limit: int | None = None,
    before_eof: Callable[[], Awaitable[None]] | None = None,
    hooks: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float | None = None,
    mark: Callable[[str], None] | None = None,
    body_in: Callable[[int, bytes], None] | None = None,
    settings: Sequence[str] = (),
) -> tuple[web.StreamResponse, int]:
    """_serve_rpc, counted in the git metrics (service, bytes each way, duration)."""
    started, moved, code = time.monotonic(), Moved(), -1
    try:
        resp, code = await _serve_rpc(
            request,
            service,
            path,
            limit,
            before_eof,
            hooks,
            env,
            timeout,
            mark,
            moved,
            body_in,
            settings,
        )
        return resp, code
    finally:
        git_operation(service, "http", started, moved.received, moved.sent, code == 0)


async def _serve_rpc(
    request: web.Request,
    service: str,
    path: Path,
    limit: int | None,
    before_eof: Callable[[], Awaitable[None]] | None,
    hooks: Path | None,
    env: dict[str, str] | None,
    timeout: float | None,
    mark: Callable[[str], None] | None,
    moved: Moved,
    body_in: Callable[[int, bytes], None] | None = None,
    settings: Sequence[str] = (),
) -> tuple[web.StreamResponse, int]:
    """POST git-upload-pack / git-receive-pack: stream body in and answer out.

    `before_eof` runs after git is done but before the answer ends, so a client sees its
    push complete only once the server has recorded it. Returns the response and git's
    exit code. A body over `limit` kills git before it
    could update a ref (receive-pack only updates refs after the whole pack is in and
    checked, and keeps incoming objects in quarantine until then) and answers 413, which
    a pushing git reads as its own error packet (errors.error_answer).
    git still running after `timeout` seconds is killed: before any answer went out that
    is a 408 (the body never came) or 504; after, the connection is closed.
    `mark(phase)`, when given, is called as git starts, as the body is all in and as git
    exits (push_timing.PushClock). `body_in(pid, head)`, when given, is called once the
    whole body is in git, with git's pid and the body's first HEAD_KEPT bytes.
    """
    if request.content_type != f"application/x-{service}-request":
        raise BadRequest(f"expected Content-Type application/x-{service}-request")
    if (
        limit is not None
        and request.content_length is not None
        and request.content_length > limit
        and request.headers.get("Content-Encoding", "").lower() != "gzip"
    ):
        raise _too_large(limit)
    proc = await pipes.start(
        git_command(service, path, hooks=hooks, settings=settings), _env(request, env), stdin=True
    )
    assert proc.stdout is not None and proc.stdin is not None  # both are PIPEs
    head, framer = bytearray(), Framer()
    feeder = asyncio.ensure_future(_feed(request, proc.stdin, limit, head, moved))
    if mark is not None:
        mark("spawn")
        feeder.add_done_callback(lambda _: mark("body"))
    if body_in is not None:
        feeder.add_done_callback(
            lambda done: (
                None if done.cancelled() or done.exception() else body_in(proc.pid, bytes(head))
            )
        )
    resp = web.StreamResponse(
        headers={
            "Content-Type": f"application/x-{service}-result",
            "Cache-Control": "no-cache, max-age=0, must-revalidate",
        }
    )
    first_read = asyncio.ensure_future(proc.stdout.read(CHUNK))
    try:
        async with asyncio.timeout(timeout):
            # git answers only once it has read what it needs; a body that fails on the
            # way in (too large, bad gzip) must end things before any 200 goes out.
            await asyncio.wait({first_read, feeder}, return_when=asyncio.FIRST_COMPLETED)
            failed = feeder.exception() if feeder.done() else None
            if failed is not None:
                raise failed
            first = await first_read
            await resp.prepare(request)
            if first:
                await resp.write(first)
                moved.sent += len(first)
                framer.feed(first)
                await _pump(proc.stdout, resp, framer, moved)
            await feeder
            code, last_error = await _finish(proc, service)
            if mark is not None:
                mark("git")
    except BaseException as exc:
        body_done = feeder.done() and not feeder.cancelled()
        for task in (feeder, first_read):
            task.cancel()
        await asyncio.gather(feeder, first_read, return_exceptions=True)
        await _reap(proc)
        if isinstance(exc, BodyTimeout) and not resp.prepared:
            raise  # the client's body stalled: 408 from the error middleware, not git's 504
        if resp.prepared and isinstance(exc, ConnectionError):
            # Not a server error: nothing more can reach this client.
            log.info("client closed the connection during %s", service)
            return resp, -1
        if resp.prepared and isinstance(exc, Exception) and not isinstance(exc, TimeoutError):
            # A 500 written into a half-sent answer reads to git as a broken transfer
            # ("curl 56 … chunked-encoding"); git's own error packet reads as what it is.
            log.error("%s failed after its answer began: %s", service, exc)
            return await _end_with_error(
                request, resp, framer, _sideband(request, head), f"the server failed: {exc}"
            ), -1
        if not isinstance(exc, TimeoutError):
            raise
        if resp.prepared:
            return _cut(request, resp, f"{service} ran over {timeout:g} s"), -1
        if not body_done:
            raise ApiError(
                f"request body not received within {timeout:g} s "
                "(the server's git.timeout_seconds)",
                408,
            ) from None
        raise ApiError(
            f"git took longer than {timeout:g} s (the server's git.timeout_seconds)", 504
        ) from None
    if code != 0 and last_error:
        # git stopped before its answer ended (a full disk, say): its last word, as an
        # error packet, is what the user reads, and git exits non-zero.
        return await _end_with_error(
            request, resp, framer, _sideband(request, head), last_error
        ), code
    if before_eof is not None:
        try:
            await before_eof()
        except Exception:
            # git has finished and told the client so; the push journal records it later.
            log.exception("bookkeeping after %s failed", service)
    await resp.write_eof()
    return resp, code


def _sideband(request: web.Request, head: bytes | bytearray) -> bool:
    """Whether the client multiplexes the answer (protocol v2 always does)."""
    return b"side-band" in head or "version=2" in request.headers.get("Git-Protocol", "")


async def _end_with_error(
    request: web.Request, resp: web.StreamResponse, framer: Framer, sideband: bool, message: str
) -> web.StreamResponse:
    """End a started answer with an error git prints, or cut it when that can't be framed."""
    if not framer.at_boundary:
        return _cut(request, resp, message)
    try:
        await resp.write(error_packet(message, sideband))
        await resp.write_eof()
    except ConnectionError:
        pass
    return resp
