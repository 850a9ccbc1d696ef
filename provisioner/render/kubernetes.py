"""Kubernetes bootstrap manifests for a k3s cluster built from a Plan.

``render_kubernetes(plan)`` returns ``{relative path: YAML text}``; every path starts
with ``k8s/``. Files directly under ``k8s/`` are cluster bootstrap: the head's cloud-init
writes them to /etc/provisioner/k8s and ``provisioner-k8s-apply`` applies them in sorted
order once k3s ``K3S_VERSION`` is up, after installing Kueue ``KUEUE_VERSION`` from
``KUEUE_MANIFEST_URL`` (server-side apply) and waiting for its controller. Files under
``k8s/launch/`` are the launch helper a user submits on purpose (an indexed Job running
torchrun); bootstrap must not apply them.

``node_labels(plan)`` gives the labels every node registers with (k3s ``node-label``, applied
only when a node first registers: the head sets the ``TOPOLOGY_LABEL_KEYS`` ones again on
registered nodes, see templates/cloud-init/k8s-apply.sh.j2);
``node_labels(plan, i)`` adds the per-node ones: ``kubernetes.io/hostname`` (which the
kubelet sets by itself when the node name is ``node_name(plan, i)``, the hostname the
cloud-init identity step gives the machine) and the node's role. The ResourceFlavor,
the Topology and the device-plugin selectors are written against exactly these labels.

Everything here is pure: no clock, no environment, no network. No secret is ever an
input, so none can leak into the output (the k3s join token lives only in cloud-init).

Fabric notes (what the launch Job asks for on each fabric):

* EFA: ``vpc.amazonaws.com/efa`` from the AWS EFA device plugin rendered here, all of the
  instance's interfaces; the host's libfabric/aws-ofi-nccl are mounted read-only.
* InfiniBand / RoCE: ``rdma/hca_shared_devices_a`` from the Mellanox RDMA *shared* device
  plugin rendered here (every pod on a node shares the HCAs), plus ``IPC_LOCK``.
* Every fabric: the pod uses the host network, because NCCL has to see the node's real
  NICs (RoCE GIDs, provider-named data-plane interfaces, GPUDirect-TCPX NICs), which a
  pod network namespace hides. One training pod per node, so ports do not collide.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from provisioner.plan import Plan
from provisioner.render.views import comment_text, safe_path
from provisioner.spec import Fabric, SharedFsKind

if TYPE_CHECKING:  # loaded when a manifest is first rendered (as render.views does)
    from jinja2 import Environment

# Pinned images and versions. Bump deliberately; golden files show the change.
NVIDIA_DEVICE_PLUGIN_IMAGE = "nvcr.io/nvidia/k8s-device-plugin:v0.17.1"
EFA_DEVICE_PLUGIN_IMAGE = "public.ecr.aws/eks/aws-efa-k8s-device-plugin:v0.5.7"
RDMA_DEVICE_PLUGIN_IMAGE = "ghcr.io/mellanox/k8s-rdma-shared-dev-plugin:v1.5.3"
TRAINING_IMAGE = "nvcr.io/nvidia/pytorch:25.01-py3"
K3S_VERSION = "v1.33.3+k3s1"
# The installer from the same tag (not get.k3s.io's moving one); "+" is "%2B" in the URL path.
K3S_INSTALL_URL = f"https://raw.githubusercontent.com/k3s-io/k3s/{K3S_VERSION.replace('+', '%2B')}/install.sh"
KUEUE_VERSION = "v0.15.2"
KUEUE_MANIFEST_URL = f"https://github.com/kubernetes-sigs/kueue/releases/download/{KUEUE_VERSION}/manifests.yaml"
# Kueue >= 0.15 serves v1beta2 for every object used here; v1beta1 goes away in 0.17.
KUEUE_API_VERSION = "kueue.x-k8s.io/v1beta2"

TRAINING_NAMESPACE = "training"
LOCAL_QUEUE = "training"
RUNTIME_CLASS = "nvidia"  # the handler k3s registers when it finds nvidia-container-runtime
RENDEZVOUS_PORT = 29500

# Label keys. Our own prefix for facts we own; NVIDIA's and Kubernetes' well-known keys
# where other tools (GPU feature discovery, schedulers) already look for them.
LABEL_PREFIX = "provisioner.dev"
GPU_MODEL_LABEL = f"{LABEL_PREFIX}/gpu-model"
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"
TOPOLOGY_BLOCK_LABEL = f"{LABEL_PREFIX}/topology-block"
TOPOLOGY_RACK_LABEL = f"{LABEL_PREFIX}/topology-rack"
HOSTNAME_LABEL = "kubernetes.io/hostname"
TOPOLOGY_LEVELS = (TOPOLOGY_BLOCK_LABEL, TOPOLOGY_RACK_LABEL, HOSTNAME_LABEL)
# The topology labels this tool owns on a node: the head sets them again on registered nodes
# (provisioner-k8s-apply) whenever the provider's placement changes them.
TOPOLOGY_LABEL_KEYS = (TOPOLOGY_BLOCK_LABEL, TOPOLOGY_RACK_LABEL)
GPU_TAINT_KEY = "nvidia.com/gpu"

EFA_RESOURCE = "vpc.amazonaws.com/efa"
RDMA_RESOURCE = "rdma/hca_shared_devices_a"
RDMA_SHARES_PER_NODE = 64  # rdmaHcaMax in the RDMA device plugin's config: pods per node sharing the HCAs
GPU_RESOURCE = "nvidia.com/gpu"

# EFA interfaces per instance type; a pod gets full bandwidth only by asking for all.
_EFA_INTERFACES = {
    "p4d.24xlarge": 4,
    "p4de.24xlarge": 4,
    "p5.48xlarge": 32,
    "p5e.48xlarge": 32,
    "p5en.48xlarge": 16,
    "p6-b200.48xlarge": 8,
    "trn1.32xlarge": 8,
}
_RDMA_FABRICS = (Fabric.INFINIBAND, Fabric.ROCE)

# FSDP-friendly process environment, independent of the fabric.
_TRAINING_ENV = {
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",  # a hung collective aborts instead of stalling forever
    "TORCH_NCCL_AVOID_RECORD_STREAMS": "1",  # FSDP frees all-gathered params promptly
    "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",  # less fragmentation with FSDP shards
    "CUDA_DEVICE_MAX_CONNECTIONS": "1",  # keeps compute/communication overlap ordered
}

_LABEL_VALUE_BAD = re.compile(r"[^A-Za-z0-9._-]+")


def label_value(raw: str) -> str:
    """Coerce ``raw`` into a valid label value: <= 63 chars of [A-Za-z0-9._-], alnum at both ends."""
    value = _LABEL_VALUE_BAD.sub("-", raw)[:63]
    return value.strip("-._")


def _dns_name(raw: str) -> str:
    # An RFC 1123 label: lowercase alphanumerics and dashes, at most 63 characters.
    return re.sub(r"[^a-z0-9-]+", "-", raw.lower())[:63].strip("-")


def node_name(plan: Plan, node_index: int) -> str:
    """The Kubernetes node name of node ``node_index`` (also its ``kubernetes.io/hostname``)."""
    _check_index(plan, node_index)
    return f"{plan.cluster_id}-{node_index}"


def _check_index(plan: Plan, node_index: int) -> None:
    if not 0 <= node_index < plan.option.nodes:
        raise ValueError(f"node index {node_index} out of range for {plan.option.nodes} node(s)")


def node_labels(plan: Plan, node_index: int | None = None, switch_path: Sequence[str] | None = None) -> dict[str, str]:
    """Labels for the nodes of ``plan``, sorted by key; every value a valid label value.

    ``switch_path`` (the node's switches, outermost first, from the provider's topology API)
    replaces the placement-domain guess: the leaf switch becomes the rack label and the switch
    above it the block label, which Kueue's topology-aware scheduling reads.

    Without ``node_index``: the labels every node shares (what one cloud-init file per
    role can carry). With it: those plus ``kubernetes.io/hostname`` and the node's role
    (0 is the k3s server). Raises ValueError for an index outside the plan. Keys in
    ``kubernetes.io`` are only those a kubelet may set on itself.

    The rack level is the plan's placement domain: all of a plan's nodes are bought in
    one placement request, and nothing finer is known up front (Topograph or a
    provider's instance-topology API may relabel nodes later).
    """
    option = plan.option
    offer = option.offer
    place = option.zone or option.region
    labels = {
        GPU_PRESENT_LABEL: "true",
        "nvidia.com/gpu.product": label_value(f"NVIDIA-{option.gpu_model}"),
        "nvidia.com/gpu.count": str(option.gpus_per_node),
        GPU_MODEL_LABEL: label_value(option.gpu_model),
        f"{LABEL_PREFIX}/gpu-count": str(option.gpus_per_node),
        f"{LABEL_PREFIX}/cluster": label_value(plan.cluster_id),
        f"{LABEL_PREFIX}/provider": label_value(option.provider),
        f"{LABEL_PREFIX}/region": label_value(option.region),
        f"{LABEL_PREFIX}/instance-type": label_value(option.instance_type),
        f"{LABEL_PREFIX}/fabric": offer.fabric.value,
        f"{LABEL_PREFIX}/capacity-type": "spot" if option.spot else "on-demand",
        TOPOLOGY_BLOCK_LABEL: label_value(f"{option.provider}-{place}"),
        TOPOLOGY_RACK_LABEL: label_value(f"{plan.cluster_id}-placement"),
        "node.kubernetes.io/instance-type": label_value(option.instance_type),
        "topology.kubernetes.io/region": label_value(option.region),
    }
    if option.zone:
        labels["topology.kubernetes.io/zone"] = label_value(option.zone)
    if switch_path:
        labels[TOPOLOGY_RACK_LABEL] = label_value(switch_path[-1])
        labels[TOPOLOGY_BLOCK_LABEL] = label_value(switch_path[-2] if len(switch_path) > 1 else switch_path[-1])
    if node_index is not None:
        labels[HOSTNAME_LABEL] = node_name(plan, node_index)
        labels[f"{LABEL_PREFIX}/role"] = "server" if node_index == 0 else "agent"
    return dict(sorted(labels.items()))


@dataclass(frozen=True)
class PodResources:
    """What one training pod (one per node) requests; leaves room for k3s and daemons."""

    cpu: int
    memory_gib: int
    shm_gib: int
    gpus: int
    extra: dict[str, int] = field(default_factory=dict)  # fabric devices


def pod_resources(plan: Plan) -> PodResources:
    """Per-node pod requests: capacity minus a reserve for the kubelet, k3s and daemons."""
    offer = plan.option.offer
    reserved_cpu = max(2, offer.vcpus // 16)
    reserved_mem = max(8, int(offer.memory_gib * 0.1))
    cpu = max(1, offer.vcpus - reserved_cpu)
    memory = max(1, int(offer.memory_gib) - reserved_mem)
    extra: dict[str, int] = {}
    if offer.fabric is Fabric.EFA:
        # Unknown EFA instance types get one interface: correct, if not full bandwidth.
        extra[EFA_RESOURCE] = _EFA_INTERFACES.get(plan.option.instance_type, 1)
    elif offer.fabric in _RDMA_FABRICS:
        extra[RDMA_RESOURCE] = 1
    return PodResources(
        cpu=cpu, memory_gib=memory, shm_gib=max(1, memory // 2), gpus=plan.option.gpus_per_node, extra=extra
    )


@dataclass(frozen=True)
class KubeView:
    """Everything the k8s templates read. Built only by ``kube_view``."""

    cluster: str
    nodes: int
    gpus_per_node: int
    gpu_model_label: str
    gpu_model: str
    flavor_name: str
    fabric: str
    needs_efa_plugin: bool
    needs_rdma_plugin: bool
    use_tas: bool
    topology_levels: tuple[str, ...]
    quota_cpu: int
    quota_memory_gib: int
    quota_gpus: int
    quota_fabric: dict[str, int]  # fabric devices: Kueue never admits a pod asking for an uncovered one
    rdma_shares_per_node: int
    pod: PodResources
    job_name: str
    service_name: str
    namespace: str
    local_queue: str
    runtime_class: str
    gpu_taint_key: str
    gpu_present_label: str
    port: int
    env: dict[str, str]
    lib_dirs: tuple[str, ...]
    checkpoint_path: str
    shared_path: str | None
    images: dict[str, str]
    kueue_api: str
    kueue_version: str


def _split_library_path(env: dict[str, str]) -> tuple[dict[str, str], tuple[str, ...]]:
    # nccl_env writes LD_LIBRARY_PATH for a shell ("dir:dir${LD_LIBRARY_PATH:+...}"). A pod env
    # would replace the image's own path, so the launch script prepends the dirs instead.
    env = dict(env)
    # Everything from the first "$" on is the shell's reference to the inherited path.
    raw = env.pop("LD_LIBRARY_PATH", "").split("$", 1)[0]
    dirs = tuple(part for part in raw.split(":") if part.startswith("/"))
    return env, dirs


def _literal(value: str) -> str:
    # Kubernetes expands $(VAR) in env values; "$$(" keeps a literal "$(".
    return value.replace("$(", "$$(")


def _fabric_quota(plan: Plan, pod: PodResources) -> dict[str, int]:
    # What the cluster's device plugins advertise in all: EFA interfaces, or RDMA shares.
    nodes = plan.option.nodes
    return {
        name: nodes * (RDMA_SHARES_PER_NODE if name == RDMA_RESOURCE else count)
        for name, count in sorted(pod.extra.items())
    }


def kube_view(plan: Plan) -> KubeView:
    """The typed view model for the templates. Pure.

    Raises SpecError (with the spec path) for a storage path that cannot be a hostPath.
    """
    from provisioner.render.fabric import nccl_env  # sibling renderer; imported late on purpose

    option = plan.option
    offer = option.offer
    env, lib_dirs = _split_library_path(nccl_env(offer))
    env.update(_TRAINING_ENV)
    pod = pod_resources(plan)
    spec = plan.spec
    shared = spec.storage.shared
    job = f"{plan.cluster_id}-train"
    return KubeView(
        cluster=plan.cluster_id,
        nodes=option.nodes,
        gpus_per_node=option.gpus_per_node,
        gpu_model_label=GPU_MODEL_LABEL,
        gpu_model=label_value(option.gpu_model),
        flavor_name=_dns_name(f"gpu-{option.gpu_model}"),
        fabric=offer.fabric.value,
        needs_efa_plugin=offer.fabric is Fabric.EFA,
        needs_rdma_plugin=offer.fabric in _RDMA_FABRICS,
        use_tas=option.nodes > 1,
        topology_levels=TOPOLOGY_LEVELS,
        quota_cpu=option.nodes * offer.vcpus,
        quota_memory_gib=option.nodes * int(offer.memory_gib),
        quota_gpus=option.nodes * option.gpus_per_node,
        quota_fabric=_fabric_quota(plan, pod),
        rdma_shares_per_node=RDMA_SHARES_PER_NODE,
        pod=pod,
        job_name=job,
        service_name=f"{job}-rdzv",
        namespace=TRAINING_NAMESPACE,
        local_queue=LOCAL_QUEUE,
        runtime_class=RUNTIME_CLASS,
        gpu_taint_key=GPU_TAINT_KEY,
        gpu_present_label=GPU_PRESENT_LABEL,
        port=RENDEZVOUS_PORT,
        env={name: _literal(value) for name, value in sorted(env.items())},
        lib_dirs=lib_dirs,
        checkpoint_path=safe_path(spec.storage.checkpoint_path, "storage.checkpoint_path"),
        shared_path=(
            safe_path(shared.mount_path, "storage.shared.mount_path") if shared.kind is not SharedFsKind.NONE else None
        ),
        images={
            "nvidia": NVIDIA_DEVICE_PLUGIN_IMAGE,
            "efa": EFA_DEVICE_PLUGIN_IMAGE,
            "rdma": RDMA_DEVICE_PLUGIN_IMAGE,
            "training": TRAINING_IMAGE,
        },
        kueue_api=KUEUE_API_VERSION,
        kueue_version=KUEUE_VERSION,
    )


_env: Environment | None = None


def _environment() -> Environment:
    global _env
    if _env is None:
        from jinja2 import Environment, PackageLoader, StrictUndefined

        _env = Environment(
            loader=PackageLoader("provisioner.templates", "k8s"),
            undefined=StrictUndefined,
            keep_trailing_newline=True,
            trim_blocks=True,
            lstrip_blocks=True,
            autoescape=False,  # YAML, not HTML: values go through |tojson instead
        )
        _env.filters["comment"] = comment_text
    return _env


# (output path, template, included when)
_FILES: tuple[tuple[str, str, str | None], ...] = (
    ("k8s/00-namespace.yaml", "namespace.yaml.j2", None),
    ("k8s/10-nvidia-device-plugin.yaml", "nvidia-device-plugin.yaml.j2", None),
    ("k8s/11-efa-device-plugin.yaml", "efa-device-plugin.yaml.j2", "needs_efa_plugin"),
    ("k8s/11-rdma-device-plugin.yaml", "rdma-device-plugin.yaml.j2", "needs_rdma_plugin"),
    ("k8s/20-kueue.yaml", "kueue.yaml.j2", None),
    ("k8s/launch/torchrun-job.yaml", "torchrun-job.yaml.j2", None),
)


def render_kubernetes(plan: Plan) -> dict[str, str]:
    """Render every manifest for ``plan``: ``{"k8s/20-kueue.yaml": text, ...}``, sorted by path.

    ``k8s/launch/`` holds the user-submitted Job; everything else is bootstrap.

    Deterministic for a given plan. Holds no secret. Kueue documents need Kueue
    ``KUEUE_VERSION`` installed first; the rest are core Kubernetes objects. Raises
    SpecError for a checkpoint or shared path that is not absolute.
    """
    view = kube_view(plan)
    context: dict[str, Any] = {"v": view}
    out: dict[str, str] = {}
    for path, template, condition in _FILES:
        if condition is not None and not getattr(view, condition):
            continue
        out[path] = _environment().get_template(template).render(context)
    return dict(sorted(out.items()))


def bootstrap_manifests(files: dict[str, str]) -> dict[str, str]:
    """File name -> text of the manifests the head applies at boot: ``k8s/*.yaml``, not ``k8s/launch/``."""
    return {
        path.removeprefix("k8s/"): text
        for path, text in sorted(files.items())
        if path.startswith("k8s/") and "/" not in path.removeprefix("k8s/")
    }


__all__ = [
    "EFA_RESOURCE",
    "GPU_MODEL_LABEL",
    "K3S_INSTALL_URL",
    "K3S_VERSION",
    "KUEUE_API_VERSION",
    "KUEUE_MANIFEST_URL",
    "KUEUE_VERSION",
    "RDMA_RESOURCE",
    "TOPOLOGY_LABEL_KEYS",
    "TOPOLOGY_LEVELS",
    "KubeView",
    "PodResources",
    "bootstrap_manifests",
    "kube_view",
    "label_value",
    "node_labels",
    "node_name",
    "pod_resources",
    "render_kubernetes",
]
