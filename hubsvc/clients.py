"""Who a request comes from: the client address behind trusted proxies, and its group."""

from __future__ import annotations

import ipaddress

from aiohttp import web

from .keys import CONFIG


def _trusted(addr: str, proxies: list[str]) -> bool:
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        return False
    for proxy in proxies:
        try:
            if ip in ipaddress.ip_network(proxy, strict=False):
                return True
        except ValueError:
            continue
    return False


def client_ip(request: web.Request) -> str:
    """The peer address, or the forwarded one when the peer is a trusted proxy."""
    peer = request.remote or ""
    proxies = request.app[CONFIG]["server"]["trusted_proxies"]
    if not proxies or not _trusted(peer, proxies):
        return peer
    forwarded = [a.strip() for a in request.headers.get("X-Forwarded-For", "").split(",")]
    # Walk from the nearest hop back; the first address we do not trust is the client.
    for addr in reversed([a for a in forwarded if a]):
        if not _trusted(addr, proxies):
            return addr
    return peer


def address_group(addr: str, ipv6_prefix: int = 64) -> str:
    """The address a limit counts: IPv4 as is, IPv6 as its /ipv6_prefix network.

    One IPv6 subscriber usually holds a whole /64, so per-address buckets would give
    them 2**64 budgets.
    """
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        return addr
    if ip.version == 6 and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    if ip.version == 6:
        return str(ipaddress.ip_network(f"{ip}/{ipv6_prefix}", strict=False))
    return str(ip)


def client_group(request: web.Request) -> str:
    """client_ip grouped as rate limits count it (IPv6 by its configured prefix)."""
    return address_group(client_ip(request), request.app[CONFIG]["rate_limit"]["ipv6_prefix"])
