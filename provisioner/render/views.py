"""Typed view models: everything the templates need, computed once from a Plan.

Templates never reach into the Plan themselves; they get a frozen ``ClusterView`` whose
fields are already in the units and spellings the target files want (MiB for Slurm's
RealMemory, lowercase GRES type names, sorted NCCL variables). ``cluster_view`` is pure.

Decisions made here (documented once, used by every renderer):

* Nodes are named ``<cluster>-<i>`` for i in 0..nodes-1; node 0 is the head. Every node
  in a plan is a GPU node, so the head also runs ``slurmd`` (or a k3s server that also
  schedules pods): no GPU sits idle behind a control-plane-only machine.
* ``RealMemory`` leaves headroom for the OS, daemons and page cache:
  ``max(2 GiB, 5 % of memory)`` is kept back from the offer's memory.
* Topology: an optional mapping node name -> switch path (outermost switch first) builds a
  tree for ``topology/tree``; without one every node hangs off a single switch.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any

from provisioner.errors import PlanError, SpecError
from provisioner.gpu_names import canonical_gpu
from provisioner.offer import SAFE_ID
from provisioner.plan import Plan
from provisioner.providers.registry import facts
from provisioner.render.fabric import fabric_profile, nccl_env
from provisioner.spec import ControlPlane, SharedFsKind, check_safe_path
from provisioner.spec_checkpoint import CheckpointSpec

if TYPE_CHECKING:  # loaded when a template is first rendered: `status` and `down` render none
    import jinja2

# GPUs whose 8-way SXM boards use NVSwitch and therefore need nvidia-fabricmanager.
_NVSWITCH_GPUS = frozenset({"A100", "H100", "H200", "H800", "A800", "B200"})
_MIN_HEADROOM_MIB = 2048
_HEADROOM_FRACTION = 0.05


@dataclass(frozen=True)
class NodeView:
    name: str
    index: int
    role: str  # "head" or "worker"


@dataclass(frozen=True)
class SwitchView:
    """One ``topology.conf`` line: a switch with either nodes or child switches below it."""

    name: str
    nodes: tuple[str, ...] = ()
    switches: tuple[str, ...] = ()


@dataclass(frozen=True)
class ClusterView:
    name: str
    provider: str
    region: str
    zone: str | None
    instance_type: str
    gpu_model: str
    gres_type: str
    gpus_per_node: int
    node_count: int
    cpus: int
    memory_mib: int
    real_memory_mib: int
    local_nvme_gib: float
    fabric_profile: str
    nccl_env: tuple[tuple[str, str], ...]
    nodes: tuple[NodeView, ...]
    control_plane: str
    checkpoint_path: str
    shared_kind: str
    shared_mount_path: str
    shared_size_gib: float
    ttl_minutes: int | None
    ssh_public_key: str | None
    needs_fabric_manager: bool
    switches: tuple[SwitchView, ...]
    slurmdbd: bool = False
    allowed_cidrs: tuple[str, ...] = ()
    idle_minutes: int | None = None
    spot: bool = False
    checkpoint: CheckpointSpec = field(default_factory=CheckpointSpec)  # its store (render/checkpoint_sync.py)
    k3s_disable: tuple[str, ...] = ("traefik", "servicelb")
    """k3s's packaged components left out (they listen on 80/443 and NodePorts); empty with kubernetes.ingress."""

    @property
    def head(self) -> NodeView:
        return self.nodes[0]

    @property
    def spot_watch(self) -> str:
        """The provider whose reclaim notice the node polls (a spot node with an instance metadata
        service, its FACTS.metadata), or ``none``: ``provisioner node watch --spot``."""
        return self.provider if self.spot and self.metadata else "none"

    @property
    def metadata(self) -> str:
        """The protocol of the node's instance metadata service (FACTS.metadata: ``imds``, ``gce``), or ""."""
        declared = facts().get(self.provider)
        return declared.metadata.protocol if declared is not None and declared.metadata else ""

    @property
    def metadata_url(self) -> str:
        declared = facts().get(self.provider)
        return declared.metadata.url if declared is not None and declared.metadata else ""

    @property
    def shared_fs(self) -> str:
        """How the node mounts the shared filesystem (FACTS.shared_fs)."""
        declared = facts().get(self.provider)
        return declared.shared_fs if declared is not None else "nfs"

    @property
    def platform_fs_dir(self) -> str:
        declared = facts().get(self.provider)
        return (declared.platform_fs_dir or "") if declared is not None else ""

    @property
    def workers(self) -> tuple[NodeView, ...]:
        return self.nodes[1:]

    @property
    def node_list(self) -> str:
        """All node names as one Slurm hostlist expression. PlanError for a name that is not a plain word."""
        return hostlist([plain_word(node.name) for node in self.nodes])

    @property
    def gpu_index_range(self) -> str:
        """``0-7`` for 8 GPUs, ``0`` for one: the bracket body of ``/dev/nvidia[...]``."""
        last = self.gpus_per_node - 1
        return "0" if last == 0 else f"0-{last}"


def safe_path(value: str, where: str) -> str:
    """``value`` if it is a safe absolute path; else SpecError at ``where``.

    The spec loader checks the same rule with line numbers; this guards hand-edited plan files.
    """
    try:
        return check_safe_path(value)
    except ValueError as exc:
        raise SpecError(str(exc), path=where) from None


def _ssh_key(value: str | None) -> str | None:
    if value is not None and not value.isprintable():
        raise SpecError("must be one line of printable characters", path="access.ssh_public_key")
    return value


_NUMBERED = re.compile(r"^(?P<prefix>.*?)(?P<num>\d+)$")


def hostlist(names: Sequence[str]) -> str:
    """Compress ``[a-0, a-1, a-2, b]`` to ``a-[0-2],b`` (Slurm hostlist syntax); order kept."""
    groups: list[tuple[str, list[int]]] = []
    out: list[str] = []
    for name in names:
        match = _NUMBERED.match(name)
        if match is None or (match["num"].startswith("0") and match["num"] != "0"):
            out.append(name)
            continue
        prefix, num = match["prefix"], int(match["num"])
        if groups and groups[-1][0] == prefix and groups[-1][1][-1] == num - 1:
            groups[-1][1].append(num)
        else:
            groups.append((prefix, [num]))
            out.append(f"\0{len(groups) - 1}")
    result = []
    for item in out:
        if item.startswith("\0"):
            prefix, nums = groups[int(item[1:])]
            if len(nums) == 1:
                result.append(f"{prefix}{nums[0]}")
            else:
                result.append(f"{prefix}[{nums[0]}-{nums[-1]}]")
        else:
            result.append(item)
    return ",".join(result)


def real_memory_mib(memory_gib: float) -> int:
    """Memory Slurm may hand to jobs: the offer's memory less OS headroom, in MiB."""
    total = int(memory_gib * 1024)
    headroom = max(_MIN_HEADROOM_MIB, math.ceil(total * _HEADROOM_FRACTION))
    return max(total - headroom, 1)


def gres_type(gpu_model: str) -> str:
    """Slurm GRES type for a GPU model: ``H100`` -> ``h100``, ``RTX 4090`` -> ``rtx4090``."""
    return re.sub(r"[^a-z0-9]", "", canonical_gpu(gpu_model).lower())


def build_switches(node_names: Sequence[str], topology: Mapping[str, Sequence[str]] | None) -> tuple[SwitchView, ...]:
    """Switch tree from node -> switch path (outermost first). Raises PlanError on gaps.

    Every node must be mapped, paths must end in a leaf switch, and a switch name must
    sit at one place in the tree (a leaf cannot also be a spine).
    """
    if not topology:
        return (SwitchView(name="sw0", nodes=tuple(node_names)),)
    missing = [name for name in node_names if name not in topology]
    if missing:
        raise PlanError(f"topology has no switch path for node(s) {', '.join(missing)}")
    unknown = sorted(set(topology) - set(node_names))
    if unknown:
        raise PlanError(f"topology names node(s) not in the plan: {', '.join(unknown)}")
    for node in node_names:
        for switch in topology[node]:
            if not isinstance(switch, str) or not SAFE_ID.fullmatch(switch):
                raise PlanError(f"topology switch name {switch!r} for {node} is not a plain identifier")
    parent: dict[str, str | None] = {}
    leaf_nodes: dict[str, list[str]] = {}
    children: dict[str, list[str]] = {}
    for node in node_names:
        path = list(topology[node])
        if not path:
            raise PlanError(f"topology path for {node} is empty")
        for depth, switch in enumerate(path):
            up = path[depth - 1] if depth else None
            if parent.setdefault(switch, up) != up:
                raise PlanError(f"switch {switch} appears under two parents in the topology")
            if up is not None and switch not in children.setdefault(up, []):
                children[up].append(switch)
        leaf_nodes.setdefault(path[-1], []).append(node)
    overlap = sorted(set(leaf_nodes) & set(children))
    if overlap:
        raise PlanError(f"switch {overlap[0]} has both nodes and switches below it")
    return tuple(
        SwitchView(name=name, nodes=tuple(leaf_nodes.get(name, ())), switches=tuple(children.get(name, ())))
        for name in parent  # insertion order: deterministic for a given input
    )


_CLUSTER_NAME = re.compile(r"[a-z][a-z0-9-]{0,38}[a-z0-9]")


def _check_identifiers(plan: Plan) -> None:
    """Refuse a plan whose names could be read as syntax by a target file (a hand-edited or
    unvalidated plan: the models check the same rules on load). SpecError/PlanError, one line."""
    if not isinstance(plan.spec.name, str) or not _CLUSTER_NAME.fullmatch(plan.spec.name):
        raise SpecError("use 2-40 lowercase letters, digits and dashes, starting with a letter", path="name")
    option = plan.option
    fields = {
        "option.provider": option.provider,
        "option.region": option.region,
        "option.zone": option.zone,
        "option.instance_type": option.instance_type,
        "option.gpu_model": option.gpu_model,
        "option.offer.provider": option.offer.provider,
        "option.offer.instance_type": option.offer.instance_type,
    }
    for where, value in fields.items():
        if value is not None and (not isinstance(value, str) or not SAFE_ID.fullmatch(value)):
            raise PlanError(f"plan field {where}: {value!r} is not a plain identifier")
    for index, node in enumerate(plan.nodes):
        if node.name != f"{plan.spec.name}-{index}" or node.role != ("head" if index == 0 else "worker"):
            raise PlanError(f"plan node {index} is {node.name!r} ({node.role!r}); expected {plan.spec.name}-{index}")


def cluster_view(
    plan: Plan,
    *,
    topology: Mapping[str, Sequence[str]] | None = None,
    slurmdbd: bool = False,
) -> ClusterView:
    """Flatten a Plan into the view every template renders from. Pure.

    Raises PlanError for an inconsistent plan or topology, SpecError (with the spec path)
    for a storage path or SSH key that cannot be placed safely in boot scripts.
    """
    spec, option = plan.spec, plan.option
    offer = option.offer
    _check_identifiers(plan)
    if option.gpus_per_node > offer.gpus:
        raise PlanError(f"plan asks {option.gpus_per_node} GPUs per node of a {offer.gpus}-GPU offer")
    nodes = tuple(NodeView(name=n.name, index=n.index, role=n.role) for n in plan.nodes)
    ttl, idle = spec.lifetime.ttl_hours, spec.lifetime.idle_timeout_minutes
    model = canonical_gpu(option.gpu_model)
    return ClusterView(
        name=spec.name,
        provider=option.provider,
        region=option.region,
        zone=option.zone,
        instance_type=option.instance_type,
        gpu_model=option.gpu_model,
        gres_type=gres_type(option.gpu_model),
        gpus_per_node=option.gpus_per_node,
        node_count=option.nodes,
        cpus=offer.vcpus,
        memory_mib=int(offer.memory_gib * 1024),
        real_memory_mib=real_memory_mib(offer.memory_gib),
        local_nvme_gib=offer.local_nvme_gib,
        fabric_profile=fabric_profile(offer),
        nccl_env=tuple(nccl_env(offer).items()),
        nodes=nodes,
        control_plane=ControlPlane(spec.control_plane).value,
        checkpoint_path=safe_path(spec.storage.checkpoint_path, "storage.checkpoint_path"),
        shared_kind=SharedFsKind(spec.storage.shared.kind).value,
        shared_mount_path=safe_path(spec.storage.shared.mount_path, "storage.shared.mount_path"),
        shared_size_gib=spec.storage.shared.size_gib,
        ttl_minutes=None if ttl is None else math.ceil(ttl * 60),
        ssh_public_key=_ssh_key(spec.access.ssh_public_key),
        needs_fabric_manager=offer.gpus == 8 and model in _NVSWITCH_GPUS and "PCIE" not in model,
        switches=build_switches([n.name for n in nodes], topology),
        slurmdbd=slurmdbd,
        allowed_cidrs=tuple(spec.access.allowed_cidrs),
        idle_minutes=None if idle is None else max(1, math.ceil(idle)),
        spot=option.spot,
        k3s_disable=() if spec.kubernetes.ingress else ("traefik", "servicelb"),
        checkpoint=spec.checkpoint,
    )


def shell_word(value: Any) -> str:
    """``value`` as one shell word (POSIX single quotes where needed): the ``sh`` filter."""
    return shlex.quote(str(value))


def yaml_string(value: Any) -> str:
    """``value`` as one double-quoted YAML scalar (JSON's escaping, which YAML reads): the ``yq`` filter."""
    return json.dumps(str(value))


def plain_word(value: Any) -> str:
    """``value`` if it is a plain identifier (``offer.SAFE_ID``), the only thing slurm.conf,
    topology.conf, gres.conf and host names can hold safely (they have no quoting for ``=``,
    ``#``, ``,``, ``[``, spaces or newlines): the ``word`` filter. PlanError otherwise."""
    text = str(value)
    if not SAFE_ID.fullmatch(text):
        raise PlanError(f"{text!r} is not a plain identifier (letters, digits, ._:/+@-); refusing to render it")
    return text


_ENV_VALUE = re.compile(r"[^\x00-\x1f\x7f\"`\\]*")


def env_value(value: Any) -> str:
    """``value`` for ``export NAME="value"``: ``$NAME`` expansions allowed, nothing that ends the
    quotes or runs a command (``"``, backquote, backslash, ``$(``, control characters): the
    ``env`` filter. PlanError otherwise."""
    text = str(value)
    if not _ENV_VALUE.fullmatch(text) or "$(" in text:
        raise PlanError(f"{text!r} cannot be placed in an environment file; refusing to render it")
    return text


def comment_text(value: Any) -> str:
    """``value`` made safe inside a ``#`` comment line: every control character becomes ``?``."""
    return "".join(ch if ch.isprintable() else "?" for ch in str(value))


def unit_text(value: Any) -> str:
    """``value`` for a systemd unit setting's free text: one line, ``%`` doubled (systemd reads
    ``%x`` as a specifier): the ``unit`` filter."""
    return comment_text(value).replace("%", "%%")


@cache
def _environment() -> jinja2.Environment:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("provisioner.templates", ""),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        sh=shell_word, yq=yaml_string, comment=comment_text, word=plain_word, env=env_value, unit=unit_text
    )
    return env


def render_template(name: str, **context: Any) -> str:
    """Render ``templates/<name>`` with StrictUndefined: a missing variable is an error."""
    return _environment().get_template(name).render(**context)


__all__ = [
    "ClusterView",
    "NodeView",
    "SwitchView",
    "build_switches",
    "cluster_view",
    "comment_text",
    "env_value",
    "gres_type",
    "hostlist",
    "plain_word",
    "real_memory_mib",
    "render_template",
    "safe_path",
    "shell_word",
    "unit_text",
    "yaml_string",
]
