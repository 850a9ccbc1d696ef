"""Fabric and placement details of ``GpuCluster`` under the mock runtime: the EFA layout per
AWS type, the GCP NIC layouts across extra VPCs, flex-start, image override."""

from __future__ import annotations

import pytest

from provisioner.errors import PlanError
from provisioner.spec import ClusterSpec
from provisioner.stacks.model import parse_expiry
from tests.test_stack_cluster import Realized, _secrets, args_for, example, plan_on, realize


# ----- NIC layouts -------------------------------------------------------------------------------
def _fabric_spec(gpu: str, memory_gib: int = 0) -> ClusterSpec:
    return ClusterSpec.model_validate(
        {
            "name": "nic-test",
            "gpus": {"model": [gpu], "count": 16, "min_memory_gib": memory_gib},
            "nodes": {"gpus_per_node": 8},
            "control_plane": "slurm",
            "lifetime": {"ttl_hours": 10},
            "workload": {"hours": 5},
            "access": {"allowed_cidrs": ["198.51.100.0/24", "2001:db8::/32"]},
        }
    )


@pytest.mark.parametrize(
    ("gpu", "instance_type", "cards"),
    [
        ("H100", "p5.48xlarge", 32),
        ("A100", "p4d.24xlarge", 4),
        ("H200", "p5en.48xlarge", 16),
        ("B200", "p6-b200.48xlarge", 8),
    ],
)
def test_aws_efa_layout(gpu: str, instance_type: str, cards: int) -> None:
    plan = plan_on(_fabric_spec(gpu), "aws", instance_type)
    done = realize(args_for(plan, _secrets()))
    (template,) = done.recorder.of("aws:ec2/launchTemplate:LaunchTemplate")
    layout = [
        (n["networkCardIndex"], n["deviceIndex"], n["interfaceType"]) for n in template.inputs["networkInterfaces"]
    ]
    assert layout == [(0.0, 0.0, "efa"), *((float(card), 1.0, "efa-only") for card in range(1, cards))]
    (group,) = done.recorder.of("aws:ec2/securityGroup:SecurityGroup")
    ssh = [(r.get("cidrBlocks"), r.get("ipv6CidrBlocks")) for r in group.inputs["ingress"] if r["protocol"] == "tcp"]
    assert ssh == [(["198.51.100.0/24"], None), (None, ["2001:db8::/32"])]


def test_aws_without_efa_gets_one_ena() -> None:
    plan = plan_on(example("burst-4090-marketplace.yaml"), "aws")
    done = realize(args_for(plan, _secrets()))
    (template,) = done.recorder.of("aws:ec2/launchTemplate:LaunchTemplate")
    assert [
        (n["networkCardIndex"], n["deviceIndex"], n["interfaceType"]) for n in template.inputs["networkInterfaces"]
    ] == [(0.0, 0.0, "interface")]


def _nics(done: Realized) -> list[tuple[str, str]]:
    networks = {f"{r.name}_id": r for r in done.recorder.of("gcp:compute/network:Network")}
    first = done.recorder.of("gcp:compute/instance:Instance")[0]
    return [(nic["nicType"], networks[nic["network"]].name) for nic in first.inputs["networkInterfaces"]]


def test_gcp_a3_mega_gpudirect_tcpxo_layout() -> None:
    plan = plan_on(_fabric_spec("H100"), "gcp", "a3-megagpu-8g")
    done = realize(args_for(plan, _secrets()))
    nics = _nics(done)
    assert nics == [("GVNIC", "nic-test-vpc"), *(("GVNIC", f"nic-test-data{i}") for i in range(8))]
    data = [r for r in done.recorder.of("gcp:compute/network:Network") if "data" in r.name]
    assert len(data) == 8 and all(r.inputs["mtu"] == 8244.0 and "networkProfile" not in r.inputs for r in data)
    subnets = {r.inputs["ipCidrRange"] for r in done.recorder.of("gcp:compute/subnetwork:Subnetwork")}
    assert len(subnets) == 9
    first = done.recorder.of("gcp:compute/instance:Instance")[0]
    assert len(first.inputs["scratchDisks"]) == 16 and first.inputs["scratchDisks"][0]["interface"] == "NVME"


def test_gcp_a4_rdma_layout() -> None:
    plan = plan_on(_fabric_spec("B200"), "gcp", "a4-highgpu-8g")
    done = realize(args_for(plan, _secrets()))
    assert _nics(done) == [
        ("GVNIC", "nic-test-vpc"),
        ("GVNIC", "nic-test-host2"),
        *(("MRDMA", "nic-test-rdma") for _ in range(8)),
    ]
    (rdma,) = [r for r in done.recorder.of("gcp:compute/network:Network") if r.name == "nic-test-rdma"]
    assert rdma.inputs["networkProfile"] == f"projects/proj-1/global/networkProfiles/{plan.option.zone}-vpc-roce"
    first = done.recorder.of("gcp:compute/instance:Instance")[0]
    rdma_subnets = [nic["subnetwork"] for nic in first.inputs["networkInterfaces"][2:]]
    assert len(set(rdma_subnets)) == 8 and len(first.inputs["scratchDisks"]) == 32
    # IPv6 CIDRs get their own SSH rule; nothing else opens to the outside.
    rules = {r.name: r.inputs for r in done.recorder.of("gcp:compute/firewall:Firewall")}
    assert rules["nic-test-ssh"]["sourceRanges"] == ["198.51.100.0/24"]
    assert rules["nic-test-ssh-v6"]["sourceRanges"] == ["2001:db8::/32"]
    assert rules["nic-test-ssh-v6"]["allows"] == [{"protocol": "tcp", "ports": ["22"]}]


def test_gcp_flex_start_and_no_ttl() -> None:
    spec = _fabric_spec("H100")
    plan = plan_on(
        spec.model_copy(update={"lifetime": spec.lifetime.model_copy(update={"ttl_hours": None})}),
        "gcp",
        "a3-highgpu-8g",
    )
    done = realize(args_for(plan, _secrets(), flex_start=True))
    scheduling = done.recorder.of("gcp:compute/instance:Instance")[0].inputs["scheduling"]
    assert scheduling["provisioningModel"] == "FLEX_START" and scheduling["instanceTerminationAction"] == "DELETE"
    assert scheduling["maxRunDuration"] == {"seconds": 604800.0}
    assert len(_nics(done)) == 5 and done.outputs["expires_at"] == "2026-11-24T06:00:00Z"


def test_flex_start_refused_off_gcp() -> None:
    plan = plan_on(_fabric_spec("H100"), "aws", "p5.48xlarge")
    with pytest.raises(PlanError, match="flex-start"):
        args_for(plan, _secrets(), flex_start=True)


def test_image_override_skips_the_lookup() -> None:
    plan = plan_on(_fabric_spec("H100"), "aws", "p5.48xlarge")
    done = realize(args_for(plan, _secrets(), image="ami-0fedcba9876543210"))
    (template,) = done.recorder.of("aws:ec2/launchTemplate:LaunchTemplate")
    assert template.inputs["imageId"] == "ami-0fedcba9876543210" and done.recorder.calls == []


def test_args_repr_hides_user_data() -> None:
    plan = plan_on(example("pretrain-h100-slurm.yaml"), "aws")
    args = args_for(plan, _secrets())
    assert "user_data" not in repr(args) and "#cloud-config" not in repr(args)
    assert parse_expiry(args.labels()["provisioner-expires"]) == parse_expiry(args.tags()["provisioner-expires"])


def test_layout_tables_for_types_no_example_plans() -> None:
    from provisioner.stacks.aws import efa_layout
    from provisioner.stacks.gcp import nic_layout

    p5e = efa_layout("p5e.48xlarge")  # sold through Capacity Blocks: never planned from the catalog
    assert len(p5e) == 32 and p5e[0].interface_type == "efa" and {n.interface_type for n in p5e[1:]} == {"efa-only"}
    assert [n.network_card_index for n in p5e] == list(range(32))
    assert [n.device_index for n in p5e] == [0] + [1] * 31
    assert nic_layout("a3-ultragpu-8g") == nic_layout("a4-highgpu-8g")
    assert [(n.nic_type, n.network) for n in nic_layout("a3-highgpu-8g")] == [
        ("GVNIC", "cluster"),
        *(("GVNIC", f"data{i}") for i in range(4)),
    ]
    assert [(n.nic_type, n.network) for n in nic_layout("g2-standard-96")] == [("GVNIC", "cluster")]
