"""The heal keeps to its own run (docs/security.md, the run mark): an instance that another run of the
same cluster name left alive under a node's name is not that node. ``watch``/``burst``'s heal never
takes it for the node (a node gone is seen gone), never deletes it, never adopts it as the
replacement, and says which instance holds the name and the ``gc`` that removes it.

Lambda (run marks: the ``provisioner-run`` tag) and Fluence (none: the record's ids and the
replacements the heal bought tell its own nodes), each with two runs of one name alive on the fake.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from provisioner.lifecycle.faults import Fault
from provisioner.lifecycle.heal import Healer, HealOptions
from provisioner.lifecycle.realize import bring_up, cluster_secrets
from provisioner.providers.base import LEASE_TAG, RUN_TAG, owner_id
from provisioner.realize.inputs import RunFacts, realize_input
from tests.conftest import need_shared
from tests.test_heal import Cluster, _state_dir, make_cluster  # noqa: F401  (fixtures)
from tests.test_lifecycle_support import FLUENCE_SPEC, StandInRemote, instant_runtime, plans_for, served_fake

RUN_A = "20261123-090000-0a1b2c"


@pytest.fixture
def cluster(make_cluster: Callable[..., Cluster]) -> Cluster:  # noqa: F811  (the imported fixture)
    return make_cluster()


def _another_runs_twin(cluster: Cluster, name: str) -> str:
    """An instance of this owner under ``name`` with run A's mark (run A's up is gone): its id."""
    ours = cluster.app.instances[cluster.id_of(name)]  # type: ignore[attr-defined]
    twin = copy.deepcopy(ours)
    twin["id"] = "0123456789abcdef0123456789abcdef"
    twin["tags"] = [
        {"key": t["key"], "value": RUN_A if t["key"] == RUN_TAG else t["value"]}
        for t in twin["tags"]
        if t["key"] != LEASE_TAG
    ]
    assert {t["key"]: t["value"] for t in twin["tags"]}[RUN_TAG] == RUN_A
    cluster.app.instances[twin["id"]] = twin  # type: ignore[attr-defined]
    return str(twin["id"])


def test_another_runs_instance_under_a_failed_nodes_name_is_neither_deleted_nor_adopted(cluster: Cluster) -> None:
    old = cluster.id_of("lc-lambda-1")
    twin = _another_runs_twin(cluster, "lc-lambda-1")
    cluster.app.set_status(old, "unhealthy")  # type: ignore[attr-defined]
    assert cluster.healer.step() == []  # not replaced: the name is held by run A's instance
    assert cluster.app.instances[twin]["status"] == "active"  # type: ignore[attr-defined]
    assert old not in [iid for _, iid in cluster.live()]  # this run's failed host was deleted
    (deleted,) = [e for e in cluster.events if e["event"] == "deleted"]
    assert deleted["ids"] == [old]
    (failed,) = [e for e in cluster.events if e["event"] == "replace-failed"]
    assert failed["error"] == (
        f"lc-lambda-1 of lc-lambda is taken by instance {twin} of another run (run {RUN_A}); it is not "
        "adopted: remove it with: provisioner gc --provider lambda --cluster lc-lambda --yes"
    )
    assert [e for e in cluster.events if e["event"] in ("kept", "adopt", "replaced")] == []


def test_a_node_gone_while_another_runs_instance_holds_its_name_is_seen_gone(cluster: Cluster) -> None:
    old = cluster.id_of("lc-lambda-1")
    twin = _another_runs_twin(cluster, "lc-lambda-1")
    cluster.app.set_status(old, "terminated")  # type: ignore[attr-defined]
    assert cluster.healer.find_faults() == [Fault("lc-lambda-1", "gone", "the provider reports it not listed")]
    assert cluster.app.instances[twin]["status"] == "active"  # type: ignore[attr-defined]


def test_on_fluence_the_heal_knows_its_nodes_by_the_records_ids(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A VM of another run under the node's name (launched after this run began, so launch times cannot
    # tell them apart; Fluence has no run mark): not this run's node, not deleted, not adopted.
    need_shared("provider-apis", "fluence")
    plan = next(p for p in plans_for(FLUENCE_SPEC, tmp_path, count=10) if p.option.region == "dulles-usa-1")
    events: list[dict[str, Any]] = []
    with served_fake("fluence", monkeypatch) as (app, _server):
        rt = instant_runtime(StandInRemote(nodes=["lc-fluence-0"]), events)
        app.clock = rt.now
        record = bring_up(plan, rt)
        (ours,) = record.node_ids.values()
        adapter = rt.provider("fluence")
        adapter.delete_nodes(plan.cluster_id, [ours])  # this run's VM is gone
        rt.sleep(600)
        spec = realize_input(plan, cluster_secrets(plan.cluster_id), RunFacts(owner_id(), None)).spec("lc-fluence-0")
        (twin,) = adapter.create_nodes(plan.cluster_id, [spec])  # another run buys the name
        assert twin.id != ours
        events.clear()
        healer = Healer(rt, record, StandInRemote(nodes=["lc-fluence-0"]), (), HealOptions(retry_s=1.0))
        assert healer.find_faults() == [Fault("lc-fluence-0", "gone", "the provider reports it ENDED")]
        assert healer.step() == []
        (failed,) = [e for e in events if e["event"] == "replace-failed"]
        assert failed["error"].startswith(f"lc-fluence-0 of lc-fluence is taken by instance {twin.id} of another run")
        alive = {n.id for n in adapter.get_nodes(plan.cluster_id) if n.status.value == "running"}
        assert alive == {twin.id}
