"""One address in front of several servers: a TCP proxy handing each connection to the next.

Round robin per connection, as nginx's upstream does with keep-alive off: consecutive
requests of a test (each a new connection with urllib) land on different processes, and
a WebSocket stays on the process it was handed to.
"""

from __future__ import annotations

import asyncio
import itertools
import threading

from .server import free_port


class RoundRobinProxy:
    """Listens on 127.0.0.1:<port>; each accepted connection goes to the next backend."""

    def __init__(self, backends: list[int]) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._next = itertools.cycle(backends)
        self.handed: list[int] = []  # the backend port of each connection, in order
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        port = next(self._next)
        self.handed.append(port)
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))

    def start(self) -> RoundRobinProxy:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._handle, "127.0.0.1", self.port), self._loop
        ).result(10)
        return self

    def stop(self) -> None:
        async def close() -> None:
            assert self._server is not None
            self._server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()  # else its self-pipe sockets warn in whichever test runs next

    def __enter__(self) -> RoundRobinProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class SlowProxy(RoundRobinProxy):
    """One backend, with what clients send passed on at `rate` bytes a second: a git push
    through it stays in flight long enough to be signalled in the middle."""

    def __init__(self, backend: int, rate: int) -> None:
        super().__init__([backend])
        self.backend, self.rate = backend, rate
        self.sent_up = 0  # bytes passed from clients to the backend

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upward = writer.get_extra_info("peername")[1] == self.backend
        step = max(1, self.rate // 20)
        try:
            while data := await reader.read(step if upward else 65536):
                writer.write(data)
                await writer.drain()
                if upward:
                    self.sent_up += len(data)
                    await asyncio.sleep(len(data) / self.rate)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()
