"""The bot's HTTP client of the service API: the bot key, acting as a chat user, errors."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import aiohttp

BOT_KEY_HEADER = "X-Chat-Bot-Key"
CHAT_USER_HEADER = "X-Chat-User-Id"
# The service's 401 message for an X-Chat-User-Id without a verified link (hubsvc/auth.py).
NOT_LINKED = "chat account is not linked"
TIMEOUT = aiohttp.ClientTimeout(total=30, sock_connect=5)


class ServiceError(Exception):
    """The service answered with an error status (or with a body that is not JSON)."""

    def __init__(self, status: int, message: str, retry_after: int | None = None) -> None:
        super().__init__(f"{status} {message}")
        self.status = status
        self.message = message
        self.retry_after = retry_after
        self.linked: bool | None = None  # set by as_user: whether it asked as the user

    @property
    def not_linked(self) -> bool:
        return self.status == 401 and self.message == NOT_LINKED


class Unreachable(Exception):
    """No answer from the service: refused, reset or timed out."""


def segment(value: str) -> str:
    """One path segment, quoted so that user input never changes the path."""
    return quote(value, safe="")


def _retry_after(body: dict[str, Any], headers: Any) -> int | None:
    for raw in (body.get("retryAfter"), headers.get("Retry-After")):
        try:
            return max(1, int(float(raw)))  # type: ignore[arg-type]  # None: TypeError, next
        except (TypeError, ValueError):
            continue
    return None


class ApiClient:
    """One aiohttp session to the service; make it inside the event loop that uses it."""

    def __init__(
        self, api_base: str, bot_key: str = "", timeout: aiohttp.ClientTimeout = TIMEOUT
    ) -> None:
        self.base = api_base.rstrip("/")
        self.bot_key = bot_key
        self.session = aiohttp.ClientSession(
            timeout=timeout, headers={"User-Agent": "hubsvc-bot", "Accept": "application/json"}
        )

    async def close(self) -> None:
        await self.session.close()

    async def __aenter__(self) -> ApiClient:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def request(
        self,
        method: str,
        path: str,
        *,
        chat_id: str | None = None,
        params: dict[str, Any] | None = None,
        body: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """One call; with chat_id, as that chat user's linked account. Raises on errors."""
        headers = {}
        if self.bot_key:
            headers[BOT_KEY_HEADER] = self.bot_key
            if chat_id is not None:
                headers[CHAT_USER_HEADER] = chat_id
        query = {k: str(v) for k, v in (params or {}).items() if v is not None}
        try:
            async with self.session.request(
                method,
                self.base + path,
                params=query,
                json=body,
                headers=headers,
                allow_redirects=False,
            ) as resp:
                try:
                    data = await resp.json(content_type=None)
                except ValueError:
                    data = None
                if not isinstance(data, dict):
                    if resp.status >= 400:
                        raise ServiceError(resp.status, resp.reason or "error")
                    raise ServiceError(resp.status, "the answer was not a JSON object")
                if resp.status >= 400:
                    raise ServiceError(
                        resp.status,
                        str(data.get("error") or resp.reason),
                        _retry_after(data, resp.headers),
                    )
                return data
        except (TimeoutError, aiohttp.ClientConnectionError, aiohttp.InvalidURL, OSError) as exc:
            raise Unreachable(f"{type(exc).__name__}: {exc}") from exc

    async def as_user(
        self,
        chat_id: str,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        linked: bool | None = None,
    ) -> tuple[dict[str, Any], bool]:
        """A read as the chat user's linked account, else anonymous: (answer, linked).

        The service refuses an unlinked X-Chat-User-Id outright, so an unlinked user's
        read is asked again without it and sees what anybody may see. linked=False (known
        from an earlier call) skips the first try.
        """
        if self.bot_key and linked is not False:
            try:
                return await self.request(method, path, chat_id=chat_id, params=params), True
            except ServiceError as exc:
                if not exc.not_linked:
                    exc.linked = True
                    raise
        try:
            return await self.request(method, path, params=params), False
        except ServiceError as exc:
            exc.linked = False
            raise
