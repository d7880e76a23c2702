"""Open connections per address counted across processes, without leaks when one dies."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import defaultdict
from typing import Any

log = logging.getLogger("hubsvc.cluster")

# Each connection is a member of its address's sorted set, scored by when it expires
# unless its process renews it: a process that dies stops renewing, and its members
# stop counting within TTL_SECONDS.
TTL_SECONDS = 30
RENEW_SECONDS = 10

_ADMIT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[1]) then
  return 0
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[2])
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[3]) + 1)
return 1
"""

_RENEW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
for i = 2, #ARGV do
  redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[1]), ARGV[i])
end
redis.call('EXPIRE', KEYS[1], tonumber(ARGV[1]) + 1)
return 0
"""


class SharedCounts:
    """Members per group (an address), at most a limit, counted by every process at once."""

    def __init__(self, redis: Any, name: str, process_id: str) -> None:
        self.redis = redis
        self.name = name
        self.process_id = process_id
        self._admit = redis.register_script(_ADMIT)
        self._renew = redis.register_script(_RENEW)
        self._serial = itertools.count(1)
        self.held: defaultdict[str, set[str]] = defaultdict(set)
        self._renewer: asyncio.Task | None = None
        self._releases: set[asyncio.Task] = set()

    def _key(self, group: str) -> str:
        return f"{self.name}:{group}"

    async def admit(self, group: str, limit: int) -> str | None:
        """A member id when the group has fewer than limit members, else None.

        Raises when Redis cannot be reached; the caller then counts on its own.
        """
        member = f"{self.process_id}:{next(self._serial)}"
        ok = await self._admit(keys=[self._key(group)], args=[limit, member, TTL_SECONDS])
        if not ok:
            return None
        self.held[group].add(member)
        return member

    def release(self, group: str, member: str) -> None:
        """The member's connection ended (never waits)."""
        members = self.held.get(group)
        if members is None or member not in members:
            return
        members.discard(member)
        if not members:
            del self.held[group]
        task = asyncio.get_running_loop().create_task(self._remove(group, member))
        self._releases.add(task)
        task.add_done_callback(self._releases.discard)

    async def _remove(self, group: str, member: str) -> None:
        try:
            await self.redis.zrem(self._key(group), member)
        except Exception as exc:  # it expires by itself
            log.warning("could not release a connection count in Redis (%s)", exc)

    async def renew(self) -> None:
        """Push the expiry of every member this process holds further out."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for group, members in list(self.held.items()):
                await self._renew(
                    keys=[self._key(group)], args=[TTL_SECONDS, *members], client=pipe
                )
            await pipe.execute()

    async def renew_loop(self) -> None:
        """renew() every RENEW_SECONDS for the life of the process."""
        while True:
            await asyncio.sleep(RENEW_SECONDS)
            try:
                if self.held:
                    await self.renew()
            except Exception as exc:
                log.warning("could not renew connection counts in Redis (%s)", exc)

    def start(self) -> None:
        """Start renewing."""
        self._renewer = asyncio.get_running_loop().create_task(self.renew_loop())

    async def stop(self) -> None:
        """Stop renewing; release what is still held."""
        if self._renewer is not None:
            self._renewer.cancel()
        for group, members in list(self.held.items()):
            for member in list(members):
                self.release(group, member)
        await asyncio.gather(*self._releases, return_exceptions=True)
