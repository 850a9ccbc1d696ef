"""Waiting for a cluster's nodes to run, and to be gone: the one loop both engines use.

``Wait`` is ``Runtime.wait`` (the direct engine, on its injectable clock) or
``waiter(interval_s)`` (the stacks' dynamic resources, on the adapter's poll interval); both
end in ``provisioner.waiting.wait_until``.

- ``wait_running(wait, adapter, cluster_id, wanted, timeout_s=...)``: blocks until every node
  named in ``wanted`` is RUNNING; returns the provider's listing at that moment. StackError as
  soon as one of them is FAILED; ``WaitTimeout`` (``last``: the last listing) at the deadline.
- ``unanswerable(nodes)``: the nodes whose SSH endpoint is a documentation address (TEST-NET-1/2/3,
  2001:db8::/32, what the fake provider servers hand out): no machine ever answers there, so a
  caller about to wait for SSH says so at once instead of waiting out its timeout.
- ``wait_deleted(wait, adapter, cluster_id, timeout_s=...)``: blocks until no node of the
  cluster is pending or running (FAILED and STOPPING count as gone: they were asked to be
  deleted, and some providers keep failed instances listed without billing them).

Both take ``ids``: only those instances are looked at (the ones this create made, the ones a
delete took), so another owner's or another create's node of the same name never satisfies or
blocks the wait (providers.ownership).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Collection, Iterable
from typing import Protocol

from provisioner.errors import StackError
from provisioner.providers.base import Node, NodeStatus, Provider
from provisioner.waiting import wait_until

LIVE = frozenset({NodeStatus.PENDING, NodeStatus.RUNNING})


class Wait(Protocol):
    def __call__(
        self, poll: Callable[[], list[Node]], done: Callable[[list[Node]], bool], *, timeout_s: float, what: str
    ) -> list[Node]: ...


def waiter(interval_s: float) -> Wait:
    """A ``Wait`` on the wall clock, polling every ``interval_s`` (backing off to 30 s)."""

    def wait(
        poll: Callable[[], list[Node]], done: Callable[[list[Node]], bool], *, timeout_s: float, what: str
    ) -> list[Node]:
        return wait_until(poll, done, timeout_s=timeout_s, interval_s=interval_s, what=what)

    return wait


def _listing(adapter: Provider, cluster_id: str, ids: Collection[str] | None) -> Callable[[], list[Node]]:
    if ids is None:
        return lambda: adapter.get_nodes(cluster_id)
    chosen = set(ids)
    return lambda: [node for node in adapter.get_nodes(cluster_id) if node.id in chosen]


def wait_running(
    wait: Wait,
    adapter: Provider,
    cluster_id: str,
    wanted: Collection[str],
    *,
    timeout_s: float,
    ids: Collection[str] | None = None,
) -> list[Node]:
    """The cluster's nodes once every one in ``wanted`` runs. See the module docstring."""
    names = set(wanted)

    def running(nodes: list[Node]) -> bool:
        failed = [
            f"{n.name} ({n.provider_state or n.status.value})"
            for n in nodes
            if n.name in names and n.status is NodeStatus.FAILED
        ]
        if failed:
            raise StackError(f"node(s) {', '.join(failed)} of {cluster_id} failed to start")
        return names <= {n.name for n in nodes if n.status is NodeStatus.RUNNING}

    return wait(
        _listing(adapter, cluster_id, ids),
        running,
        timeout_s=timeout_s,
        what=f"the {len(names)} node(s) of {cluster_id} to run",
    )


_DOCUMENTATION = tuple(
    ipaddress.ip_network(net) for net in ("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "2001:db8::/32")
)


def unanswerable(nodes: Iterable[Node]) -> list[str]:
    """``name (address)`` of each node whose SSH endpoint is a documentation address. Pure."""
    found = []
    for node in nodes:
        endpoint = node.ssh_endpoint()
        if endpoint is None:
            continue
        try:
            address = ipaddress.ip_address(endpoint[0])
        except ValueError:
            continue  # a host name: it may well answer
        if any(address in net for net in _DOCUMENTATION):
            found.append(f"{node.name} ({endpoint[0]})")
    return found


def wait_deleted(
    wait: Wait, adapter: Provider, cluster_id: str, *, timeout_s: float, ids: Collection[str] | None = None
) -> list[Node]:
    """The cluster's listing once none of its nodes is pending or running."""
    return wait(
        _listing(adapter, cluster_id, ids),
        lambda nodes: all(n.status not in LIVE for n in nodes),
        timeout_s=timeout_s,
        what=f"the nodes of {cluster_id} to be deleted",
    )


__all__ = ["LIVE", "Wait", "unanswerable", "wait_deleted", "wait_running", "waiter"]
