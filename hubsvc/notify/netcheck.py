"""Where outgoing webhooks may connect: public addresses, or hosts the administrator allows.

Gitea's ALLOWED_HOST_LIST is the model: a hook URL whose host resolves to a loopback,
private, link-local, multicast, unspecified, reserved or site-local address is refused, so
is an IPv6 address that leads to such an IPv4 one (IPv4-mapped, IPv4-compatible, 6to4,
Teredo, NAT64), unless webhooks.allowed_hosts lists the host name, the address, or a
CIDR range holding it ("*" allows every host). The rule is applied when a hook is saved
and again when dialling (HookResolver), so a DNS answer that changes in between cannot
slip through.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

RESOLVE_TIMEOUT = 5.0
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class Refused(OSError):
    """A destination the rules do not allow; the message says why."""


class HostRules:
    """webhooks.allowed_hosts parsed: host names, addresses and CIDR ranges."""

    def __init__(self, allowed: Iterable[str] = ()) -> None:
        self.names: set[str] = set()
        self.networks: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        self.everything = False
        for item in allowed:
            item = item.strip().lower()
            if item == "*":
                self.everything = True
                continue
            try:
                self.networks.append(ipaddress.ip_network(item.strip("[]"), strict=False))
            except ValueError:
                self.names.add(item.rstrip("."))

    def host_allowed(self, host: str) -> bool:
        """The host is listed by name (or is a listed address)."""
        if self.everything or host.lower().rstrip(".") in self.names:
            return True
        address = _literal(host)
        return address is not None and self.address_allowed(address)

    def address_allowed(self, address: Address) -> bool:
        """The address lies in a listed range."""
        return self.everything or any(address in net for net in self.networks)


def _literal(host: str) -> Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


NAT64_WELL_KNOWN = ipaddress.ip_network("64:ff9b::/96")
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
KINDS = ("loopback", "unspecified", "link_local", "multicast", "private", "reserved", "site_local")


def embedded_ipv4(address: Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one leads to: mapped, 6to4, Teredo, NAT64 or compatible."""
    if not isinstance(address, ipaddress.IPv6Address):
        return None
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address.teredo is not None:
        return address.teredo[1]  # the client; the server half is a public relay
    # ::/96 without :: and ::1, whose own kinds (unspecified, loopback) say more.
    if address in NAT64_WELL_KNOWN or (address in IPV4_COMPATIBLE and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def _kind(address: Address) -> str | None:
    for kind in KINDS:
        if getattr(address, f"is_{kind}", False):  # is_site_local is IPv6's only
            return kind.replace("_", "-")
    if not address.is_global:
        return "non-public"  # shared address space (100.64/10) and the like
    return None


def forbidden_kind(address: Address) -> str | None:
    """Why an address is not public (None when it is), the IPv4 one it embeds included."""
    inner = embedded_ipv4(address)
    if inner is None:
        return _kind(address)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        # the same address spelled in IPv6
        return _kind(inner)
    # A tunnel or translator ends at the IPv4 address: both must be public.
    return _kind(inner) or _kind(address)


def check_address(rules: HostRules, host: str, address: Address) -> None:
    """Raise Refused unless address is public or allowed for host."""
    if rules.host_allowed(host) or rules.address_allowed(address):
        return
    kind = forbidden_kind(address)
    if kind is not None:
        inner = embedded_ipv4(address)
        shown = f"{address}, which embeds {inner}" if inner is not None else str(address)
        raise Refused(
            f"{host} resolves to a {kind} address ({shown}); "
            "webhooks.allowed_hosts does not list it"
        )


def split_url(url: str) -> tuple[str, int]:
    """(host, port) of an http(s) URL, or ValueError saying what is wrong."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ValueError("must be a valid URL") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError("must be an http:// or https:// URL")
    if not parts.hostname:
        raise ValueError("must name a host")
    return parts.hostname, port or (443 if parts.scheme == "https" else 80)


async def resolve(host: str, port: int) -> list[Address]:
    """Every address of host (a literal is itself)."""
    literal = _literal(host)
    if literal is not None:
        return [literal]
    loop = asyncio.get_running_loop()
    try:
        infos = await asyncio.wait_for(
            loop.getaddrinfo(host, port, type=socket.SOCK_STREAM), RESOLVE_TIMEOUT
        )
    except (TimeoutError, OSError, UnicodeError):
        raise Refused(f"{host} could not be resolved") from None
    return [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]


async def check_url(rules: HostRules, url: str) -> None:
    """Raise ValueError (bad URL) or Refused (a destination not allowed) for a hook URL."""
    host, port = split_url(url)
    if rules.host_allowed(host):
        return
    for address in await resolve(host, port):
        check_address(rules, host, address)


class HookResolver(AbstractResolver):
    """aiohttp's resolver with the rule applied to each answer, right before connecting."""

    def __init__(self, rules: HostRules) -> None:
        self.rules = rules
        self.inner = DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        results = await self.inner.resolve(host, port, family)
        for result in results:
            check_address(self.rules, host, ipaddress.ip_address(result["host"]))
        return results

    async def close(self) -> None:
        await self.inner.close()
