"""``GpuCluster`` under Pulumi's mock runtime: every example on every provider that can serve it.

``realize(args)`` registers one ``GpuCluster`` under ``pulumi.runtime.set_mocks`` and returns
what was registered (type, name, inputs, URN) and the component's resolved outputs. The mocks
play the cloud: they echo inputs and add what a real create returns (addresses, ids); they do
no provider-side validation, so the assertions pin the exact inputs (NIC layouts, security
rules, tags, scheduling) a real ``pulumi up`` would send.
"""

from __future__ import annotations

import base64
import datetime as dt
import email
import functools
import gzip
import ipaddress
import json
import math
import re
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import pulumi
import pytest

from provisioner.errors import NoFeasibleOfferError
from provisioner.loader import load_spec
from provisioner.optimizer import resolve_plan
from provisioner.plan import Plan
from provisioner.realize.hostkeys import hostkey_tokens
from provisioner.realize.inputs import RunFacts, realize_input
from provisioner.render import render_cluster
from provisioner.render.cloudinit import HOSTKEY_TOKEN_SLOT
from provisioner.secrets import ClusterSecrets
from provisioner.spec import ClusterSpec
from provisioner.stacks.cluster import GpuCluster
from provisioner.stacks.firewall import has_firewall
from provisioner.stacks.model import ClusterArgs, cluster_args
from provisioner.workflow import adapter_capabilities, choose_catalog

SECRET_SIG = "4dabf18193072939515e22adb298388d"  # Pulumi's marker for a secret value on the wire
EXPIRES = dt.datetime(2026, 11, 24, 6, 0, tzinfo=dt.UTC)
OWNER = "alice"
NODES_TYPE = "pulumi-python:dynamic/provisioner:NeocloudNodes"
OUTPUTS = ("head_address", "ssh_command", "nodes", "hourly_usd", "expires_at", "shared_fs")
PRIVATE_CIDRS = {"aws": ["10.42.0.0/16"], "gcp": ["10.32.0.0/11"]}


@dataclass
class Registered:
    typ: str
    name: str
    inputs: dict[str, Any]


@dataclass
class Recorder(pulumi.runtime.Mocks):
    resources: list[Registered] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        inputs = dict(args.inputs)
        self.resources.append(Registered(args.typ, args.name, inputs))
        outs = {k: v for k, v in inputs.items() if k != "__provider"}
        n = len(self.resources)
        if args.typ == "aws:ec2/instance:Instance":
            outs.update(privateIp=f"10.42.0.{n}", primaryNetworkInterfaceId=f"eni-{args.name}")
        elif args.typ == "aws:ec2/eip:Eip":
            outs["publicIp"] = f"198.51.100.{n}"
        elif args.typ == "aws:ec2/launchTemplate:LaunchTemplate":
            outs["latestVersion"] = 1
        elif args.typ == "aws:ec2/placementGroup:PlacementGroup":
            outs["name"] = args.name
        elif args.typ == "gcp:compute/resourcePolicy:ResourcePolicy":
            outs["selfLink"] = f"projects/proj-1/regions/r/resourcePolicies/{args.name}"
        elif args.typ == "aws:ec2/keyPair:KeyPair":
            outs["keyName"] = args.name
        elif args.typ == "aws:fsx/lustreFileSystem:LustreFileSystem":
            outs.update(dnsName="fs-1.fsx.example", mountName="abcdef")
        elif args.typ == "gcp:compute/instance:Instance":
            nics = [dict(nic) for nic in inputs.get("networkInterfaces", [])]
            nics[0]["networkIp"] = f"10.42.0.{n}"
            nics[0]["accessConfigs"] = [{"natIp": f"203.0.113.{n}"}]
            outs["networkInterfaces"] = nics
        elif args.typ == "gcp:filestore/instance:Instance":
            outs["networks"] = [{**dict(inputs["networks"][0]), "ipAddresses": ["10.42.9.2"]}]
        elif args.typ == NODES_TYPE:
            names = [node["name"] for node in inputs["nodes"]]
            outs.update(
                node_names=names,
                node_ids=[f"id-{x}" for x in names],
                public_ips=[f"192.0.2.{i + 1}" for i in range(len(names))],
                private_ips=[f"10.0.0.{i + 1}" for i in range(len(names))],
            )
        return f"{args.name}_id", outs

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
        self.calls.append(args.token)
        if args.token == "aws:ec2/getAmi:getAmi":
            return {"id": "ami-0123456789abcdef0", "name": "Deep Learning Base OSS Nvidia Driver GPU AMI"}
        if args.token == "gcp:organizations/getClientConfig:getClientConfig":
            return {"project": "proj-1"}
        return {}

    def of(self, typ: str) -> list[Registered]:
        """Registered resources of ``typ``, by name (registration order is not deterministic)."""
        return sorted((r for r in self.resources if r.typ == typ), key=lambda r: _natural(r.name))


@dataclass
class Realized:
    recorder: Recorder
    outputs: dict[str, Any]
    secret_outputs: list[str]
    urns: list[str]


def _natural(name: str) -> tuple[str, int]:
    stem, _, tail = name.rpartition("-")
    return (stem, int(tail)) if tail.isdigit() else (name, -1)


def strip_secrets(value: Any) -> Any:
    """``value`` with every secret envelope replaced by ``"<secret>"``."""
    if isinstance(value, dict):
        if value.get(SECRET_SIG):
            return "<secret>"
        return {k: strip_secrets(v) for k, v in value.items()}
    if isinstance(value, list):
        return [strip_secrets(v) for v in value]
    return value


def is_secret(value: Any) -> bool:
    return isinstance(value, dict) and bool(value.get(SECRET_SIG))


def realize(args: ClusterArgs, **kwargs: Any) -> Realized:
    """Register ``GpuCluster(args)`` under mocks; return what was registered and the outputs."""
    recorder = Recorder()
    pulumi.runtime.set_mocks(recorder, project="gpu-cluster", stack="test", preview=False)
    outputs: dict[str, Any] = {}
    secret: list[str] = []

    @pulumi.runtime.test
    def program() -> pulumi.Output[Any]:
        cluster = GpuCluster(args.cluster_id, args, **kwargs)
        values = {name: getattr(cluster, name) for name in OUTPUTS}
        flags = {name: pulumi.Output.from_input(getattr(cluster, name).is_secret()) for name in OUTPUTS}

        def keep(resolved: dict[str, Any]) -> None:
            outputs.update(resolved["values"])
            secret.extend(name for name, flag in resolved["flags"].items() if flag)

        return pulumi.Output.all(values=pulumi.Output.all(**values), flags=pulumi.Output.all(**flags)).apply(keep)

    program()
    monitor = pulumi.runtime.settings.get_monitor()
    urns = list(getattr(monitor, "resources", {}))
    return Realized(recorder, outputs, secret, urns)


def plan_on(spec: ClusterSpec, provider: str, instance_type: str | None = None) -> Plan:
    """The best plan for ``spec`` on ``provider`` alone (or its best ``instance_type`` option)."""
    only = spec.model_copy(update={"providers": spec.providers.model_copy(update={"allow": [provider], "deny": []})})
    result = resolve_plan(only, choose_catalog(None), adapter_capabilities(), keep=50)
    if instance_type is None:
        return result.to_plan()
    rank = next(o.rank for o in result.options if o.instance_type == instance_type)
    return result.to_plan(rank)


def example(name: str) -> ClusterSpec:
    return load_spec(Path(__file__).resolve().parents[1] / "examples" / name)


def args_for(plan: Plan, secrets: ClusterSecrets, **extra: Any) -> ClusterArgs:
    run = RunFacts(owner=OWNER, expires_at=EXPIRES)  # as stacks.program.build_args passes them
    return cluster_args(plan, realize_input(plan, secrets, run), run, **extra)


def plain_json(inputs: dict[str, Any]) -> str:
    return json.dumps(strip_secrets({k: v for k, v in inputs.items() if k != "__provider"}), default=str)


# ----- the matrix: every example on every provider that can serve it ------------------------------
EXAMPLE_NAMES = sorted(p.name for p in (Path(__file__).resolve().parents[1] / "examples").glob("*.yaml"))
PROVIDERS = ("aws", "gcp", "lambda", "runpod", "vastai", "fluence")


@functools.cache
def _secrets() -> ClusterSecrets:
    return ClusterSecrets.generate("stack-test")


@functools.cache
def _servable() -> list[tuple[str, str]]:
    pairs = []
    for name in EXAMPLE_NAMES:
        for provider in PROVIDERS:
            try:
                plan_on(example(name), provider)
            except NoFeasibleOfferError:
                continue
            pairs.append((name, provider))
    return pairs


def test_the_matrix_covers_every_example_and_provider() -> None:
    pairs = _servable()
    assert {name for name, _ in pairs} == set(EXAMPLE_NAMES)
    assert {provider for _, provider in pairs} == set(PROVIDERS)


TAGGED_AWS = {
    "aws:ec2/vpc:Vpc",
    "aws:ec2/internetGateway:InternetGateway",
    "aws:ec2/subnet:Subnet",
    "aws:ec2/routeTable:RouteTable",
    "aws:ec2/securityGroup:SecurityGroup",
    "aws:ec2/placementGroup:PlacementGroup",
    "aws:ec2/keyPair:KeyPair",
    "aws:ec2/launchTemplate:LaunchTemplate",
    "aws:ec2/instance:Instance",
    "aws:ec2/eip:Eip",
    "aws:fsx/lustreFileSystem:LustreFileSystem",
}
UNTAGGABLE_AWS = {"aws:ec2/routeTableAssociation:RouteTableAssociation"}


def _check_common(plan: Plan, done: Realized) -> None:
    """What every provider's cluster must satisfy: parents, secrets, outputs."""
    secrets = _secrets()
    cluster_urns = [u for u in done.urns if u.endswith(f"GpuCluster::{plan.cluster_id}")]
    assert len(cluster_urns) == 1 and "provisioner:index:GpuCluster" in cluster_urns[0]
    children = [u for u in done.urns if "::pulumi:pulumi:Stack" not in u and u not in cluster_urns]
    assert children and all("provisioner:index:GpuCluster$" in u for u in children)  # parent=self
    for resource in done.recorder.resources:
        text = plain_json(resource.inputs)
        for value in secrets.values():
            assert value not in text, f"{resource.typ} {resource.name} holds a secret in plain inputs"
    out_text = json.dumps(done.outputs, default=str)
    assert done.secret_outputs == []
    for value in (*secrets.values(), "munge", "#cloud-config"):
        assert value not in out_text
    heads = [n for n in done.outputs["nodes"] if n["role"] == "head"]
    assert [n["name"] for n in done.outputs["nodes"]] == [n.name for n in plan.nodes] and len(heads) == 1
    assert done.outputs["head_address"] == heads[0]["public_ip"] != ""
    user = "root" if plan.option.provider in ("runpod", "vastai") else "ubuntu"
    assert done.outputs["ssh_command"] == f"ssh {user}@{heads[0]['public_ip']}"
    assert done.outputs["hourly_usd"] == str(plan.option.hourly_usd)
    assert Decimal(done.outputs["hourly_usd"]) == plan.option.hourly_usd
    assert done.outputs["expires_at"] == "2026-11-24T06:00:00Z"


def _user_data_by_node(plan: Plan, rendered_key: str) -> dict[str, str]:
    rendered = render_cluster(plan, _secrets(), private_cidrs=PRIVATE_CIDRS.get(plan.option.provider))
    tokens = hostkey_tokens(plan, _secrets())  # the program fills each node's slot, as the direct engine
    out = {}
    for node in plan.nodes:
        path = {"cloud_init": f"cloud-init/{node.role}.yaml", "script": f"bootstrap/{node.role}.sh"}.get(
            node.bootstrap.value
        )
        if path:  # an entrypoint script learns its node's name from one export after the shebang
            text = _with_token(rendered[path], tokens[node.name], node.bootstrap.value == "script")
            first, _, rest = text.partition("\n")
            export = f'export PROVISIONER_NODE_NAME="${{PROVISIONER_NODE_NAME:-{node.name}}}"\n'
            out[node.name] = f"{first}\n{export}{rest}" if node.bootstrap.value == "script" else text
    return out


def _with_token(text: str, token: str, script: bool) -> str:
    """``text`` with its host key token slot filled (a script carries its files in base64, one a line)."""
    if not script:
        return text.replace(HOSTKEY_TOKEN_SLOT, token)
    slot, filled = (base64.b64encode(v.encode()).decode() for v in (HOSTKEY_TOKEN_SLOT, token))
    return text.replace(f"\n{slot}\n", f"\n{filled}\n")


def booted(user_data: str) -> str:
    """The rendered cloud-config inside ``user_data``: itself, or the cloud-config part of the
    MIME message that carries the managed filesystem's address (whose hook must name it)."""
    if not user_data.startswith("Content-Type: multipart/mixed"):
        return user_data
    parts = [p for p in email.message_from_string(user_data).walk() if not p.is_multipart()]
    assert [p.get_content_type() for p in parts] == ["text/cloud-boothook", "text/cloud-config"]
    hook = parts[0].get_payload(decode=True).decode()
    assert re.search(
        r"SHARED_FS_TARGET=%s\\n' '(fs-1\.fsx\.example@tcp:/abcdef|10\.42\.9\.2:/shared)' > "
        r"/etc/provisioner/shared-fs.env",
        hook,
    ), hook
    return str(parts[1].get_payload(decode=True).decode())


def _check_aws(plan: Plan, done: Realized) -> None:
    rec, cid = done.recorder, plan.cluster_id
    instances = rec.of("aws:ec2/instance:Instance")
    assert [i.name for i in instances] == [n.name for n in plan.nodes]
    (template,) = rec.of("aws:ec2/launchTemplate:LaunchTemplate")
    assert template.inputs["instanceType"] == plan.option.instance_type
    assert template.inputs["instanceInitiatedShutdownBehavior"] == "terminate"
    assert all(i.inputs["instanceInitiatedShutdownBehavior"] == "terminate" for i in instances)
    assert template.inputs["imageId"] == "ami-0123456789abcdef0" and "aws:ec2/getAmi:getAmi" in rec.calls
    # IMDSv2 only, one hop: a container or pod on the node gets no metadata token (issue 16)
    assert template.inputs["metadataOptions"] == {
        "httpEndpoint": "enabled",
        "httpTokens": "required",
        "httpPutResponseHopLimit": 1,
    }
    if plan.option.spot:
        assert template.inputs["instanceMarketOptions"]["marketType"] == "spot"
        assert template.inputs["instanceMarketOptions"]["spotOptions"]["instanceInterruptionBehavior"] == "terminate"
    else:
        assert "instanceMarketOptions" not in template.inputs
    groups = rec.of("aws:ec2/placementGroup:PlacementGroup")
    if len(plan.nodes) > 1:
        assert [g.inputs["strategy"] for g in groups] == ["cluster"]
        assert template.inputs["placement"]["groupName"] == groups[0].name
    else:
        assert groups == [] and "placement" not in template.inputs
    expected = _user_data_by_node(plan, "aws")
    for instance in instances:
        user_data = instance.inputs["userDataBase64"]
        assert is_secret(user_data) and "userData" not in instance.inputs
        raw = gzip.decompress(base64.b64decode(user_data["value"]))
        assert len(base64.b64decode(user_data["value"])) <= 16 * 1024  # EC2's limit, before base64
        assert booted(raw.decode()) == expected[instance.name]
        assert instance.inputs["tags"]["provisioner-node"] == instance.name
    assert len(rec.of("aws:ec2/eip:Eip")) == len(plan.nodes)
    # Security: SSH from the spec's CIDRs, everything else only from the group itself.
    (group,) = rec.of("aws:ec2/securityGroup:SecurityGroup")
    allowed = plan.spec.access.allowed_cidrs
    ssh = (
        [
            {
                "description": "SSH from access.allowed_cidrs",
                "protocol": "tcp",
                "fromPort": 22.0,
                "toPort": 22.0,
                "cidrBlocks": allowed,
            }
        ]
        if allowed
        else []
    )  # none set: closed (up refuses such a spec)
    assert group.inputs["ingress"] == [
        *ssh,
        {
            "description": "all traffic within the cluster",
            "protocol": "-1",
            "fromPort": 0.0,
            "toPort": 0.0,
            "self": True,
        },
    ]
    assert not rec.of("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    assert not rec.of("aws:ec2/securityGroupRule:SecurityGroupRule")
    for nic in template.inputs["networkInterfaces"]:
        assert nic["securityGroups"] == [f"{cid}-sg_id"] and "associatePublicIpAddress" not in nic
    (regional,) = rec.of("pulumi:providers:aws")
    assert regional.inputs["region"] == plan.option.region  # the plan's region, not the stack's
    # Tags: cluster id, owner and expiry on everything that takes tags.
    for resource in rec.resources[1:]:
        if resource.typ in UNTAGGABLE_AWS or resource.typ.startswith("pulumi:providers:"):
            continue
        assert resource.typ in TAGGED_AWS, resource.typ
        tags = resource.inputs["tags"]
        assert (tags["provisioner-cluster"], tags["provisioner-owner"], tags["provisioner-expires"]) == (
            cid,
            OWNER,
            "2026-11-24T06:00:00Z",
        ), resource.name
    kinds = {spec["resourceType"] for spec in template.inputs["tagSpecifications"]}
    assert kinds == {"instance", "volume", "network-interface"}
    lustre = rec.of("aws:fsx/lustreFileSystem:LustreFileSystem")
    managed = plan.spec.storage.shared.kind.value == "managed"
    assert len(lustre) == (1 if managed else 0)
    if managed:
        assert lustre[0].inputs["storageCapacity"] >= plan.spec.storage.shared.size_gib
        assert done.outputs["shared_fs"]["target"] == "fs-1.fsx.example@tcp:/abcdef"


def _check_gcp(plan: Plan, done: Realized) -> None:
    rec, cid = done.recorder, plan.cluster_id
    instances = rec.of("gcp:compute/instance:Instance")
    assert [i.name for i in instances] == [n.name for n in plan.nodes]
    ttl = math.ceil((plan.spec.lifetime.ttl_hours or 0) * 3600)
    expected = _user_data_by_node(plan, "gcp")
    for instance in instances:
        inputs = instance.inputs
        assert inputs["machineType"] == plan.option.instance_type and inputs["zone"] == plan.option.zone
        scheduling = inputs["scheduling"]
        assert scheduling["provisioningModel"] == ("SPOT" if plan.option.spot else "STANDARD")
        assert scheduling["maxRunDuration"] == {"seconds": float(ttl)}
        assert scheduling["instanceTerminationAction"] == "DELETE"
        assert scheduling["onHostMaintenance"] == "TERMINATE"
        metadata = inputs["metadata"]  # one secret value holding the mapping
        assert is_secret(metadata) and booted(metadata["value"]["user-data"]) == expected[instance.name]
        assert metadata["value"]["ssh-keys"] == f"ubuntu:{_secrets().ssh_public_key}"
        labels = inputs["labels"]
        assert (labels["provisioner-cluster"], labels["provisioner-owner"], labels["provisioner-expires"]) == (
            cid,
            OWNER,
            "20261124t060000z",
        )
        assert inputs["tags"] == [cid]
        nics = inputs["networkInterfaces"]
        assert nics[0]["nicType"] == "GVNIC" and nics[0]["accessConfigs"] == [{}]
        assert all("accessConfigs" not in nic for nic in nics[1:])  # only the primary faces outside
    policies = rec.of("gcp:compute/resourcePolicy:ResourcePolicy")
    if len(plan.nodes) > 1:
        (policy,) = policies
        assert policy.inputs["groupPlacementPolicy"] == {"collocation": "COLLOCATED", "vmCount": float(len(plan.nodes))}
        link = f"projects/proj-1/regions/r/resourcePolicies/{policy.name}"  # what the mock answered
        assert [i.inputs["resourcePolicies"] for i in instances] == [link] * len(instances)
    else:
        assert policies == [] and all("resourcePolicies" not in i.inputs for i in instances)
    # Security: from outside only SSH from the spec's CIDRs; inside, the cluster tag or own subnet.
    for rule in rec.of("gcp:compute/firewall:Firewall"):
        inputs = rule.inputs
        if rule.name == f"{cid}-ssh":
            assert inputs["sourceRanges"] == plan.spec.access.allowed_cidrs
            assert inputs["allows"] == [{"protocol": "tcp", "ports": ["22"]}] and inputs["targetTags"] == [cid]
        elif rule.name == f"{cid}-internal":
            assert inputs["sourceTags"] == [cid] and "sourceRanges" not in inputs
        else:
            (source,) = inputs["sourceRanges"]
            assert ipaddress.ip_network(source).is_private and ipaddress.ip_network(source).subnet_of(
                ipaddress.ip_network("10.32.0.0/11")
            )
        assert inputs["direction"] == "INGRESS"
    (place,) = rec.of("pulumi:providers:gcp")
    assert (place.inputs["region"], place.inputs["zone"]) == (plan.option.region, plan.option.zone)
    for resource in rec.resources[1:]:
        if "labels" not in resource.inputs and not resource.typ.startswith("pulumi:providers:"):
            assert (
                cid in resource.name and f"provisioner cluster {cid}; owner {OWNER}" in resource.inputs["description"]
            ), resource.typ
    managed = plan.spec.storage.shared.kind.value == "managed"
    assert len(rec.of("gcp:filestore/instance:Instance")) == (1 if managed else 0)
    if managed:
        assert done.outputs["shared_fs"]["target"] == "10.42.9.2:/shared"


def _check_neocloud(plan: Plan, done: Realized) -> None:
    rec, cid = done.recorder, plan.cluster_id
    (nodes,) = rec.of(NODES_TYPE)
    inputs = nodes.inputs
    assert inputs["provider"] == plan.option.provider and inputs["cluster_id"] == cid
    assert [n["name"] for n in inputs["nodes"]] == [n.name for n in plan.nodes]
    for node, planned in zip(inputs["nodes"], plan.nodes, strict=True):
        assert node["instance_type"] == planned.instance_type and node["region"] == planned.region
        assert node["gpus"] == planned.gpus and node["spot"] == planned.spot
        assert node.get("offer_id") == planned.offer_id and node.get("zone") == planned.zone
        assert node["ssh_public_key"] == _secrets().ssh_public_key
        # Typed fields, no tags: RunPod, Vast.ai and Fluence adapters declare no TAGS capability.
        assert "tags" not in node and (node["owner"], node["role"]) == (OWNER, planned.role)
        assert node["bootstrap"] == planned.bootstrap.value
        assert node["expires_at"] == "2026-11-24T06:00:00Z"  # the adapter writes the cluster/expiry tags
    walls = rec.of("pulumi-python:dynamic/provisioner:NeocloudFirewall")
    if has_firewall(plan.option.provider):  # the provider's own firewall: SSH from the spec's CIDRs only
        assert [(w.inputs["allowed_cidrs"], w.inputs["region"]) for w in walls] == [
            (plan.spec.access.allowed_cidrs, plan.option.region)
        ]
        assert cid in walls[0].name
    else:
        assert walls == []
    expected = _user_data_by_node(plan, plan.option.provider)
    if expected:
        assert is_secret(inputs["user_data"]) and inputs["user_data"]["value"] == expected
    else:  # SSH bootstrap (Fluence): nothing is passed at boot
        assert "user_data" not in inputs


@pytest.mark.parametrize(("name", "provider"), _servable(), ids=lambda v: str(v).removesuffix(".yaml"))
def test_every_example_on_every_provider(name: str, provider: str) -> None:
    plan = plan_on(example(name), provider)
    done = realize(args_for(plan, _secrets()))
    _check_common(plan, done)
    {"aws": _check_aws, "gcp": _check_gcp}.get(provider, _check_neocloud)(plan, done)
