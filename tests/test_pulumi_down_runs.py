"""The pulumi engine's ``down`` keeps to the stack's run too (issue 27, the run mark).

After ``pulumi destroy`` the engine sweeps the cluster for nodes a killed engine bought but never
recorded (lifecycle.stack_faults.sweep). Those carry the stack's run mark (the nodes' ``run`` input,
the AWS/GCP run tag or label: ``stack_runs``) or the record's; a node an earlier run of the name left
alive is not deleted but named in one ``other-runs`` line with the gc that removes it. With no record
and no run in the stack (the rescue) the sweep deletes every node of the name, as the direct ``down``.
On the Lambda fake; the stack is a stand-in with the state ``state()`` returns.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from provisioner.lifecycle.pulumi_engine import _of_stack
from provisioner.lifecycle.realize import cluster_secrets
from provisioner.lifecycle.stack_faults import stack_runs, sweep
from provisioner.providers.base import RUN_TAG, owner_id
from provisioner.realize.inputs import RunFacts, realize_input
from tests.conftest import need_shared
from tests.test_lifecycle_support import LAMBDA_SPEC, fast_provider, plans_for, served_fake

RUN_A = "20261123-090000-0a1b2c"
RUN_B = "20261129-010203-0f0e0d"


@dataclass
class StandInStack:
    resources: list[dict[str, Any]]

    def state(self) -> dict[str, Any]:  # pulumi_stack.EngineStack's read of the stack's state
        return {"resources": self.resources, "pending_operations": []}


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("PROVISIONER_OWNER", "tester")


def test_stack_runs_reads_the_neocloud_nodes_and_the_aws_gcp_marks() -> None:
    stack = StandInStack(
        [
            {"inputs": {"nodes": [{"name": "n0", "run": RUN_B}, {"name": "n1"}]}},
            {"inputs": {"tags": {RUN_TAG: RUN_A, "Name": "x"}}},
            {"inputs": {"labels": {RUN_TAG: "20261127-000000-abcdef"}}},
            {"inputs": {"tags": "not a map"}},
        ]
    )
    assert stack_runs(stack) == {RUN_A, RUN_B, "20261127-000000-abcdef"}
    assert stack_runs(StandInStack([{"inputs": {"nodes": [{"name": "n0"}]}}])) == set()


@pytest.fixture
def two_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, str, list[str], str]]:
    """The stack's run B left 2 nodes unrecorded; run A's ``lc-lambda-9`` is alive under the same name."""
    need_shared("provider-apis", "lambda", "openapi-1.10.0.json")
    plan = plans_for(LAMBDA_SPEC, tmp_path, count=1)[0]
    with served_fake("lambda", monkeypatch):
        adapter = fast_provider("lambda")  # Lambda publishes 1 launch per 12 s: 3 launches took ~30 s
        secrets = cluster_secrets(plan.cluster_id)
        ours = adapter.create_nodes(
            plan.cluster_id, realize_input(plan, secrets, RunFacts(owner_id(), None, run=RUN_B)).specs
        )
        spec = realize_input(plan, secrets, RunFacts(owner_id(), None, run=RUN_A)).specs[-1]
        (theirs,) = adapter.create_nodes(plan.cluster_id, [spec.model_copy(update={"name": "lc-lambda-9"})])
        yield adapter, plan.cluster_id, [n.id for n in ours], theirs.id


def _live(adapter: Any, cid: str) -> set[str]:
    return {n.id for n in adapter.get_nodes(cid) if n.status.value in ("pending", "running")}


def test_the_sweep_after_a_destroy_keeps_another_runs_node_and_names_it(two_runs: Any) -> None:
    adapter, cid, ours, theirs = two_runs
    events: list[dict[str, Any]] = []

    def emit(event: str, /, *, message: str, **fields: Any) -> None:
        events.append({"event": event, "message": message, **fields})

    select = _of_stack(stack_runs(StandInStack([{"inputs": {"nodes": [{"name": "n0", "run": RUN_B}]}}])), None)
    sweep("lambda", cid, emit, select=select)
    assert _live(adapter, cid) == {theirs}
    (other,) = [e for e in events if e["event"] == "other-runs"]
    assert other["message"] == (
        f"not deleted: 1 node(s) of {cid} on lambda of another run: lc-lambda-9 ({theirs}, run {RUN_A}); "
        f"remove with: provisioner gc --provider lambda --cluster {cid} --yes"
    )
    assert sorted(ours) != [] and not set(ours) & _live(adapter, cid)


def test_the_sweep_of_a_record_keeps_to_its_run_and_the_rescue_takes_every_run(two_runs: Any) -> None:
    adapter, cid, _ours, theirs = two_runs
    assert _of_stack(set(), None) is None  # no record, no run in the stack: every node of the name
    mine = _of_stack(set(), lambda node: node.run == RUN_B)  # the record's run (down passes of_run)
    sweep("lambda", cid, lambda event, /, *, message, **fields: None, select=mine)
    assert _live(adapter, cid) == {theirs}
    sweep("lambda", cid, lambda event, /, *, message, **fields: None, select=None)
    assert _live(adapter, cid) == set()
