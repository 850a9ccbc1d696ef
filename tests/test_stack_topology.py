"""The stacks' ``ClusterTopology`` step: the provider's placement of a stack's nodes becomes the
Slurm topology.conf and the Kueue rack/block labels pushed to them, as in the direct engine.

- under Pulumi's mock runtime: ``GpuCluster`` creates the step for multi-node plans (AWS, GCP, a neocloud),
  wired to the instances' ids and addresses, with the cluster secrets as a Pulumi secret;
- the dynamic provider's create in process, against the AWS fake's DescribeInstanceTopology
  (Slurm) and the GCP fake's physicalHostTopology (Kubernetes), with a stand-in ``Remote``
  that records the pushed scripts;
- the same through the real gRPC dynamic provider server (``python -m pulumi.dynamic``) against
  the AWS fake, where the pickled provider arrives in ``__provider`` and numbers arrive as doubles.

The nodes are bought through the adapters (tagged and labelled as ``stacks/aws.py`` and
``stacks/gcp.py`` tag and label them): the fakes stand in for what ``pulumi_aws``/``pulumi_gcp``
created.
"""

from __future__ import annotations

import base64
import functools
import json
import os
import re
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
from google.auth.credentials import AnonymousCredentials
from pulumi.dynamic.dynamic import serialize_provider
from pulumi.runtime.proto import provider_pb2, provider_pb2_grpc

from provisioner.errors import StackError
from provisioner.plan import Plan
from provisioner.providers.aws.provider import AWSProvider
from provisioner.providers.base import Node, NodeSpec, NodeStatus
from provisioner.providers.gcp.provider import GCPProvider
from provisioner.realize.sshpass import BOOT_BOOTSTRAP_DONE
from provisioner.render.kubernetes import TOPOLOGY_BLOCK_LABEL, TOPOLOGY_RACK_LABEL
from provisioner.secrets import ClusterSecrets
from provisioner.stacks.topology import ClusterTopologyProvider, secret_fields
from provisioner.testing.fakes.aws_ec2 import AWSFake
from provisioner.testing.fakes.base import RunningServer, serve
from provisioner.testing.fakes.gcp_compute import GCPFake
from tests.file_remote import FileRemote, pushed
from tests.test_lifecycle_support import plans_for
from tests.test_secrets_over_ssh import assert_no_secret_crossed
from tests.test_stack_cluster import args_for, is_secret, plain_json, realize
from tests.test_stack_grpc import _dict, _struct, dynamic_provider

TOPOLOGY_TYPE = "pulumi-python:dynamic/provisioner:ClusterTopology"
URN = "urn:pulumi:test::gpu-cluster::pulumi-python:dynamic/provisioner:ClusterTopology::c-topology"
AWS_IMAGE = "ami-12c6146b"  # an image moto ships in us-east-1
GCP_IMAGE = "projects/debian-cloud/global/images/family/debian-12"
SLURM_AWS = """\
name: topo
gpus: {model: [H100], count: 32}
nodes: {count: 4}
control_plane: slurm
providers: {allow: [aws], regions: [us-east-1]}
workload: {hours: 1}
"""
K8S_GCP = """\
name: kq
gpus: {model: [H100], count: 24}
nodes: {count: 3}
control_plane: kubernetes
providers: {allow: [gcp]}
workload: {hours: 1}
"""
HOSTS = {"kq-kq-0": ("c1", "b1", "s1", "h0"), "kq-kq-1": ("c1", "b1", "s1", "h1"), "kq-kq-2": ("c1", "b1", "s2", "h2")}
"""GCE instance name (the adapter's ``<cluster>-<node>``) -> (cluster, block, subblock, host)."""
SECRETS = ClusterSecrets.generate("topology-test")


def put_files(script: str) -> dict[str, str]:
    """The files a rendered bootstrap script writes: path -> text."""
    found = re.findall(r"put_file (\S+) \S+ \S+ <<'PROVISIONER_B64'\n(.*?)\nPROVISIONER_B64", script, re.S)
    return {path: base64.b64decode(body).decode(errors="replace") for path, body in found}


@functools.cache
def _planned(spec: str) -> Plan:
    with tempfile.TemporaryDirectory() as folder:
        return plans_for(spec, Path(folder), 1)[0]


def _plan(spec: str, _tmp_path: Path) -> Plan:
    return _planned(spec)


# ----- the component under mocks -------------------------------------------------------------------
@pytest.mark.parametrize("spec", [SLURM_AWS, K8S_GCP])
def test_component_creates_the_step_wired_to_the_nodes(spec: str, tmp_path: Path) -> None:
    plan = _plan(spec, tmp_path)
    provider = plan.option.provider
    done = realize(args_for(plan, SECRETS), plan=plan, secrets=SECRETS)
    (step,) = done.recorder.of(TOPOLOGY_TYPE)
    instance_type = {"aws": "aws:ec2/instance:Instance", "gcp": "gcp:compute/instance:Instance"}[provider]
    instances = done.recorder.of(instance_type)
    assert [r.name for r in instances] == [n.name for n in plan.nodes]
    # the mocks answer a resource's id as "<name>_id": the step gets each instance's own id
    assert step.inputs["node_ids"] == {n.name: f"{n.name}_id" for n in plan.nodes}
    assert step.inputs["public_ips"] == {n["name"]: n["public_ip"] for n in done.outputs["nodes"]}
    assert all(step.inputs["public_ips"].values())
    assert step.inputs["provider"] == provider and step.inputs["cluster_id"] == plan.cluster_id
    assert Plan.model_validate_json(step.inputs["plan_json"]) == plan
    assert step.inputs.get("project") == ("proj-1" if provider == "gcp" else None)
    assert is_secret(step.inputs["secrets"])
    text = plain_json(step.inputs)
    assert all(value not in text for value in SECRETS.values())
    assert any(u.endswith(f"{plan.cluster_id}-topology") and "GpuCluster$" in u for u in done.urns)  # parent=self


def test_no_step_without_secrets_or_for_one_bare_node_and_one_on_a_neocloud(tmp_path: Path) -> None:
    plan = _plan(SLURM_AWS, tmp_path)
    assert realize(args_for(plan, SECRETS)).recorder.of(TOPOLOGY_TYPE) == []  # no plan/secrets given
    single = _plan(SLURM_AWS.replace("count: 32", "count: 8").replace("count: 4", "count: 1"), tmp_path)
    # One Slurm node still gets the step: the munge key reaches it over SSH only, never in user data.
    assert len(realize(args_for(single, SECRETS), plan=single, secrets=SECRETS).recorder.of(TOPOLOGY_TYPE)) == 1
    bare = _plan(
        SLURM_AWS.replace("count: 32", "count: 8")
        .replace("count: 4", "count: 1")
        .replace("control_plane: slurm", "control_plane: none"),
        tmp_path,
    )
    assert bare.spec.control_plane.value == "none"
    assert realize(args_for(bare, SECRETS), plan=bare, secrets=SECRETS).recorder.of(TOPOLOGY_TYPE) == []
    # A neocloud stack gets the same step (its boot files carry no secret either), wired to the ids and
    # addresses NeocloudNodes reports for each node (the mocks answer id-<name>, 192.0.2.<n>).
    lam = _plan(SLURM_AWS.replace("allow: [aws], regions: [us-east-1]", "allow: [lambda]"), tmp_path)
    (step,) = realize(args_for(lam, SECRETS), plan=lam, secrets=SECRETS).recorder.of(TOPOLOGY_TYPE)
    assert step.inputs["provider"] == "lambda" and is_secret(step.inputs["secrets"])
    assert step.inputs["node_ids"] == {n.name: f"id-{n.name}" for n in lam.nodes}
    assert step.inputs["public_ips"] == {n.name: f"192.0.2.{i + 1}" for i, n in enumerate(lam.nodes)}


@pytest.mark.parametrize("as_config", [False, True])
def test_the_program_hands_the_step_the_secrets_it_rendered_with(as_config: bool, tmp_path: Path) -> None:
    """A plain ``pulumi up``: the program passes the plan and the kept (or secret-config) secrets."""
    from pulumi.runtime.config import set_all_config

    from provisioner.plan import save_plan
    from provisioner.secrets import load_or_create_secrets
    from tests.test_stack_program import _run

    plan = _plan(SLURM_AWS, tmp_path)
    path = tmp_path / "plan.json"
    save_plan(plan, path)
    try:
        if as_config:
            recorder, _ = _run(
                {"plan": str(path), "secrets": json.dumps(secret_fields(SECRETS))}, secret_keys=("secrets",)
            )
            used = SECRETS
        else:
            recorder, _ = _run({"plan": str(path)})
            used, _ = load_or_create_secrets(tmp_path / "plan.secrets.json")
    finally:
        set_all_config({}, [])
    (step,) = recorder.of(TOPOLOGY_TYPE)
    assert is_secret(step.inputs["secrets"]) and step.inputs["secrets"]["value"] == secret_fields(used)
    assert step.inputs["node_ids"] == {n.name: f"{n.name}_id" for n in plan.nodes}


# ----- the dynamic provider against the fakes -------------------------------------------------------
@dataclass
class Cloud:
    plan: Plan
    server: RunningServer
    adapter: Any
    nodes: dict[str, Node]
    env: dict[str, str]

    def props(self, **extra: Any) -> dict[str, Any]:
        ids = {name: node.id for name, node in self.nodes.items()}
        if self.plan.option.provider == "gcp":  # the stack's id of a GCE instance is its path
            ids = {name: f"projects/p/zones/{self.plan.option.zone}/instances/{i}" for name, i in ids.items()}
        return {
            "provider": self.plan.option.provider,
            "cluster_id": self.plan.cluster_id,
            "plan_json": self.plan.dumps(),
            "node_ids": ids,
            "public_ips": {name: node.public_ip or "" for name, node in self.nodes.items()},
            "project": "p" if self.plan.option.provider == "gcp" else None,
            "secrets": secret_fields(SECRETS),
            "ready_timeout_s": 20,
            **extra,
        }


def _running(adapter: Any, cluster_id: str, count: int) -> dict[str, Node]:
    for _ in range(50):  # the fakes show a new instance pending for a few polls
        nodes = [n for n in adapter.get_nodes(cluster_id) if n.status is NodeStatus.RUNNING]
        if len(nodes) == count:
            return {n.name: n for n in nodes}
    raise AssertionError(f"{cluster_id} never ran")


@pytest.fixture(scope="module")
def aws_fake() -> Iterator[RunningServer]:
    """One AWS fake for the module: moto loads its instance types once per process (seconds)."""
    quotas = {("us-east-1", code): 10_000.0 for code in ("L-417A185B", "L-DB2E81BA", "L-C4BD4855", "L-7212CCBC")}
    with serve(AWSFake(quotas=quotas, boot_polls=1)) as running:
        yield running
        assert running.app.validation_errors == []  # every request and answer matched botocore's shapes


@pytest.fixture
def aws_cloud(aws_fake: RunningServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cloud]:
    env = {
        "PROVISIONER_AWS_API_URL": aws_fake.url,
        "AWS_ACCESS_KEY_ID": "AKIATOPOLOGY",
        "AWS_SECRET_ACCESS_KEY": "topology-test",
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    aws_fake.app.faults.clear()  # the fake outlives the test that injected them
    plan = _plan(SLURM_AWS, tmp_path)
    assert plan.option.instance_type.startswith("p5")  # a family DescribeInstanceTopology answers for
    session = boto3.Session(region_name="us-east-1")
    ec2 = session.client("ec2", endpoint_url=aws_fake.url)
    for node in plan.nodes:  # launched as stacks/aws.py's instances are: cluster and node tags
        tags = [
            {"Key": "provisioner-cluster", "Value": plan.cluster_id},
            {"Key": "provisioner-node", "Value": node.name},
            {"Key": "Name", "Value": node.name},
        ]
        ec2.run_instances(
            ImageId=AWS_IMAGE,
            InstanceType=node.instance_type,
            MinCount=1,
            MaxCount=1,
            Placement={"AvailabilityZone": "us-east-1a"},
            TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
        )
    adapter = AWSProvider(session, regions=["us-east-1"], endpoint_url=aws_fake.url)
    nodes = _running(adapter, plan.cluster_id, len(plan.nodes))
    yield Cloud(plan, aws_fake, adapter, nodes, env)
    adapter.delete_nodes(plan.cluster_id)


@pytest.fixture
def gcp_cloud(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Cloud]:
    plan = _plan(K8S_GCP, tmp_path)
    with serve(GCPFake(quotas={"NVIDIA_H100_GPUS": (64.0, 0.0)}, hosts=HOSTS, boot_polls=2)) as running:
        env = {
            "PROVISIONER_GCP_API_URL": running.url,
            "PROVISIONER_GCP_CREDENTIALS": "anonymous",
            "PROVISIONER_GCP_PROJECT": "p",
        }
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        zone = str(plan.option.zone)
        adapter = GCPProvider("p", AnonymousCredentials(), zones=[zone], endpoint=running.url)
        adapter.create_nodes(
            plan.cluster_id,
            [
                NodeSpec(name=n.name, instance_type=n.instance_type, region=n.region, zone=zone, image=GCP_IMAGE)
                for n in plan.nodes
            ],
        )
        yield Cloud(plan, running, adapter, _running(adapter, plan.cluster_id, len(plan.nodes)), env)
        assert running.app.validation_errors == []  # answers parsed as compute_v1.Instance


def _expected_aws_conf(cloud: Cloud) -> list[str]:
    found = cloud.adapter.topology(cloud.plan.cluster_id)
    names = [n.name for n in cloud.plan.nodes]
    assert sorted(found) == names and all(len(path) == 3 for path in found.values())
    (spine,) = {path[0] for path in found.values()}
    (mid,) = {path[1] for path in found.values()}
    leaves = sorted({path[2] for path in found.values()})
    assert len(leaves) == 2  # two instances per leaf: a tree with something to say
    lines = [f"SwitchName={spine} Switches={mid}", f"SwitchName={mid} Switches={','.join(leaves)}"]
    lines += [f"SwitchName={leaf} Nodes={','.join(n for n in names if found[n][2] == leaf)}" for leaf in leaves]
    return lines


def _check_slurm(cloud: Cloud, outs: dict[str, Any], folder: Path) -> None:
    names = [n.name for n in cloud.plan.nodes]
    expected = _expected_aws_conf(cloud)
    head = cloud.plan.nodes[0].name
    assert outs["bootstrapped"] == names and outs["warnings"] == []
    assert outs["topology"] == cloud.adapter.topology(cloud.plan.cluster_id)
    assert outs["topology_conf"].splitlines()[1:] == expected
    for name in names:
        wait, script = pushed(folder, name)
        assert wait == BOOT_BOOTSTRAP_DONE
        assert put_files(script)["/etc/slurm/topology.conf"] == outs["topology_conf"]  # every node, the same tree
        # the re-render knows every node's private address: /etc/provisioner/hosts
        hosts = put_files(script)["/etc/provisioner/hosts"]
        assert all(f"{cloud.nodes[n].private_ip} {n}" in hosts for n in names), hosts
    assert (folder / f"{head}.0.sh").read_text().startswith(f"# ubuntu@{cloud.nodes[head].public_ip}\n")
    state = json.dumps(outs)
    assert all(value not in state for value in SECRETS.values()) and "secrets" not in outs
    assert_no_secret_crossed(cloud.server.app, SECRETS, sold=False)  # the step's AWS traffic (moto's answers too)


def _check_k8s(cloud: Cloud, outs: dict[str, Any], folder: Path) -> None:
    racks = {"kq-0": "gce-c1-b1-s1", "kq-1": "gce-c1-b1-s1", "kq-2": "gce-c1-b1-s2"}
    assert outs["topology"] == {name: ["gce-c1", "gce-c1-b1", rack] for name, rack in racks.items()}
    assert outs["node_labels"] == {
        name: {TOPOLOGY_BLOCK_LABEL: "gce-c1-b1", TOPOLOGY_RACK_LABEL: rack} for name, rack in racks.items()
    }
    assert outs["topology_conf"] == ""  # no Slurm here
    for name, rack in racks.items():
        files = put_files(pushed(folder, name)[-1])
        labels = files["/etc/rancher/k3s/config.yaml"] + files["/usr/local/sbin/provisioner-k3s-node"]
        assert f"{TOPOLOGY_RACK_LABEL}={rack}" in labels and f"{TOPOLOGY_BLOCK_LABEL}=gce-c1-b1" in labels
        assert "kq-placement" not in labels  # the render-time guess is gone
    state = json.dumps(outs)
    assert all(value not in state for value in SECRETS.values())
    assert_no_secret_crossed(cloud.server.app, SECRETS, sold=False)  # the step's GCP traffic


def test_create_applies_describe_instance_topology_to_slurm(aws_cloud: Cloud, tmp_path: Path) -> None:
    provider = ClusterTopologyProvider({"poll_interval_s": 0.01}, remote=FileRemote(str(tmp_path)))
    props = aws_cloud.props()
    assert provider.check({}, props).failures == []
    created = provider.create(props)
    assert created.id == f"aws/{aws_cloud.plan.cluster_id}/topology"
    _check_slurm(aws_cloud, created.outs or {}, tmp_path)
    assert any(c.route == "DescribeInstanceTopology" and c.status == 200 for c in aws_cloud.server.app.calls)

    same = provider.diff(created.id, created.outs or {}, props)
    assert not same.changes
    moved = provider.diff(created.id, created.outs or {}, {**props, "node_ids": {**props["node_ids"], "topo-1": "i-0"}})
    assert moved.changes and not moved.replaces  # a replaced node: the step runs again in place


def test_create_applies_gce_placement_to_kueue_labels(gcp_cloud: Cloud, tmp_path: Path) -> None:
    provider = ClusterTopologyProvider({"poll_interval_s": 0.01}, remote=FileRemote(str(tmp_path)))
    created = provider.create(gcp_cloud.props())
    _check_k8s(gcp_cloud, created.outs or {}, tmp_path)


def test_a_provider_that_cannot_tell_gives_one_flat_switch(aws_cloud: Cloud, tmp_path: Path) -> None:
    aws_cloud.server.app.faults.inject(
        "http_error",
        route="DescribeInstanceTopology",
        times=None,
        status=403,
        message="not authorized to perform ec2:DescribeInstanceTopology",
    )
    provider = ClusterTopologyProvider({"poll_interval_s": 0.01}, remote=FileRemote(str(tmp_path)))
    outs = provider.create(aws_cloud.props()).outs or {}
    names = [n.name for n in aws_cloud.plan.nodes]
    assert outs["topology"] == {} and outs["bootstrapped"] == names
    assert len(outs["warnings"]) == 1 and "flat switch" in outs["warnings"][0]
    assert outs["topology_conf"].splitlines()[1:] == [f"SwitchName=sw0 Nodes={','.join(names)}"]
    assert put_files(pushed(tmp_path, names[0])[-1])["/etc/slurm/topology.conf"] == outs["topology_conf"]


def test_a_planned_node_that_never_runs_is_a_stack_error(aws_cloud: Cloud, tmp_path: Path) -> None:
    aws_cloud.adapter.delete_nodes(aws_cloud.plan.cluster_id, [aws_cloud.nodes["topo-3"].id])
    provider = ClusterTopologyProvider({"poll_interval_s": 0.01}, remote=FileRemote(str(tmp_path)))
    with pytest.raises(StackError, match=r"ClusterTopology topo: .*the nodes of topo to run"):
        provider.create(aws_cloud.props(ready_timeout_s=0.3))
    assert list(tmp_path.glob("*.sh")) == []  # nothing pushed


def test_check_refuses_a_plan_of_another_cluster(aws_cloud: Cloud) -> None:
    provider = ClusterTopologyProvider()
    props = aws_cloud.props()
    failures = provider.check({}, {**props, "cluster_id": "other", "node_ids": {"x": "i-1"}}).failures
    assert sorted(f.property for f in failures) == ["cluster_id", "node_ids"]
    assert [f.property for f in provider.check({}, {**props, "plan_json": "{}"}).failures] == ["plan_json"]
    with pytest.raises(StackError, match="must not be stored"):
        ClusterTopologyProvider({"api_key": "k"})


# ----- through the engine's gRPC dynamic provider server --------------------------------------------
@pytest.fixture
def grpc_server(aws_cloud: Cloud, tmp_path: Path) -> Iterator[provider_pb2_grpc.ResourceProviderStub]:
    """The engine's dynamic provider process, with the fake's URL in its environment."""
    path = os.pathsep.join([str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")])
    with dynamic_provider(tmp_path, {**aws_cloud.env, "PYTHONPATH": path}) as stub:
        yield stub


def test_engine_path_create_diff_update_delete(
    aws_cloud: Cloud, grpc_server: provider_pb2_grpc.ResourceProviderStub, tmp_path: Path
) -> None:
    folder = tmp_path / "pushed"
    folder.mkdir()
    props = aws_cloud.props()
    props["__provider"] = serialize_provider(
        ClusterTopologyProvider({"poll_interval_s": 0.01}, remote=FileRemote(str(folder)))
    )
    wire = _struct(props)
    assert isinstance(_dict(wire)["ready_timeout_s"], float)  # 20 travels as 20.0

    checked = grpc_server.Check(provider_pb2.CheckRequest(urn=URN, olds=_struct({}), news=wire))
    assert list(checked.failures) == []
    created = grpc_server.Create(provider_pb2.CreateRequest(urn=URN, properties=checked.inputs))
    outs = _dict(created.properties)
    assert created.id == f"aws/{aws_cloud.plan.cluster_id}/topology"
    _check_slurm(aws_cloud, outs, folder)

    same = grpc_server.Diff(
        provider_pb2.DiffRequest(id=created.id, urn=URN, olds=created.properties, news=checked.inputs)
    )
    assert same.changes == provider_pb2.DiffResponse.DIFF_NONE and list(same.replaces) == []
    moved = {**props, "public_ips": {**props["public_ips"], "topo-2": "192.0.2.99"}}
    moved_in = grpc_server.Check(provider_pb2.CheckRequest(urn=URN, olds=checked.inputs, news=_struct(moved))).inputs
    diff = grpc_server.Diff(provider_pb2.DiffRequest(id=created.id, urn=URN, olds=created.properties, news=moved_in))
    assert diff.changes == provider_pb2.DiffResponse.DIFF_SOME and list(diff.replaces) == []
    updated = grpc_server.Update(
        provider_pb2.UpdateRequest(id=created.id, urn=URN, olds=created.properties, news=moved_in)
    )
    assert _dict(updated.properties)["topology"] == outs["topology"]
    assert len(pushed(folder, "topo-0")) == 4  # the step ran again: wait + bootstrap, twice

    grpc_server.Delete(provider_pb2.DeleteRequest(id=created.id, urn=URN, properties=updated.properties))
    running = [n.id for n in aws_cloud.adapter.get_nodes(aws_cloud.plan.cluster_id) if n.status is NodeStatus.RUNNING]
    assert sorted(running) == sorted(props["node_ids"].values())  # the nodes are not the step's


def test_real_ssh_to_documentation_addresses_is_refused_at_once(gcp_cloud: Cloud) -> None:
    """Without a stand-in remote the step would SSH for real: to a fake's TEST-NET nodes it says so at
    once (as the direct engine does), instead of after the SSH timeouts."""
    provider = ClusterTopologyProvider({"poll_interval_s": 0.01})
    with pytest.raises(StackError, match=r"kq-0 \(203\.0\.113\.\d+\).* have documentation \(TEST-NET\) addresses"):
        provider.create(gcp_cloud.props())
