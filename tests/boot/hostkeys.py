"""What the boot tests check of host key pinning (provisioner/realize/hostkeys.py) on booted nodes."""

from __future__ import annotations

from pathlib import Path

from provisioner.realize.hostkeys import recorded_keys
from tests.boot.backed import Machines


def assert_pinned(machines: Machines, known_hosts: Path, tokens: set[str] | int) -> None:
    """The cluster's ``known_hosts`` holds exactly one key per running node, each one of the keys in
    a node's own /etc/ssh (read from the node, not over SSH); the nodes hold ``tokens`` (the host key
    tokens their boot data brought, or how many distinct ones: 0 where a node boots with no data)."""
    own: set[str] = set()
    held: set[str] = set()
    for machine in machines.nodes.values():
        pubs = machine.exec("sh", "-c", "cat /etc/ssh/ssh_host_*_key.pub", timeout=30).stdout
        own |= {" ".join(line.split()[:2]) for line in pubs.splitlines() if line.strip()}
        token = machine.exec("sh", "-c", "cat /etc/provisioner/hostkey-token 2>/dev/null", timeout=30).stdout
        held |= set(token.split())
    pinned = recorded_keys(known_hosts.read_text())
    assert len(pinned) == len(machines.nodes) and all(key.text() in own for key in pinned), (pinned, own)
    assert held == tokens if isinstance(tokens, set) else len(held) == tokens, held
