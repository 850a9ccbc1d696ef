"""Fakes never name a routable address (issue 16, item 5).

Against a fake, ``up``/``burst`` SSH as root with the cluster key to whatever address the fake
hands out: a routable one would send that to a real Internet host. For every fake with a
harness, a create/poll/delete round is run and every request and response body the fake logged
(``FakeApp.exchanges``) is searched for IP addresses: each must be non-global (documentation,
loopback, private or unspecified), and every address the adapter reports as a node's public or
SSH address must be in a documentation range (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24,
2001:db8::/32) or loopback.
"""

from __future__ import annotations

import ipaddress
import re

import pytest

from tests.providers.contract import Rig, cluster, wait_gone, wait_running

DOCUMENTATION = tuple(
    ipaddress.ip_network(net) for net in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32")
)
_IPV4 = re.compile(r"(?<![\d.])(\d{1,3}(?:\.\d{1,3}){3})(?![\d.])")


def addresses_in(text: str) -> set[str]:
    """Every dotted-quad IPv4 address in ``text`` (version strings with a fifth part excluded)."""
    out = set()
    for found in _IPV4.findall(text):
        try:
            out.add(str(ipaddress.IPv4Address(found)))
        except ValueError:
            continue
    return out


def connectable(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    return ip.is_loopback or any(ip in net for net in DOCUMENTATION)


def test_the_checks_can_fail() -> None:
    assert addresses_in('{"ip": "195.26.3.7", "v": "1.2.3.4.5"}') == {"195.26.3.7"}
    assert ipaddress.ip_address("195.26.3.7").is_global and not connectable("195.26.3.7")
    assert ipaddress.ip_address("34.1.0.2").is_global
    assert connectable("192.0.2.9") and connectable("127.0.0.1") and not connectable("10.0.0.1")


def test_every_address_a_fake_hands_out_is_unroutable(rig: Rig) -> None:
    provider = rig.provider()
    cluster_id = cluster()
    specs = rig.harness.node_specs(2, "n")
    provider.create_nodes(cluster_id, specs)
    nodes = wait_running(provider, cluster_id, 2)
    provider.list_offers(rig.harness.offer_query)
    provider.delete_nodes(cluster_id)
    wait_gone(provider, cluster_id)
    seen: dict[str, str] = {}
    for exchange in rig.app.exchanges:
        for text in exchange.texts():
            for address in addresses_in(text):
                seen.setdefault(address, f"{exchange.method} {exchange.path}")
    assert seen, "the round logged no address at all: the check would prove nothing"
    routable = {address: where for address, where in seen.items() if ipaddress.ip_address(address).is_global}
    assert routable == {}, f"{rig.harness.name} fake names routable addresses"
    reached = [n.public_ip for n in nodes if n.public_ip] + [n.ssh_host for n in nodes if n.ssh_host]
    assert reached, f"{rig.harness.name}: no node has a public or SSH address to check"
    for address in reached:
        assert connectable(address), f"{rig.harness.name} hands out {address} as a node's address"


@pytest.mark.parametrize("text", ["195.26.0.1", "34.1.0.2", "8.8.8.8"])
def test_a_routable_address_is_caught(text: str) -> None:
    assert any(ipaddress.ip_address(a).is_global for a in addresses_in(f'"host": "{text}"'))
