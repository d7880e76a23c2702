"""The address rule of outgoing webhooks, on addresses themselves: every spelling counts."""

from __future__ import annotations

import ipaddress

import pytest

from hubsvc.notify.netcheck import HostRules, Refused, check_address, embedded_ipv4, forbidden_kind

# IPv6 addresses that lead to an IPv4 one, with the IPv4 address and the kind refused.
EMBEDDING = [
    ("::ffff:127.0.0.1", "127.0.0.1", "loopback"),  # IPv4-mapped
    ("2002:7f00:1::", "127.0.0.1", "loopback"),  # 6to4
    ("2002:a00:1:2:3:4:5:6", "10.0.0.1", "private"),
    ("2002:a9fe:a9fe::", "169.254.169.254", "link-local"),
    ("2002:e000:1::", "224.0.0.1", "multicast"),
    ("2002::", "0.0.0.0", "unspecified"),
    ("2002:6440:1::", "100.64.0.1", "non-public"),  # shared address space
    ("2001:0:4136:e378:8000:63bf:80ff:fffe", "127.0.0.1", "loopback"),  # Teredo: NOT of the tail
    ("2001:0:4136:e378:8000:63bf:f5ff:fffe", "10.0.0.1", "private"),
    ("::127.0.0.1", "127.0.0.1", "loopback"),  # IPv4-compatible
    ("::192.168.0.1", "192.168.0.1", "private"),
    ("64:ff9b::127.0.0.1", "127.0.0.1", "loopback"),  # NAT64 well-known prefix
    ("64:ff9b::a9fe:a9fe", "169.254.169.254", "link-local"),
]


@pytest.mark.parametrize("address, inner, kind", EMBEDDING)
def test_an_embedded_refused_ipv4_address_is_refused(address, inner, kind):
    address = ipaddress.ip_address(address)
    assert embedded_ipv4(address) == ipaddress.ip_address(inner)
    assert forbidden_kind(address) == kind
    with pytest.raises(Refused, match=f"a {kind} address .*which embeds {inner}"):
        check_address(HostRules(), "example.com", address)


@pytest.mark.parametrize(
    "address, kind",
    [
        ("::1", "loopback"),
        ("::", "unspecified"),
        ("fe80::1", "link-local"),
        ("ff02::1", "multicast"),
        ("fc00::1", "private"),
        ("fec0::1", "site-local"),
        ("2001:db8::1", "private"),
        ("64:ff9b:1::a00:1", None),
        ("100::1", "private"),
        ("127.0.0.1", "loopback"),
        ("0.0.0.0", "unspecified"),
        ("169.254.169.254", "link-local"),
    ],
)
def test_refused_kinds_of_plain_addresses(address, kind):
    found = forbidden_kind(ipaddress.ip_address(address))
    # 64:ff9b:1::/48 (NAT64 local use) is never public; Python calls it reserved or private.
    assert (found == kind) if kind else (found in ("reserved", "private"))


@pytest.mark.parametrize(
    "address", ["8.8.8.8", "2606:4700:4700::1111", "::ffff:8.8.8.8", "2002:808:808::1"]
)
def test_public_addresses_pass(address):
    address = ipaddress.ip_address(address)
    assert forbidden_kind(address) is None
    check_address(HostRules(), "example.com", address)


def test_tunnels_to_public_addresses_are_still_judged_by_their_own_prefix():
    # A Teredo or NAT64 address of a public IPv4 one is not public itself (it is
    # reached through a relay or a translator on someone's network): still refused.
    assert (
        forbidden_kind(ipaddress.ip_address("2001:0:4136:e378:8000:63bf:f7f7:f7f7")) == "private"
    )  # client 8.8.8.8
    assert forbidden_kind(ipaddress.ip_address("64:ff9b::8.8.8.8")) == "reserved"


def test_an_allowed_range_still_allows():
    rules = HostRules(["2002::/16"])
    check_address(rules, "example.com", ipaddress.ip_address("2002:7f00:1::"))
    with pytest.raises(Refused):
        check_address(
            HostRules(["127.0.0.1"]), "example.com", ipaddress.ip_address("2002:7f00:1::")
        )
