"""The provider's switch placement (AWS DescribeInstanceTopology, GCE physical hosts) reaches
Slurm's topology.conf through the SSH pass of the direct engine."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from provisioner.errors import ProviderAPIError
from provisioner.providers.base import Node, NodeStatus
from provisioner.realize.sshpass import _ssh_bootstrap, switch_paths
from tests.test_lifecycle_support import LAMBDA_SPEC, instant_runtime, plans_for


class Recording:
    def __init__(self) -> None:
        self.scripts: dict[str, str] = {}

    def bootstrap(self, target: Any, script: str, *, timeout_s: float = 3600) -> None:
        self.scripts[target.node_name] = script  # the last one: the rendered bootstrap


class Placed:
    def __init__(self, found: dict[str, list[str]] | Exception) -> None:
        self.found = found

    def topology(self, cluster_id: str) -> dict[str, list[str]]:
        if isinstance(self.found, Exception):
            raise self.found
        return self.found


def _nodes(plan: Any) -> dict[str, Node]:
    return {
        n.name: Node(
            provider="lambda",
            id=f"i-{n.index}",
            name=n.name,
            cluster_id=plan.cluster_id,
            status=NodeStatus.RUNNING,
            public_ip=f"192.0.2.{10 + n.index}",
            private_ip=f"10.0.0.{10 + n.index}",
        )
        for n in plan.nodes
    }


def test_provider_topology_becomes_slurm_switches(tmp_path: Path) -> None:
    from provisioner.secrets import ClusterSecrets

    plan = plans_for(LAMBDA_SPEC, tmp_path, 1)[0]
    events: list[dict[str, Any]] = []
    rt = instant_runtime(None, events)
    head, worker = (n.name for n in plan.nodes)
    placed = Placed({head: ["spine-a", "leaf-1"], worker: ["spine-a", "leaf-2"]})
    topology = switch_paths(rt, placed, plan)  # type: ignore[arg-type]
    assert topology == {head: ["spine-a", "leaf-1"], worker: ["spine-a", "leaf-2"]}
    remote = Recording()
    _ssh_bootstrap(rt, remote, plan, ClusterSecrets.generate(), _nodes(plan), plan.nodes, topology)  # type: ignore[arg-type]
    script = remote.scripts[head]
    encoded = script.split("put_file /etc/slurm/topology.conf 0644 root:root <<'PROVISIONER_B64'\n", 1)[1]
    conf = base64.b64decode(encoded.split("\nPROVISIONER_B64", 1)[0]).decode()
    assert conf.splitlines()[1:] == [
        "SwitchName=spine-a Switches=leaf-1,leaf-2",
        f"SwitchName=leaf-1 Nodes={head}",
        f"SwitchName=leaf-2 Nodes={worker}",
    ]


def test_partial_or_failing_topology_falls_back_to_one_switch(tmp_path: Path) -> None:
    plan = plans_for(LAMBDA_SPEC, tmp_path, 1)[0]
    events: list[dict[str, Any]] = []
    rt = instant_runtime(None, events)
    head = plan.nodes[0].name
    assert switch_paths(rt, Placed({head: ["leaf-1"]}), plan) is None  # type: ignore[arg-type]
    assert switch_paths(rt, object(), plan) is None  # type: ignore[arg-type]  # no topology ability
    failing = Placed(ProviderAPIError("aws", 403, "not authorized for DescribeInstanceTopology"))
    assert switch_paths(rt, failing, plan) is None  # type: ignore[arg-type]
    assert any(e["event"] == "warning" and "flat switch" in e["message"] for e in events)
