"""A later ``up`` of an AWS/GCP stack leaves its instances' marks as they are (issue 27, the run mark).

The run mark and the lease name the bring-up that bought an instance; the lease renewal mark
(``provisioner-renewed``) is written outside Pulumi (lifecycle.lease_renewal). Another machine's
``up`` of the stack has another run id and lease, and a refreshed state holds the renewal tag:
without ``ignore_changes`` on those paths Pulumi would plan to rewrite or remove them on every
instance. Under the mock runtime this records what each instance asks the engine to ignore
(``RegisterResourceRequest.ignoreChanges``) and shows that two programs of one cluster that differ
only in run id and lease differ in the instance inputs only at ignored paths: nothing to update,
nothing to replace.
"""

from __future__ import annotations

import datetime as dt
import functools
from typing import Any

import pulumi
import pytest
from pulumi.runtime.mocks import MockMonitor

from provisioner.plan import Plan
from provisioner.providers.base import LEASE_TAG, RENEWED_TAG, RUN_TAG
from provisioner.realize.inputs import RunFacts, realize_input
from provisioner.secrets import ClusterSecrets
from provisioner.stacks.cluster import GpuCluster
from provisioner.stacks.model import cluster_args
from tests.test_stack_cluster import OWNER, Recorder, example, plan_on

EXPIRES = dt.datetime(2026, 11, 24, 6, 0, tzinfo=dt.UTC)
INSTANCES = {"aws": ("aws:ec2/instance:Instance", "tags"), "gcp": ("gcp:compute/instance:Instance", "labels")}
RUNS = (
    ("20261128-215721-a1b2c3", "box-a-4242-20261128t215721z"),
    ("20261129-010203-0f0e0d", "box-b-77-20261129t010203z"),
)


class IgnoreRecorder(MockMonitor):
    """The mock monitor, also keeping each registered resource's ``ignoreChanges`` by name."""

    def __init__(self, mocks: Recorder) -> None:
        super().__init__(mocks)
        self.ignored: dict[str, list[str]] = {}

    def RegisterResource(self, request: Any) -> Any:
        self.ignored[request.name] = list(request.ignoreChanges)
        return super().RegisterResource(request)


@functools.cache
def _plan(provider: str) -> Plan:
    return plan_on(example("pretrain-h100-slurm.yaml"), provider)


SECRETS = ClusterSecrets.generate("marks")  # one cluster's: both runs render the same boot data


def _register(provider: str, run: str, lease: str) -> tuple[dict[str, dict[str, Any]], dict[str, list[str]]]:
    """The instance inputs (by name) and every resource's ignoreChanges of ``provider``'s stack for one run."""
    plan = _plan(provider)
    facts = RunFacts(owner=OWNER, expires_at=EXPIRES, lease=lease, run=run)
    args = cluster_args(plan, realize_input(plan, SECRETS, facts), facts)
    recorder = Recorder()
    monitor = IgnoreRecorder(recorder)
    pulumi.runtime.set_mocks(recorder, project="gpu-cluster", stack="test", preview=False, monitor=monitor)

    @pulumi.runtime.test
    def program() -> pulumi.Output[Any]:
        return GpuCluster(args.cluster_id, args).head_address

    program()
    typ, _ = INSTANCES[provider]
    return {r.name: r.inputs for r in recorder.of(typ)}, monitor.ignored


@pytest.mark.parametrize("provider", sorted(INSTANCES))
def test_a_new_run_or_lease_changes_no_instance_and_a_renewal_is_not_drift(provider: str) -> None:
    _, prop = INSTANCES[provider]
    (first, ignored), (second, _) = (_register(provider, run, lease) for run, lease in RUNS)
    assert first and sorted(first) == sorted(second)
    kept = {f'{prop}["{key}"]' for key in (LEASE_TAG, RUN_TAG, RENEWED_TAG)}
    for name, inputs in first.items():
        assert set(ignored[name]) == kept, name  # exactly the marks: any other drift is still corrected
        marks = inputs[prop]
        assert (marks[RUN_TAG], marks[LEASE_TAG]) == RUNS[0]  # the buyer's marks are written at create
        changed = {key for key in {*marks, *second[name][prop]} if marks.get(key) != second[name][prop].get(key)}
        assert changed == {RUN_TAG, LEASE_TAG}
        assert {k: v for k, v in inputs.items() if k != prop} == {k: v for k, v in second[name].items() if k != prop}
