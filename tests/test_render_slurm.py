"""Slurm rendering: NodeName/Gres/RealMemory from the offer, topology tree, epilog drain hook."""

from __future__ import annotations

import datetime as dt
import subprocess
from pathlib import Path

import pytest

from provisioner.errors import PlanError, SpecError
from provisioner.loader import parse_spec
from provisioner.offer import Offer
from provisioner.plan import CostBreakdown, Option, Plan
from provisioner.render import render_cluster
from provisioner.render.views import cluster_view, hostlist, real_memory_mib
from provisioner.secrets import ClusterSecrets
from provisioner.spec import ClusterSpec

CANARY = ClusterSecrets(
    munge_key_b64="Q0FOQVJZLW11bmdlLWtleS0wMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMA==",
    k3s_token="CANARYk3sTOKEN0123456789abcdef",
)


def make_offer(**overrides: object) -> Offer:
    fields: dict[str, object] = {
        "provider": "aws",
        "instance_type": "p5.48xlarge",
        "region": "us-east-1",
        "gpu_model": "H100",
        "gpus": 8,
        "gpu_memory_gib": 80,
        "vcpus": 192,
        "memory_gib": 2048,
        "local_nvme_gib": 30400,
        "fabric": "efa",
        "fabric_gbps": 3200,
        "price_per_hour_usd": 98.32,
        "interruptions_per_node_hour": 0.001,
        "interruption_basis": "test",
        "max_nodes": 64,
    }
    fields.update(overrides)
    return Offer.model_validate(fields)


def make_plan(spec: dict[str, object] | None = None, nodes: int = 2, **offer_overrides: object) -> Plan:
    """A hand-built Plan (no optimizer): ``nodes`` nodes of ``make_offer(**offer_overrides)``."""
    offer = make_offer(**offer_overrides)
    raw: dict[str, object] = {
        "name": "llm-pretrain",
        "gpus": {"model": [offer.gpu_model], "count": offer.gpus * nodes},
        "control_plane": "slurm",
        "storage": {"checkpoint_nvme_gib_per_node": 1000, "shared": {"kind": "nfs", "size_gib": 500}},
        "lifetime": {"ttl_hours": 10},
        "workload": {"hours": 8},
        "access": {"ssh_public_key": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAITestKey test@example"},
    }
    raw.update(spec or {})
    cost = CostBreakdown(compute=1.0, storage=0.0, egress=0.0, interruption=0.0, total=1.0)
    option = Option(
        rank=1,
        provider=offer.provider,
        region=offer.region,
        zone=offer.zone,
        instance_type=offer.instance_type,
        gpu_model=offer.gpu_model,
        gpus_per_node=offer.gpus,
        nodes=nodes,
        spot=False,
        hourly_usd=(offer.price_per_hour_usd or 1) * nodes,
        cost=cost,
        expected_interruptions=0.0,
        offer=offer,
    )
    return Plan(
        spec=ClusterSpec.model_validate(raw), option=option, catalog_as_of=dt.date(2026, 1, 1), catalog_origin="test"
    )


def conf_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def test_slurm_conf_node_line_comes_from_the_offer() -> None:
    files = render_cluster(make_plan(nodes=2), CANARY)
    conf = conf_lines(files["slurm/slurm.conf"])
    node_lines = [line for line in conf if line.startswith("NodeName=")]
    assert node_lines == [
        f"NodeName=llm-pretrain-[0-1] CPUs=192 RealMemory={real_memory_mib(2048)} Gres=gpu:h100:8 State=UNKNOWN"
    ]
    for required in (
        "SelectType=select/cons_tres",
        "GresTypes=gpu",
        "TopologyPlugin=topology/tree",
        "Epilog=/etc/slurm/epilog.sh",
        "SlurmctldHost=llm-pretrain-0",
        "AccountingStorageType=accounting_storage/none",
        "PartitionName=gpu Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
    ):
        assert required in conf
    assert "slurm/slurmdbd.conf" not in files


def test_real_memory_keeps_headroom() -> None:
    assert real_memory_mib(2048) == 2048 * 1024 - 104858  # 5 % of 2 TiB, rounded up
    assert real_memory_mib(16) == 16 * 1024 - 2048  # at least 2 GiB kept back
    assert real_memory_mib(1) == 1


def test_gres_conf_lists_every_gpu_device() -> None:
    files = render_cluster(make_plan(nodes=3), CANARY)
    assert conf_lines(files["slurm/gres.conf"]) == [
        "AutoDetect=off",
        "NodeName=llm-pretrain-[0-2] Name=gpu Type=h100 File=/dev/nvidia[0-7]",
    ]
    one = render_cluster(make_plan(nodes=1, gpus=1, gpu_model="RTX4090", instance_type="x"), CANARY)
    assert "Type=rtx4090 File=/dev/nvidia[0]" in one["slurm/gres.conf"]
    assert "Gres=gpu:rtx4090:1" in one["slurm/slurm.conf"]


def test_topology_defaults_to_one_switch() -> None:
    files = render_cluster(make_plan(nodes=2), CANARY)
    assert conf_lines(files["slurm/topology.conf"]) == ["SwitchName=sw0 Nodes=llm-pretrain-0,llm-pretrain-1"]


def test_topology_tree_from_mapping() -> None:
    topo = {
        "llm-pretrain-0": ["spine0", "leaf0"],
        "llm-pretrain-1": ["spine0", "leaf0"],
        "llm-pretrain-2": ["spine0", "leaf1"],
    }
    files = render_cluster(make_plan(nodes=3), CANARY, topology=topo)
    assert conf_lines(files["slurm/topology.conf"]) == [
        "SwitchName=spine0 Switches=leaf0,leaf1",
        "SwitchName=leaf0 Nodes=llm-pretrain-0,llm-pretrain-1",
        "SwitchName=leaf1 Nodes=llm-pretrain-2",
    ]


@pytest.mark.parametrize(
    ("topology", "message"),
    [
        ({"llm-pretrain-0": ["s"]}, "no switch path for node(s) llm-pretrain-1"),
        ({"llm-pretrain-0": ["s"], "llm-pretrain-1": ["s"], "x-9": ["s"]}, "not in the plan: x-9"),
        ({"llm-pretrain-0": ["a", "l"], "llm-pretrain-1": ["b", "l"]}, "under two parents"),
        ({"llm-pretrain-0": ["a", "l"], "llm-pretrain-1": ["a"]}, "both nodes and switches"),
    ],
)
def test_bad_topology_is_a_plan_error(topology: dict[str, list[str]], message: str) -> None:
    with pytest.raises(PlanError, match=message.replace("(", r"\(").replace(")", r"\)")):
        render_cluster(make_plan(nodes=2), CANARY, topology=topology)


def test_slurmdbd_when_enabled() -> None:
    files = render_cluster(make_plan(nodes=2), CANARY, slurmdbd=True)
    assert "AccountingStorageType=accounting_storage/slurmdbd" in conf_lines(files["slurm/slurm.conf"])
    assert "AccountingStorageHost=llm-pretrain-0" in conf_lines(files["slurm/slurm.conf"])
    assert "DbdHost=localhost" in conf_lines(files["slurm/slurmdbd.conf"])  # whatever the head's hostname
    assert not any("Pass" in line for line in conf_lines(files["slurm/slurmdbd.conf"]))


def test_slurmdbd_follows_the_spec_switch() -> None:
    on = render_cluster(make_plan({"slurm": {"accounting": True}}, nodes=2), CANARY)
    off = render_cluster(make_plan(nodes=2), CANARY)
    assert "slurm/slurmdbd.conf" in on and "slurm/slurmdbd.conf" not in off
    assert "slurm/slurmdbd.conf" not in render_cluster(
        make_plan({"slurm": {"accounting": True}}), CANARY, slurmdbd=False
    )


def test_slurm_accounting_needs_slurm() -> None:
    text = "name: acct\ngpus: {count: 8}\ncontrol_plane: kubernetes\nslurm:\n  accounting: true\n"
    with pytest.raises(SpecError, match=r"^a.yaml:5:3: slurm.accounting: Slurm accounting needs control_plane: slurm$"):
        parse_spec(text, "a.yaml")


def test_hostlist_compression() -> None:
    assert hostlist(["a-0", "a-1", "a-2"]) == "a-[0-2]"
    assert hostlist(["a-0"]) == "a-0"
    assert hostlist(["a-0", "a-2", "b"]) == "a-0,a-2,b"
    assert hostlist(["n01", "n02"]) == "n01,n02"  # zero-padded names are left alone


def test_head_is_node_zero_and_runs_slurmd() -> None:
    view = cluster_view(make_plan(nodes=3))
    assert [n.role for n in view.nodes] == ["head", "worker", "worker"]
    files = render_cluster(make_plan(nodes=3), CANARY, boot_secrets=True)  # the whole document (the SSH pass's)
    head = files["cloud-init/head.yaml"]
    assert "[systemctl, restart, slurmctld]" in head and "[systemctl, restart, slurmd]" in head
    assert "[systemctl, restart, slurmctld]" not in files["cloud-init/worker.yaml"]
    assert "[systemctl, restart, slurmd]" in files["cloud-init/worker.yaml"]


def _run_epilog(tmp_path: Path, validator_rc: int | None) -> str:
    files = render_cluster(make_plan(nodes=2), CANARY)
    epilog = tmp_path / "epilog.sh"
    epilog.write_text(files["slurm/epilog.sh"])
    log = tmp_path / "scontrol.log"
    scontrol = tmp_path / "scontrol"
    scontrol.write_text(f'#!/bin/bash\necho "$@" >> {log}\n')
    scontrol.chmod(0o755)
    env = {
        "PATH": "/usr/bin:/bin",
        "SLURMD_NODENAME": "llm-pretrain-1",
        "SLURM_JOB_ID": "42",
        "PROVISIONER_SCONTROL": str(scontrol),
        "PROVISIONER_VALIDATOR": str(tmp_path / "validate"),
    }
    if validator_rc is not None:
        validator = tmp_path / "validate"
        validator.write_text(f"#!/bin/bash\necho 'checking'\necho 'XID 79 on GPU 3'\nexit {validator_rc}\n")
        validator.chmod(0o755)
    result = subprocess.run(["bash", str(epilog)], env=env, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    return log.read_text() if log.exists() else ""


def test_epilog_drains_node_when_validator_fails(tmp_path: Path) -> None:
    assert _run_epilog(tmp_path, 1) == (
        "update nodename=llm-pretrain-1 state=drain reason=validator failed: XID 79 on GPU 3\n"
    )


def test_epilog_leaves_healthy_node_alone(tmp_path: Path) -> None:
    assert _run_epilog(tmp_path, 0) == ""


def test_epilog_without_validator_does_nothing(tmp_path: Path) -> None:
    assert _run_epilog(tmp_path, None) == ""


def test_launch_sbatch_uses_plan_shape_and_fabric_env() -> None:
    text = render_cluster(make_plan(nodes=2), CANARY)["launch/train.sbatch"]
    assert "#SBATCH --nodes=2" in text
    assert "#SBATCH --gres=gpu:h100:8" in text
    assert "--nnodes=2" in text and "--nproc_per_node=8" in text
    assert 'MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)' in text
    assert 'export FI_PROVIDER="efa"' in text
    assert 'export FI_EFA_USE_DEVICE_RDMA="1"' in text
    result = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
