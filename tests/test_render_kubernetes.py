"""Kubernetes manifests: strict schema validation, quotas, labels, fabric resources, goldens.

Core objects go through kubernetes-validate (strict, newest bundled schemas). Kueue
objects are CRDs it does not know, so they are checked against a JSON schema written
here from Kueue's v1beta2 API (the fields this project emits, unknown keys refused).
Golden files live in tests/golden_k8s/<example name>/; refresh with UPDATE_GOLDEN=1.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import jsonschema
import kubernetes_validate
import pytest
import yaml

from provisioner.errors import SpecError
from provisioner.loader import load_spec
from provisioner.offer import Offer
from provisioner.plan import CostBreakdown, Option, Plan
from provisioner.render.kubernetes import (
    EFA_RESOURCE,
    GPU_MODEL_LABEL,
    KUEUE_API_VERSION,
    RDMA_RESOURCE,
    TOPOLOGY_LEVELS,
    label_value,
    node_labels,
    node_name,
    render_kubernetes,
)
from provisioner.spec import ClusterSpec, ControlPlane, Fabric
from tests.conftest import assert_golden_tree

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
GOLDEN = Path(__file__).parent / "golden_k8s"
K8S_VERSION = max(
    (
        p.name.removeprefix("v").removesuffix("-local")
        for p in (Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema").iterdir()
        if p.name.endswith("-local")
    ),
    key=lambda v: tuple(int(x) for x in v.split(".")),
)
CANARY = "canary-SECRET-9f8e7d6c5b4a"


# --- plans built by hand (the optimizer is exercised separately) ------------------------


def _offer(**over: object) -> Offer:
    base: dict[str, object] = dict(
        provider="aws",
        instance_type="p5.48xlarge",
        region="us-east-1",
        zone="us-east-1a",
        gpu_model="H100",
        gpus=8,
        gpu_memory_gib=80,
        vcpus=192,
        memory_gib=2048,
        local_nvme_gib=30000,
        fabric=Fabric.EFA,
        fabric_gbps=3200,
        price_per_hour_usd=98.32,
        interruptions_per_node_hour=0.0002,
        interruption_basis="test",
        max_nodes=64,
    )
    base.update(over)
    return Offer.model_validate(base)


def _plan(spec: ClusterSpec, offer: Offer, nodes: int, *, spot: bool = False) -> Plan:
    if spec.control_plane is not ControlPlane.KUBERNETES:
        spec = spec.model_copy(update={"control_plane": ControlPlane.KUBERNETES})
    cost = CostBreakdown(compute=1, storage=0, egress=0, interruption=0, total=1)
    option = Option(
        rank=1,
        provider=offer.provider,
        region=offer.region,
        zone=offer.zone,
        instance_type=offer.instance_type,
        gpu_model=offer.gpu_model,
        gpus_per_node=offer.gpus,
        nodes=nodes,
        spot=spot,
        hourly_usd=1,
        cost=cost,
        expected_interruptions=0,
        offer=offer,
    )
    return Plan(spec=spec, option=option, catalog_as_of=dt.date(2026, 1, 1), catalog_origin="test")


# One fixed offer per example, so goldens do not move when the catalog or optimizer does.
EXAMPLE_OFFERS: dict[str, tuple[Offer, int]] = {
    "lora-a100-k8s": (
        _offer(
            provider="gcp",
            instance_type="a2-ultragpu-8g",
            region="us-central1",
            zone="us-central1-a",
            gpu_model="A100",
            vcpus=96,
            memory_gib=1360,
            fabric=Fabric.ETHERNET,
            fabric_gbps=100,
            price_per_hour_usd=40.55,
            spot_price_per_hour_usd=12.0,
            spot_interruptions_per_node_hour=0.02,
        ),
        1,
    ),
    "pretrain-h100-slurm": (_offer(), 2),
    "h200-dataset-aws": (
        _offer(
            provider="lambda",
            instance_type="gpu_8x_h200_sxm5",
            region="us-east-3",
            zone=None,
            gpu_model="H200",
            gpu_memory_gib=141,
            vcpus=208,
            memory_gib=2900,
            fabric=Fabric.INFINIBAND,
            fabric_gbps=3200,
            price_per_hour_usd=30.32,
        ),
        4,
    ),
    "burst-4090-marketplace": (
        _offer(
            provider="runpod",
            instance_type="1x_RTX4090_COMMUNITY",
            region="EU-RO-1",
            zone=None,
            gpu_model="RTX4090",
            gpus=1,
            gpu_memory_gib=24,
            vcpus=16,
            memory_gib=62,
            fabric=Fabric.ETHERNET,
            fabric_gbps=10,
            price_per_hour_usd=0.34,
            reliability=0.98,
        ),
        4,
    ),
}


def _example_plan(name: str) -> Plan:
    offer, nodes = EXAMPLE_OFFERS[name]
    return _plan(load_spec(EXAMPLES / f"{name}.yaml"), offer, nodes)


def _docs(files: dict[str, str]) -> list[dict]:
    return [doc for text in files.values() for doc in yaml.safe_load_all(text) if doc is not None]


def _kind(files: dict[str, str], kind: str) -> list[dict]:
    return [doc for doc in _docs(files) if doc["kind"] == kind]


# --- Kueue schema (from the v1beta2 API types; only what we emit, unknown keys refused) ---

_NAME = {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", "maxLength": 253}
_QTY = {
    "anyOf": [
        {"type": "integer", "minimum": 0},
        {"type": "string", "pattern": r"^[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti|k|M|G|T)?$"},
    ]
}
_TOLERATION = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "key": {"type": "string"},
        "operator": {"enum": ["Exists", "Equal"]},
        "value": {"type": "string"},
        "effect": {"enum": ["NoSchedule", "PreferNoSchedule", "NoExecute"]},
    },
}


def _kueue_doc(kind: str, spec: dict, *, namespaced: bool = False) -> dict:
    meta_required = ["name", "namespace"] if namespaced else ["name"]
    return {
        "type": "object",
        "additionalProperties": False,
        "required": ["apiVersion", "kind", "metadata", "spec"],
        "properties": {
            "apiVersion": {"const": KUEUE_API_VERSION},
            "kind": {"const": kind},
            "metadata": {
                "type": "object",
                "required": meta_required,
                "additionalProperties": False,
                "properties": {"name": _NAME, "namespace": _NAME, "labels": {"type": "object"}},
            },
            "spec": spec,
        },
    }


KUEUE_SCHEMAS = {
    "Topology": _kueue_doc(
        "Topology",
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["levels"],
            "properties": {
                "levels": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 16,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["nodeLabel"],
                        "properties": {"nodeLabel": {"type": "string", "minLength": 1, "maxLength": 316}},
                    },
                }
            },
        },
    ),
    "ResourceFlavor": _kueue_doc(
        "ResourceFlavor",
        {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "nodeLabels": {
                    "type": "object",
                    "maxProperties": 8,
                    "additionalProperties": {"type": "string", "maxLength": 63},
                },
                "nodeTaints": {"type": "array"},
                "tolerations": {"type": "array", "maxItems": 8, "items": _TOLERATION},
                "topologyName": _NAME,
            },
        },
    ),
    "ClusterQueue": _kueue_doc(
        "ClusterQueue",
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["resourceGroups"],
            "properties": {
                "namespaceSelector": {"type": "object"},
                "queueingStrategy": {"enum": ["StrictFIFO", "BestEffortFIFO"]},
                "cohortName": _NAME,
                "resourceGroups": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": 16,
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "required": ["coveredResources", "flavors"],
                        "properties": {
                            "coveredResources": {"type": "array", "items": {"type": "string"}, "maxItems": 64},
                            "flavors": {
                                "type": "array",
                                "minItems": 1,
                                "maxItems": 64,
                                "items": {
                                    "type": "object",
                                    "additionalProperties": False,
                                    "required": ["name", "resources"],
                                    "properties": {
                                        "name": _NAME,
                                        "resources": {
                                            "type": "array",
                                            "items": {
                                                "type": "object",
                                                "additionalProperties": False,
                                                "required": ["name", "nominalQuota"],
                                                "properties": {
                                                    "name": {"type": "string"},
                                                    "nominalQuota": _QTY,
                                                    "borrowingLimit": _QTY,
                                                    "lendingLimit": _QTY,
                                                },
                                            },
                                        },
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    ),
    "LocalQueue": _kueue_doc(
        "LocalQueue",
        {
            "type": "object",
            "additionalProperties": False,
            "required": ["clusterQueue"],
            "properties": {"clusterQueue": _NAME},
        },
        namespaced=True,
    ),
}


def validate_all(files: dict[str, str]) -> int:
    """Validate every document: core kinds strictly against Kubernetes, Kueue kinds here."""
    count = 0
    for doc in _docs(files):
        if doc["apiVersion"].startswith("kueue.x-k8s.io/"):
            jsonschema.validate(doc, KUEUE_SCHEMAS[doc["kind"]])
        else:
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        count += 1
    return count


# --- tests ------------------------------------------------------------------------------

ALL_EXAMPLES = sorted(EXAMPLE_OFFERS)


@pytest.mark.parametrize("name", ALL_EXAMPLES)
def test_every_manifest_validates(name: str) -> None:
    files = render_kubernetes(_example_plan(name))
    assert all(path.startswith("k8s/") and path.endswith(".yaml") for path in files)
    assert validate_all(files) >= 9


def test_validator_catches_a_corrupted_manifest() -> None:
    files = render_kubernetes(_example_plan("pretrain-h100-slurm"))
    job = _kind(files, "Job")[0]
    job["spec"]["template"]["spec"]["containers"][0]["imagee"] = "typo"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, K8S_VERSION, strict=True)
    job = _kind(files, "Job")[0]
    job["spec"]["parallelism"] = "two"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, K8S_VERSION, strict=True)
    queue = _kind(files, "ClusterQueue")[0]
    queue["spec"]["resourceGroup"] = queue["spec"].pop("resourceGroups")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(queue, KUEUE_SCHEMAS["ClusterQueue"])


@pytest.mark.parametrize("name", ALL_EXAMPLES)
def test_quota_and_job_shape_follow_the_plan(name: str) -> None:
    plan = _example_plan(name)
    files = render_kubernetes(plan)
    nodes, per_node = plan.option.nodes, plan.option.gpus_per_node
    (queue,) = _kind(files, "ClusterQueue")
    quota = {r["name"]: r["nominalQuota"] for r in queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"]}
    assert quota["nvidia.com/gpu"] == nodes * per_node
    assert quota["cpu"] == nodes * plan.option.offer.vcpus
    (job,) = _kind(files, "Job")
    spec = job["spec"]
    assert spec["parallelism"] == spec["completions"] == nodes
    assert spec["completionMode"] == "Indexed" and spec["suspend"] is True
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == _kind(files, "LocalQueue")[0]["metadata"]["name"]
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == str(per_node)
    assert int(container["resources"]["requests"]["cpu"]) < plan.option.offer.vcpus
    script = _kind(files, "ConfigMap")[-1]["data"]["launch.sh"]
    assert f"--nnodes={nodes} " in script and f"--nproc-per-node={per_node} " in script
    env = {e["name"]: e["value"] for e in container["env"]}
    (service,) = _kind(files, "Service")
    assert service["spec"]["clusterIP"] == "None"
    assert pod["subdomain"] == service["metadata"]["name"]
    assert env["MASTER_ADDR"].startswith(f"{job['metadata']['name']}-0.{service['metadata']['name']}.")
    assert env["CHECKPOINT_DIR"] == plan.spec.storage.checkpoint_path
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["dshm"]["emptyDir"]["medium"] == "Memory"
    assert volumes["checkpoints"]["hostPath"]["path"] == plan.spec.storage.checkpoint_path


def _fabric_plans() -> list[tuple[str, Plan]]:
    roce = _plan(
        _example_plan("h200-dataset-aws").spec,
        _offer(provider="gcp", instance_type="a3-ultragpu-8g", fabric=Fabric.ROCE),
        2,
    )
    return [(name, _example_plan(name)) for name in ALL_EXAMPLES] + [("roce", roce)]


@pytest.mark.parametrize(("name", "plan"), _fabric_plans(), ids=[n for n, _ in _fabric_plans()])
def test_cluster_queue_covers_every_resource_the_job_requests(name: str, plan: Plan) -> None:
    # Kueue leaves a workload pending forever when it asks for a resource no ClusterQueue covers.
    files = render_kubernetes(plan)
    (queue,) = _kind(files, "ClusterQueue")
    (group,) = queue["spec"]["resourceGroups"]
    quota = {r["name"]: r["nominalQuota"] for r in group["flavors"][0]["resources"]}
    assert set(group["coveredResources"]) == set(quota)
    (container,) = _kind(files, "Job")[0]["spec"]["template"]["spec"]["containers"]
    asked = set(container["resources"]["requests"]) | set(container["resources"]["limits"])
    assert asked <= set(quota), asked - set(quota)
    for resource, count in container["resources"]["limits"].items():
        if "/" in resource:  # devices: every node's pod fits in the quota together
            assert int(count) * plan.option.nodes <= quota[resource], resource
    if plan.option.offer.fabric is Fabric.EFA:
        assert quota[EFA_RESOURCE] == 32 * plan.option.nodes
    elif plan.option.offer.fabric in (Fabric.INFINIBAND, Fabric.ROCE):
        assert quota[RDMA_RESOURCE] == 64 * plan.option.nodes
        config = _kind(files, "ConfigMap")[0]["data"]["config.json"]
        assert '"rdmaHcaMax": 64' in config
    else:
        assert set(quota) == {"cpu", "memory", "nvidia.com/gpu"}


@pytest.mark.parametrize("name", ALL_EXAMPLES)
def test_node_labels_match_flavor_topology_and_selectors(name: str) -> None:
    plan = _example_plan(name)
    files = render_kubernetes(plan)
    (flavor,) = _kind(files, "ResourceFlavor")
    daemonset = next(d for d in _kind(files, "DaemonSet") if d["metadata"]["name"] == "nvidia-device-plugin")
    ds_selector = daemonset["spec"]["template"]["spec"]["nodeSelector"]
    topologies = _kind(files, "Topology")
    common = node_labels(plan)
    assert "kubernetes.io/hostname" not in common
    for index in range(plan.option.nodes):
        labels = node_labels(plan, index)
        assert common.items() <= labels.items()
        assert all(len(v) <= 63 and label_value(v) == v for v in labels.values())
        assert flavor["spec"]["nodeLabels"].items() <= labels.items()
        assert ds_selector.items() <= labels.items()
        assert labels["kubernetes.io/hostname"] == node_name(plan, index)
        assert labels[GPU_MODEL_LABEL] == label_value(plan.option.gpu_model)
        for level in TOPOLOGY_LEVELS:
            assert level in labels
    if plan.option.nodes > 1:
        (topology,) = topologies
        assert [lvl["nodeLabel"] for lvl in topology["spec"]["levels"]] == list(TOPOLOGY_LEVELS)
        assert flavor["spec"]["topologyName"] == topology["metadata"]["name"]
    else:
        assert topologies == [] and "topologyName" not in flavor["spec"]


def test_node_labels_roles_and_racks() -> None:
    efa = _example_plan("pretrain-h100-slurm")
    assert node_labels(efa, 0)["provisioner.dev/role"] == "server"
    assert node_labels(efa, 1)["provisioner.dev/role"] == "agent"
    assert node_labels(efa, 1)["kubernetes.io/hostname"] == "llm-pretrain-1"
    # One placement request per plan: one rack, inside the zone's block.
    assert node_labels(efa)["provisioner.dev/topology-rack"] == "llm-pretrain-placement"
    assert node_labels(efa)["provisioner.dev/topology-block"] == "aws-us-east-1a"
    assert node_labels(efa)["nvidia.com/gpu.product"] == "NVIDIA-H100"
    assert node_labels(efa)["provisioner.dev/fabric"] == "efa"
    eth = _example_plan("burst-4090-marketplace")
    assert node_labels(eth)["provisioner.dev/topology-block"] == "runpod-EU-RO-1"
    assert node_labels(efa, 0)["topology.kubernetes.io/zone"] == "us-east-1a"
    assert "topology.kubernetes.io/zone" not in node_labels(eth, 0)
    with pytest.raises(ValueError, match="out of range"):
        node_labels(efa, 2)


def test_efa_plan_gets_efa_devices_and_libfabric_env() -> None:
    files = render_kubernetes(_example_plan("pretrain-h100-slurm"))
    assert "k8s/11-efa-device-plugin.yaml" in files and "k8s/11-rdma-device-plugin.yaml" not in files
    (container,) = _kind(files, "Job")[0]["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["limits"][EFA_RESOURCE] == "32"
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["FI_PROVIDER"] == "efa"
    assert "LD_LIBRARY_PATH" not in env  # prepended by the launch script instead
    assert "/opt/amazon/efa/lib" in _kind(files, "ConfigMap")[-1]["data"]["launch.sh"]
    assert "IPC_LOCK" in container["securityContext"]["capabilities"]["add"]


def test_rdma_fabrics_get_the_shared_rdma_plugin() -> None:
    files = render_kubernetes(_example_plan("h200-dataset-aws"))
    assert "k8s/11-rdma-device-plugin.yaml" in files and "k8s/11-efa-device-plugin.yaml" not in files
    (container,) = _kind(files, "Job")[0]["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["limits"][RDMA_RESOURCE] == "1"
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["NCCL_IB_DISABLE"] == "0"
    roce = _plan(
        _example_plan("h200-dataset-aws").spec,
        _offer(provider="gcp", instance_type="a3-ultragpu-8g", fabric=Fabric.ROCE),
        2,
    )
    files = render_kubernetes(roce)
    assert validate_all(files) >= 9
    assert "k8s/11-rdma-device-plugin.yaml" in files


def test_ethernet_plan_has_no_fabric_devices() -> None:
    files = render_kubernetes(_example_plan("burst-4090-marketplace"))
    assert not any(path.startswith("k8s/11-") for path in files)
    (container,) = _kind(files, "Job")[0]["spec"]["template"]["spec"]["containers"]
    assert set(container["resources"]["limits"]) == {"memory", "nvidia.com/gpu"}
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["NCCL_IB_DISABLE"] == "1"


def test_no_secret_reaches_the_manifests() -> None:
    spec = load_spec(EXAMPLES / "pretrain-h100-slurm.yaml")
    # The only free text a user controls that we render: paths. A token is never an input.
    spec = spec.model_copy(
        update={"access": spec.access.model_copy(update={"ssh_public_key": f"ssh-ed25519 AAAA{CANARY} user@host"})}
    )
    files = render_kubernetes(_plan(spec, _offer(), 2))
    text = "".join(files.values())
    assert CANARY not in text
    assert "ssh-ed25519" not in text and "token" not in text.lower()


def test_relative_checkpoint_path_is_a_located_spec_error() -> None:
    plan = _example_plan("lora-a100-k8s")
    storage = plan.spec.storage.model_copy(update={"checkpoint_path": "ckpt"})
    bad = _plan(plan.spec.model_copy(update={"storage": storage}), plan.option.offer, 1)
    with pytest.raises(SpecError, match=r"storage\.checkpoint_path: 'ckpt' must be an absolute path"):
        render_kubernetes(bad)


def test_object_names_are_unique_and_label_values_sanitised() -> None:
    for name in ALL_EXAMPLES:
        docs = _docs(render_kubernetes(_example_plan(name)))
        keys = [(d["kind"], d["metadata"]["name"], d["metadata"].get("namespace")) for d in docs]
        assert len(keys) == len(set(keys))
    assert label_value("8x H100/SXM (secure)_") == "8x-H100-SXM-secure"
    assert len(label_value("x" * 100)) == 63


def test_render_is_deterministic() -> None:
    plan = _example_plan("h200-dataset-aws")
    assert render_kubernetes(plan) == render_kubernetes(plan.model_copy())


def test_every_example_spec_has_k8s_goldens() -> None:
    assert sorted(p.stem for p in EXAMPLES.glob("*.yaml")) == ALL_EXAMPLES
    assert sorted(p.name for p in GOLDEN.iterdir() if p.is_dir()) == ALL_EXAMPLES


@pytest.mark.parametrize("name", ALL_EXAMPLES)
def test_golden(name: str) -> None:
    files = render_kubernetes(_example_plan(name))
    assert_golden_tree(GOLDEN / name, files, pattern="*.yaml")


def _resolved_plans() -> list[tuple[str, Plan]]:
    """Every example planned by the real optimizer over the bundled catalog plus the
    fixed offers above (the bundled snapshot alone may not cover every example)."""
    optimizer = pytest.importorskip("provisioner.optimizer")
    from provisioner.catalog import load_bundled_catalog
    from provisioner.catalog_model import Catalog
    from provisioner.offer import ProviderInfo

    bundled = load_bundled_catalog()
    offers = [offer for offer, _nodes in EXAMPLE_OFFERS.values()]
    providers = {offer.provider: ProviderInfo(source="test", shared_storage_usd_per_gib_month=0.3) for offer in offers}
    for name, info in bundled.providers.items():  # keep bundled facts, but let every one host a FS
        fs_price = info.shared_storage_usd_per_gib_month or 0.3
        providers[name] = info.model_copy(update={"shared_storage_usd_per_gib_month": fs_price})
    catalog = Catalog(as_of=bundled.as_of, origin="test", providers=providers, offers=[*bundled.offers, *offers])
    plans = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        spec = load_spec(path)
        if spec.control_plane is not ControlPlane.KUBERNETES:
            spec = spec.model_copy(update={"control_plane": ControlPlane.KUBERNETES})
        plans.append((path.stem, optimizer.resolve_plan(spec, catalog).to_plan()))
    return plans


def test_every_example_resolved_by_the_optimizer_renders_valid_manifests() -> None:
    plans = _resolved_plans()
    assert len(plans) == len(list(EXAMPLES.glob("*.yaml"))) >= 4
    fabrics = set()
    for _name, plan in plans:
        files = render_kubernetes(plan)
        assert validate_all(files) >= 9
        (queue,) = _kind(files, "ClusterQueue")
        quota = {r["name"]: r["nominalQuota"] for r in queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"]}
        assert quota["nvidia.com/gpu"] == plan.option.nodes * plan.option.gpus_per_node
        assert (_kind(files, "Job")[0]["spec"]["parallelism"]) == plan.option.nodes
        fabrics.add(plan.option.offer.fabric)
    assert len(fabrics) >= 2
