"""Leases renewed on the nodes the heal loop buys (issue 28's renewal, for replacements).

A replacement is bought under the cluster's hold (lifecycle/heal.py). Inside a ``burst`` that is the
burst's hold: the replacement carries the burst's lease, is marked renewed right after its purchase
and is renewed with the other nodes at every ``RENEW_S`` of the heartbeat (each renewal lists the
cluster again). Under ``watch``, which holds the cluster only while it buys, the replacement carries
the lease of that hold, renewed while it is held and released once the node runs, as ``up`` does;
the lease ``up`` released on the other nodes is left alone (a watch that died must not make its
cluster collectable elsewhere).

AWS (boto3 against moto), GCP (google-cloud-compute against the REST fake) and Vast.ai (the
spec-validated fake) hold the marks; what each shows back through its adapter is what is asserted.
The heartbeat is driven with ``lease.beat_now`` on the runtime's fake clock: no sleeps.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from provisioner.lifecycle import lease as cluster_lease
from provisioner.lifecycle.heal import Healer, HealOptions
from provisioner.lifecycle.lease_renewal import RENEW_S
from provisioner.lifecycle.realize import Runtime, bring_up
from provisioner.lifecycle.watch import run_watch
from provisioner.plan import Plan
from provisioner.providers.base import Node, NodeStatus
from tests.test_engine_matrix import OWNER, Case, Fake, _plan, served
from tests.test_lifecycle_support import StandInRemote, instant_runtime

RENEWING = ["aws", "gcp", "vastai"]


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("PROVISIONER_OWNER", OWNER)


def _live(adapter: Any, cluster: str) -> dict[str, Node]:
    return {n.name: n for n in adapter.get_nodes(cluster) if n.status is not NodeStatus.TERMINATED}


def _cluster(name: str, tmp_path: Path) -> tuple[Plan, StandInRemote]:
    plan = _plan(name, Case(2, False, False), tmp_path, control_planes=("none",))
    return plan, StandInRemote(nodes=[n.name for n in plan.nodes])


def _runtime(fake: Fake, remote: StandInRemote, created_at: list[dt.datetime]) -> tuple[Runtime, Any]:
    """The runtime on its fake clock; ``created_at`` gets the clock's time at each ``create`` event."""
    adapter = fake.adapter()
    clock: list[Runtime] = []

    def emit(event: str, /, *, message: str, **fields: Any) -> None:
        if event == "create" and fields.get("node"):
            created_at.append(clock[0].now())

    rt = instant_runtime(remote, provider_for=lambda _name: adapter, emit=emit)
    clock.append(rt)
    return rt, adapter


@pytest.mark.parametrize("name", RENEWING)
def test_a_bursts_replacement_carries_its_lease_and_is_renewed_with_the_rest(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan, remote = _cluster(name, tmp_path)
    cluster, created_at = plan.cluster_id, []
    with served(name, monkeypatch) as fake:
        rt, adapter = _runtime(fake, remote, created_at)
        with cluster_lease.hold(cluster, "burst", now=rt.now) as mark:  # as run_burst holds it, to its teardown
            record = bring_up(plan, rt, lease=True)
            lost = _live(adapter, cluster)[plan.nodes[1].name]
            adapter.delete_nodes(cluster, [lost.id])  # reclaimed
            rt.sleep(60)  # noticed a minute later: the purchase is not at the first renewal's time
            healer = Healer(rt, record, remote, (), HealOptions(retry_s=1.0))
            created_at.clear()
            assert healer.step() == [lost.name]
            nodes = _live(adapter, cluster)
            new = nodes[lost.name]
            assert {n.lease for n in nodes.values()} == {mark.token()}  # the burst's one lease
            # marked renewed right after its purchase, not only at the next renewal
            assert len(created_at) == 1 and new.renewed_at == created_at[0] > record.created_at
            later = rt.now() + dt.timedelta(seconds=RENEW_S)
            assert cluster_lease.beat_now(cluster, later)
            assert {n: node.renewed_at for n, node in _live(adapter, cluster).items()} == {
                node.name: later for node in plan.nodes
            }


@pytest.mark.parametrize("name", RENEWING)
def test_watch_renews_its_replacements_lease_while_it_holds_the_cluster_then_releases_it(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan, remote = _cluster(name, tmp_path)
    cluster, created_at = plan.cluster_id, []
    with served(name, monkeypatch) as fake:
        rt, adapter = _runtime(fake, remote, created_at)
        record = bring_up(plan, rt)  # up is done: its lease released, its record holds the cluster
        assert {n.renewed_at for n in _live(adapter, cluster).values()} == {None}
        lost = _live(adapter, cluster)[plan.nodes[1].name]
        adapter.delete_nodes(cluster, [lost.id])
        seen: list[tuple[dt.datetime, dict[str, Node]]] = []
        wait = rt.wait

        def waited(fetch: Any, done: Any, **options: Any) -> Any:  # the replacement takes 10 min to run
            if str(options.get("what", "")).startswith("replacement"):
                assert cluster_lease.held_mark(cluster) is not None  # bought under the replacement's hold
                rt.sleep(RENEW_S)
                assert cluster_lease.beat_now(cluster, rt.now())
                seen.append((rt.now(), _live(adapter, cluster)))
            return wait(fetch, done, **options)

        rt.wait = waited  # type: ignore[method-assign]
        healer = Healer(rt, record, remote, (), HealOptions(retry_s=1.0))
        assert run_watch(healer, poll_s=30, once=True) == 0
        assert healer.replacements == 1 and len(seen) == 1
        at, held = seen[0]
        new = held[lost.name]
        assert new.lease not in (None, record.lease_id)  # the replacement's own hold's lease
        assert new.renewed_at == at  # renewed on the hold's heartbeat while it bought
        assert held[plan.nodes[0].name].renewed_at is None  # up's released lease is not renewed by a watch
        after = _live(adapter, cluster)
        assert after[lost.name].lease == new.lease
        assert {n.renewed_at for n in after.values()} == {None}  # released once bought
        assert cluster_lease.held_mark(cluster) is None
