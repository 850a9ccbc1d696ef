"""A provider's switch placement becomes the Kubernetes topology labels Kueue schedules by."""

from __future__ import annotations

import dataclasses
import re
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

import pytest
import yaml

from provisioner.render import render_cluster
from provisioner.render.cloudinit import render_cloudinit
from provisioner.render.kubernetes import TOPOLOGY_BLOCK_LABEL, TOPOLOGY_RACK_LABEL, node_labels
from provisioner.render.views import NodeView, cluster_view
from provisioner.secrets import ClusterSecrets
from tests.test_lifecycle_support import plans_for
from tests.test_render_hostile import HOSTILE, IDS, PAYLOAD, live_substitutions
from tests.test_render_slurm import CANARY, make_plan

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
    rendered = render_cluster(
        plan,
        ClusterSecrets.generate(),
        boot_secrets=True,  # k3s config: the SSH pass's
        topology={"kq-0": ["nn-1", "nn-2", "nn-3a"], "kq-1": ["nn-1", "nn-2", "nn-3b"]},
    )
    assert f"{TOPOLOGY_RACK_LABEL}=nn-3a" in rendered["cloud-init/head.yaml"]
    assert f"{TOPOLOGY_RACK_LABEL}=nn-3b" in rendered["cloud-init/worker.yaml"]
    assert f"{TOPOLOGY_RACK_LABEL}=nn-3a" not in rendered["cloud-init/worker.yaml"]
    assert all(f"{TOPOLOGY_BLOCK_LABEL}=nn-2" in rendered[f"cloud-init/{role}.yaml"] for role in ("head", "worker"))


# ----- the head sets the topology labels on nodes that registered before it was known -------------
# k3s applies node-label only when a node first registers; provisioner-k8s-apply (every bootstrap
# run, the SSH pass with the provider's topology included) relabels the registered nodes.
PLACED = {"llm-pretrain-0": ["nn-1", "nn-2", "nn-3a"], "llm-pretrain-1": ["nn-1", "nn-2", "nn-3b"]}
PLANS = {
    "aws": lambda: make_plan({"control_plane": "kubernetes"}, nodes=2),
    "gcp": lambda: make_plan(
        {"control_plane": "kubernetes"},
        nodes=2,
        provider="gcp",
        instance_type="a3-highgpu-8g",
        region="us-central1",
        zone="us-central1-a",
        fabric="ethernet",
        fabric_gbps=1000,
        local_nvme_gib=6000,
    ),
}


def _head_files(rendered: Mapping[str, str]) -> dict[str, str]:
    doc = yaml.safe_load(rendered["cloud-init/head.yaml"])
    return {entry["path"]: entry["content"] for entry in doc["write_files"]}


def _stand_in_k3s(tmp_path: Path) -> Path:
    """A ``k3s`` that records each call's argv (count, then the words, NUL-separated) and answers
    ``kubectl get nodes -o name`` with the names in ``$REGISTERED_FILE``; everything else succeeds."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "k3s").write_text(
        "#!/bin/bash\n"
        'printf \'%s\\0\' "$#" "$@" >> "$CALLS"\n'
        "if [ \"$*\" = 'kubectl get nodes -o name' ]; then sed 's|^|node/|' \"$REGISTERED_FILE\"; fi\n"
    )
    (bin_dir / "k3s").chmod(0o755)
    return bin_dir


def _calls(path: Path) -> list[list[str]]:
    words = path.read_bytes().decode("utf-8").split("\0")[:-1]
    calls = []
    while words:
        count = int(words.pop(0))
        calls.append(words[:count])
        del words[:count]
    return calls


def _run_apply(
    tmp_path: Path, rendered: Mapping[str, str], registered: list[str], wait_s: int | None = None
) -> tuple[subprocess.CompletedProcess[str], list[list[str]]]:
    """Write the head's files under a fresh root and run its provisioner-k8s-apply with the stand-in
    (``wait_s``: the wait for unregistered nodes instead of the rendered one)."""
    root = Path(tempfile.mkdtemp(dir=tmp_path))
    for path, content in _head_files(rendered).items():
        if path.startswith("/etc/provisioner/") or path == "/usr/local/sbin/provisioner-k8s-apply":
            (root / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
            (root / path.lstrip("/")).write_text(content)
    (root / "registered").write_text("".join(f"{name}\n" for name in registered))
    env = {
        "PATH": f"{_stand_in_k3s(tmp_path)}:/usr/bin:/bin",
        "PROVISIONER_ROOT": str(root),
        "CALLS": str(root / "calls"),
        "REGISTERED_FILE": str(root / "registered"),
    }
    if wait_s is not None:
        env["PROVISIONER_K8S_NODE_WAIT_S"] = str(wait_s)
    result = subprocess.run(
        ["bash", str(root / "usr/local/sbin/provisioner-k8s-apply")],
        capture_output=True,
        text=True,
        timeout=30,
        env=env,
    )
    return result, _calls(root / "calls")


def _labels(calls: list[list[str]]) -> list[list[str]]:
    return [call[1:] for call in calls if call[:2] == ["kubectl", "label"]]


@pytest.mark.parametrize("provider", sorted(PLANS))
def test_the_head_renders_every_nodes_topology_labels(provider: str) -> None:
    plan = PLANS[provider]()
    assert plan.option.provider == provider
    rendered = render_cluster(plan, CANARY, topology=PLACED)
    files = _head_files(rendered)
    assert files["/etc/provisioner/k8s-node-labels"].splitlines()[3:] == [
        f"node_labels llm-pretrain-0 {TOPOLOGY_BLOCK_LABEL}=nn-2 {TOPOLOGY_RACK_LABEL}=nn-3a",
        f"node_labels llm-pretrain-1 {TOPOLOGY_BLOCK_LABEL}=nn-2 {TOPOLOGY_RACK_LABEL}=nn-3b",
    ]
    assert "/etc/provisioner/k8s-node-labels" not in _head_files(
        {"cloud-init/head.yaml": rendered["cloud-init/worker.yaml"]}
    )
    apply = files["/usr/local/sbin/provisioner-k8s-apply"]
    assert f"TOPOLOGY_KEYS=({TOPOLOGY_BLOCK_LABEL} {TOPOLOGY_RACK_LABEL})" in apply
    # Nodes booted with the guess: wait for them to register; without a topology, no wait.
    assert "NODE_WAIT_S=${PROVISIONER_K8S_NODE_WAIT_S:-300}" in apply
    assert (
        "NODE_WAIT_S=${PROVISIONER_K8S_NODE_WAIT_S:-0}"
        in _head_files(render_cluster(plan, CANARY))["/usr/local/sbin/provisioner-k8s-apply"]
    )
    assert 'kubectl label node "$name" "${args[@]}" --overwrite' in apply
    # Every bootstrap run (the SSH pass's included) runs the apply again; a marker never skips it.
    assert re.search(r"^if begin_step provisioner-k8s-apply-[0-9a-f]{10} 1; then$", rendered["ssh/head.sh"], re.M)
    assert "provisioner-k8s-apply" not in rendered["ssh/worker.sh"]


@pytest.mark.parametrize("provider", sorted(PLANS))
def test_registered_nodes_get_the_providers_topology_over_their_boot_labels(tmp_path: Path, provider: str) -> None:
    plan = PLANS[provider]()
    nodes = ["llm-pretrain-0", "llm-pretrain-1"]
    at_boot, _ = _run_apply(tmp_path, render_cluster(plan, CANARY), nodes)
    guessed = node_labels(plan, 0)
    assert at_boot.returncode == 0, at_boot.stderr
    result, calls = _run_apply(tmp_path, render_cluster(plan, CANARY, topology=PLACED), nodes)
    assert result.returncode == 0, result.stderr
    assert _labels(calls) == [
        [
            "label",
            "node",
            "llm-pretrain-0",
            f"{TOPOLOGY_BLOCK_LABEL}=nn-2",
            f"{TOPOLOGY_RACK_LABEL}=nn-3a",
            "--overwrite",
        ],
        [
            "label",
            "node",
            "llm-pretrain-1",
            f"{TOPOLOGY_BLOCK_LABEL}=nn-2",
            f"{TOPOLOGY_RACK_LABEL}=nn-3b",
            "--overwrite",
        ],
    ]
    assert guessed[TOPOLOGY_RACK_LABEL] not in str(calls)  # the boot-time guess is gone
    # Labelled after Kueue and the bootstrap manifests, once the nodes are listed.
    order = [call[1] for call in calls]
    assert order.index("label") > max(i for i, call in enumerate(calls) if call[1] == "apply")
    assert ["kubectl", "get", "nodes", "-o", "name"] in calls
    assert "topology labels set on 2 of 2 node(s)" in result.stdout


def test_a_node_not_yet_registered_is_left_to_its_own_k3s_config(tmp_path: Path) -> None:
    plan = PLANS["aws"]()
    result, calls = _run_apply(tmp_path, render_cluster(plan, CANARY, topology=PLACED), ["llm-pretrain-0"], wait_s=0)
    assert result.returncode == 0, result.stderr
    assert [call[2] for call in _labels(calls)] == ["llm-pretrain-0"]
    assert "node llm-pretrain-1 has not registered" in result.stdout
    assert "topology labels set on 1 of 2 node(s)" in result.stdout


def test_an_owned_topology_label_a_node_no_longer_has_is_removed(tmp_path: Path) -> None:
    view = cluster_view(PLANS["aws"](), topology=None)
    labels = {"llm-pretrain-0": {TOPOLOGY_BLOCK_LABEL: "nn-2", "other": "x"}, "llm-pretrain-1": {}}
    head = render_cloudinit(view, "head", CANARY, node_labels=labels)
    result, calls = _run_apply(tmp_path, {"cloud-init/head.yaml": head}, ["llm-pretrain-0", "llm-pretrain-1"])
    assert result.returncode == 0, result.stderr
    assert _labels(calls) == [
        ["label", "node", "llm-pretrain-0", f"{TOPOLOGY_BLOCK_LABEL}=nn-2", f"{TOPOLOGY_RACK_LABEL}-", "--overwrite"],
        ["label", "node", "llm-pretrain-1", f"{TOPOLOGY_BLOCK_LABEL}-", f"{TOPOLOGY_RACK_LABEL}-", "--overwrite"],
    ]


def test_without_labels_no_node_is_waited_for_or_labelled(tmp_path: Path) -> None:
    head = render_cloudinit(cluster_view(PLANS["aws"]()), "head", CANARY)
    result, calls = _run_apply(tmp_path, {"cloud-init/head.yaml": head}, [])
    assert result.returncode == 0, result.stderr
    assert _labels(calls) == [] and "topology labels set on 0 of 0 node(s)" in result.stdout


@pytest.mark.parametrize("hostile", HOSTILE, ids=IDS)
def test_hostile_label_values_and_node_names_stay_one_quoted_word(tmp_path: Path, hostile: str) -> None:
    """A value the renderer did not coerce reaches kubectl as exactly one word and runs nothing."""
    hostile = hostile.replace(PAYLOAD, f"touch {tmp_path}/PWNED")
    view = cluster_view(PLANS["aws"]())
    benign = {"llm-pretrain-0": {TOPOLOGY_RACK_LABEL: "r1"}, "plain": {TOPOLOGY_RACK_LABEL: "r2"}}
    attacked = {"llm-pretrain-0": {TOPOLOGY_RACK_LABEL: hostile}, hostile: {TOPOLOGY_RACK_LABEL: "r2"}}
    view_nodes = dataclasses.replace(view, nodes=(view.nodes[0], NodeView("plain", 1, "worker")))
    hostile_view = dataclasses.replace(view, nodes=(view.nodes[0], NodeView(hostile, 1, "worker")))
    ours = yaml.safe_load(render_cloudinit(hostile_view, "head", CANARY, node_labels=attacked))
    theirs = yaml.safe_load(render_cloudinit(view_nodes, "head", CANARY, node_labels=benign))
    assert [f["path"] for f in ours["write_files"]] == [f["path"] for f in theirs["write_files"]]
    assert ours["runcmd"] == theirs["runcmd"]
    text = {f["path"]: f["content"] for f in ours["write_files"]}["/etc/provisioner/k8s-node-labels"]
    assert len(text.splitlines()) == 5 + hostile.count("\n") * 2  # a newline stays inside its quotes
    assert subprocess.run(["bash", "-n"], input=text, text=True, timeout=30).returncode == 0
    assert not live_substitutions(text)
    head = render_cloudinit(hostile_view, "head", CANARY, node_labels=attacked)
    result, calls = _run_apply(tmp_path, {"cloud-init/head.yaml": head}, ["llm-pretrain-0"], wait_s=0)
    assert result.returncode == 0, result.stderr
    assert _labels(calls)[0] == [
        "label",
        "node",
        "llm-pretrain-0",
        f"{TOPOLOGY_RACK_LABEL}={hostile}",
        f"{TOPOLOGY_BLOCK_LABEL}-",
        "--overwrite",
    ]
    assert not (tmp_path / "PWNED").exists()
