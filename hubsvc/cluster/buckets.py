"""Token buckets in Redis: one budget per client across every process."""

from __future__ import annotations

import logging
import time
from typing import Any

log = logging.getLogger("hubsvc.cluster")

# Refill, spend and store in one step on the server, by the server's clock: two processes
# spending at once can neither both take the last token nor disagree about the time.
_TAKE = """
local capacity = tonumber(ARGV[1])
local rate = tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local held = redis.call('HMGET', KEYS[1], 'tokens', 'stamp')
local tokens = tonumber(held[1]) or capacity
local stamp = tonumber(held[2]) or now
tokens = math.min(capacity, tokens + math.max(0, now - stamp) * rate)
local allowed = 0
if tokens >= 1 then
  tokens = tokens - 1
  allowed = 1
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'stamp', tostring(now))
-- A full bucket is the same as none: the key goes once it would have refilled.
redis.call('PEXPIRE', KEYS[1], math.ceil((capacity - tokens) / rate * 1000) + 1000)
return {allowed, tostring(tokens)}
"""


class RedisBucket:
    """TokenBucket's answers from buckets kept in Redis, shared by every process.

    When Redis cannot be reached the process falls back to its own buckets (`local`):
    a limit per process for a while is better than refusing every request.
    """

    def __init__(self, redis: Any, name: str, local: Any, link: Any = None) -> None:
        self.redis = redis
        self.link = link  # the Cluster: while its link is down, Redis is not asked
        self.name = name  # the key prefix of this limiter's buckets
        self.local = local  # a TokenBucket of the same capacity and rate
        self.capacity = local.capacity
        self.rate = local.rate
        self._script = redis.register_script(_TAKE)
        self._failed_at = float("-inf")

    async def spend(self, key: str) -> tuple[bool, float, float]:
        """Spend a token: (allowed, tokens left, seconds until one is available)."""
        if time.monotonic() - self._failed_at < 5 or (self.link is not None and not self.link.up):
            return self.local.take(key)
        try:
            allowed, left = await self._script(
                keys=[f"{self.name}:{key}"], args=[self.capacity, self.rate]
            )
        except Exception as exc:
            log.warning("rate limit in Redis failed (%s); limiting per process for 5 s", exc)
            self._failed_at = time.monotonic()
            return self.local.take(key)
        tokens = float(left)
        wait = 0.0 if tokens >= 1 else (1 - tokens) / self.rate
        return bool(allowed), tokens, wait

    def full_in(self, tokens: float) -> float:
        """Seconds until a bucket holding `tokens` is full again."""
        return (self.capacity - tokens) / self.rate
