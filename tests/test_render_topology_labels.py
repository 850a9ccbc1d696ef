"""A provider's switch placement becomes the Kubernetes topology labels Kueue schedules by."""

from __future__ import annotations

from pathlib import Path

from provisioner.render import render_cluster
from provisioner.render.kubernetes import TOPOLOGY_BLOCK_LABEL, TOPOLOGY_RACK_LABEL, node_labels
from provisioner.secrets import ClusterSecrets
from tests.test_lifecycle_support import plans_for

SPEC = """\
name: kq
gpus: {model: [H100], count: 16}
nodes: {count: 2}
control_plane: kubernetes
providers: {allow: [aws]}
workload: {hours: 1}
"""


def test_switch_path_sets_rack_and_block(tmp_path: Path) -> None:
    plan = plans_for(SPEC, tmp_path, 1)[0]
    guessed = node_labels(plan, 0)
    placed = node_labels(plan, 0, ["nn-1", "nn-2", "nn-3a"])
    assert (placed[TOPOLOGY_RACK_LABEL], placed[TOPOLOGY_BLOCK_LABEL]) == ("nn-3a", "nn-2")
    assert guessed[TOPOLOGY_RACK_LABEL] == "kq-placement"  # without a topology: the placement domain
    assert node_labels(plan, 0, ["leaf-only"])[TOPOLOGY_BLOCK_LABEL] == "leaf-only"


def test_rendered_nodes_register_with_their_own_rack(tmp_path: Path) -> None:
    plan = plans_for(SPEC, tmp_path, 1)[0]
    rendered = render_cluster(plan, ClusterSecrets.generate(),
                              topology={"kq-0": ["nn-1", "nn-2", "nn-3a"], "kq-1": ["nn-1", "nn-2", "nn-3b"]})
    assert f"{TOPOLOGY_RACK_LABEL}=nn-3a" in rendered["cloud-init/head.yaml"]
    assert f"{TOPOLOGY_RACK_LABEL}=nn-3b" in rendered["cloud-init/worker.yaml"]
    assert f"{TOPOLOGY_RACK_LABEL}=nn-3a" not in rendered["cloud-init/worker.yaml"]
    assert all(f"{TOPOLOGY_BLOCK_LABEL}=nn-2" in rendered[f"cloud-init/{role}.yaml"] for role in ("head", "worker"))
