"""Buying one replacement node for the heal loop (lifecycle/heal.py): the create, retried and adopted,
its lease renewed, and the wait until it runs.

A rate limit, a 5xx or a lost answer is retried, re-listing first: create is idempotent on the node
name, so a purchase whose answer was lost is adopted (this run's instance of the name only, never
another run's: lifecycle.runs), never bought twice. Right after the purchase
the node's lease is marked renewed (lifecycle.lease_renewal.cover): by a burst's running renewal,
or by one the replacement's own hold starts (``watch``). A replacement that fails or is reclaimed
before it runs raises ReplacementLost; cleaning up is the caller's.
"""

from __future__ import annotations

import datetime as dt

from provisioner.errors import ProviderAPIError, RateLimitError
from provisioner.lifecycle import lease_renewal
from provisioner.lifecycle.heal_rules import RETRYABLE_STATUS, HealOptions, ReplacementLost, node_hourly
from provisioner.lifecycle.realize import Runtime, live
from provisioner.lifecycle.runs import RUN_CLOCK_MARGIN
from provisioner.money import usd_text
from provisioner.plan import Plan
from provisioner.providers.base import Node, NodeSpec, NodeStatus, Provider, owner_id


def buy_replacement(
    rt: Runtime, provider: Provider, spec: NodeSpec, plan: Plan, options: HealOptions, bought: set[str] | None = None
) -> Node:
    """Create ``spec`` on ``plan``'s option, renew its lease, wait until it runs; the running node. Its id
    goes into ``bought`` as soon as it is known (the heal's own nodes, where no run mark says so).
    Raises what the create raises once its retries are spent, ReplacementLost, WaitTimeout."""
    cluster, name = plan.cluster_id, spec.name
    rt.emit(
        "create",
        message=f"creating {name} ({plan.option.instance_type}, {plan.option.region}, {usd_text(node_hourly(plan))}/h)",
        cluster=cluster,
        node=name,
        instance_type=plan.option.instance_type,
        hourly_usd=node_hourly(plan),
    )
    rt.touched.add(plan.option.provider)
    node = _created(rt, provider, spec, plan, options)
    if bought is not None:
        bought.add(node.id)
    if spec.lease:
        lease_renewal.cover(provider, cluster, spec.lease, owner_id(), rt.now())
    return _running(rt, provider, cluster, name, node.id)


def _created(rt: Runtime, provider: Provider, spec: NodeSpec, plan: Plan, options: HealOptions) -> Node:
    cluster, name = plan.cluster_id, spec.name
    since = rt.now() - RUN_CLOCK_MARGIN
    for attempt in range(1, options.create_attempts + 1):
        try:
            with rt.held():
                created = provider.create_nodes(cluster, [spec])
            return next(n for n in created if n.name == name)
        except (RateLimitError, ProviderAPIError) as exc:
            status = getattr(exc, "status", 429)
            adopted = [n for n in live(provider.get_nodes(cluster)) if n.name == name and _of_spec(n, spec, since)]
            if adopted:  # the purchase went through; its answer did not
                rt.emit(
                    "adopt",
                    message=f"{name}: the create's answer was lost ({exc}); adopted {adopted[0].id}",
                    cluster=cluster,
                    node=name,
                    id=adopted[0].id,
                )
                return adopted[0]
            if (
                isinstance(exc, ProviderAPIError) and status not in RETRYABLE_STATUS and status != 0
            ) or attempt == options.create_attempts:
                raise
            wait_s = getattr(exc, "retry_after_s", None) or options.retry_s * attempt
            rt.emit(
                "retry", message=f"{name}: {exc}; retrying in {wait_s:g} s", cluster=cluster, node=name, attempt=attempt
            )
            rt.sleep(wait_s)
    raise AssertionError("unreachable")  # pragma: no cover


def _of_spec(node: Node, spec: NodeSpec, since: dt.datetime) -> bool:
    """Whether a listed instance of the name may be the purchase whose answer was lost: it carries the
    spec's run mark; without one (a provider with no room for it), it was launched since the create began.
    Never another run's instance (an earlier bring-up of the name left it alive)."""
    if node.run is not None and spec.run is not None:
        return node.run == spec.run
    if node.run is None and spec.run is not None:
        return node.launched_at is not None and node.launched_at >= since
    return True


def _running(rt: Runtime, provider: Provider, cluster: str, name: str, node_id: str) -> Node:
    def running(nodes: list[Node]) -> bool:
        mine = [n for n in nodes if n.name == name and n.id == node_id]
        if mine and mine[0].status in (NodeStatus.FAILED, NodeStatus.TERMINATED):
            raise ReplacementLost(
                f"replacement {node_id} is {mine[0].provider_state or mine[0].status.value} before it ran"
            )
        return bool(mine) and mine[0].status is NodeStatus.RUNNING

    nodes = rt.wait(
        lambda: provider.get_nodes(cluster),
        running,
        timeout_s=rt.timeouts.running_s,
        what=f"replacement {name} to run",
    )
    return next(n for n in nodes if n.id == node_id)


__all__ = ["buy_replacement"]
