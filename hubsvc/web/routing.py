"""The router's answer for a method and path, remembered: the same URL is asked again and again."""

from __future__ import annotations

from aiohttp import web
from aiohttp.web_urldispatcher import AbstractRoute, MatchInfoError, UrlMappingMatchInfo

KEPT_MOST = 4096
# Characters of a kept method and path: 4,096 entries stay ~20 MiB at worst (a path of
# 4-byte characters, kept as the key and again in the match) however URLs vary.
LONGEST = 512


class Resolver:
    """router.resolve, remembered by (method, path) for routes found.

    aiohttp tries each resource under the path's longest indexed prefix in turn, a regex
    and a coroutine apiece: 58 of them share /api/repositories, about 80 microseconds a
    request here. Which route a method and path reach never changes once the application
    serves (its router is frozen), so a found route is kept with its match; a 404 or 405
    is not, and asks the router each time.
    """

    def __init__(self, router: web.UrlDispatcher, most: int = KEPT_MOST) -> None:
        self._router = router
        self._most = most
        self._kept: dict[tuple[str, str], tuple[dict[str, str], AbstractRoute]] = {}

    async def __call__(self, request: web.Request) -> UrlMappingMatchInfo:
        key = (request.method, request.rel_url.path_safe)
        hit = self._kept.get(key)
        if hit is not None:
            return UrlMappingMatchInfo(dict(hit[0]), hit[1])
        found = await self._router.resolve(request)
        # A sub-application's match carries its applications: not kept (hubsvc has none).
        # The method counts too: aiohttp's pure-Python parser takes any token as one.
        if (
            not isinstance(found, MatchInfoError)
            and not found.apps
            and len(key[0]) + len(key[1]) <= LONGEST
        ):
            if len(self._kept) >= self._most:
                del self._kept[next(iter(self._kept))]  # the oldest: insertion order
            self._kept[key] = (dict(found), found.route)
        return found
