"""The cost model's offer checks (stages 1-14 of ``costs.Stage``): what an offer of an ``OfferTable``
fails whichever way it is bought, run over whole columns (docs/cost-model.md). ``offer_table.rank_table``
runs them first; the variant checks (``variant_checks``) see only the offers that pass.

Pure: no I/O, no clock, no environment.
"""

from __future__ import annotations

import numpy as np

from provisioner.capabilities import Network
from provisioner.columns import ENUMS, OfferTable
from provisioner.costs import FABRICS, Stage, fabric_accepts
from provisioner.gpu_names import canonical_gpu
from provisioner.offer import ProviderInfo
from provisioner.spec import ClusterSpec, ControlPlane, Fabric, SharedFsKind


def offer_stages(spec: ClusterSpec, table: OfferTable, infos: list[ProviderInfo]) -> tuple[np.ndarray, ...]:
    """(stage, sub-code, nodes, failures) per offer for the checks that do not depend on the pricing
    variant; ``failures`` counts the checks an offer fails (1: the first failed check is its only one)."""
    n = len(table)
    v = table.values
    stage = np.zeros(n, dtype=np.int8)
    sub = np.zeros(n, dtype=np.int16)  # reason sub-code at that stage
    fails: list[tuple[Stage, np.ndarray, np.ndarray | int]] = []  # applied last-first: earliest failure wins
    prov = v["provider"]
    providers = table.dictionary("provider")

    allowed = set(spec.allowed_providers())
    denied = np.array([p in spec.providers.deny for p in providers], dtype=bool)
    fails.append(
        (
            Stage.PROVIDER,
            ~np.array([p in allowed for p in providers], dtype=bool)[prov],
            (~denied).astype(np.int16)[prov],
        )
    )  # sub-code 0: denied, 1: not allowed
    if spec.providers.regions:
        wanted = set(spec.providers.regions)
        fails.append(
            (Stage.REGION, ~np.array([r in wanted for r in table.dictionary("region")], dtype=bool)[v["region"]], 0)
        )
    if spec.gpus.model:
        models = {canonical_gpu(m) for m in spec.gpus.model}
        ok = np.array([canonical_gpu(m) in models for m in table.dictionary("gpu_model")], dtype=bool)
        fails.append((Stage.GPU_MODEL, ~ok[v["gpu_model"]], 0))
    if spec.gpus.min_memory_gib:
        fails.append((Stage.GPU_MEMORY, v["gpu_memory_gib"] < spec.gpus.min_memory_gib, 0))
    fails.append((Stage.AVAILABLE, ~v["available"], 0))

    gpus = v["gpus"].astype(np.int64)
    count = spec.gpus.count
    nodes, rest = np.divmod(count, gpus)  # one division for both
    per_node, node_count = spec.nodes.gpus_per_node, spec.nodes.count
    split = np.full(n, -1, dtype=np.int16)
    if node_count is not None:
        split[nodes != node_count] = 2
    split[rest != 0] = 1
    if per_node is not None:
        split[gpus != per_node] = 0
    nodes = np.maximum(nodes, 1)
    fails.append((Stage.NODE_SPLIT, split >= 0, split))
    fails.append((Stage.MIN_NODES, nodes < v["min_nodes"], 0))
    fails.append((Stage.MAX_NODES, nodes > v["max_nodes"], 0))
    fabric = Fabric(spec.interconnect.fabric)
    fabric_ok = np.array([fabric_accepts(fabric, f) for f in FABRICS], dtype=bool)
    fails.append((Stage.FABRIC, ~fabric_ok[v["fabric"]], v["fabric"]))
    if spec.interconnect.min_gbps_per_node:
        fails.append((Stage.FABRIC_GBPS, (nodes > 1) & (v["fabric_gbps"] < spec.interconnect.min_gbps_per_node), 0))
    if needs_private_network(spec):
        fails.append((Stage.PRIVATE_NETWORK, (nodes > 1) & (v["network"] == ENUMS["network"].index(Network.NONE)), 0))
    if spec.storage.checkpoint_nvme_gib_per_node:
        fails.append((Stage.NVME, v["local_nvme_gib"] < spec.storage.checkpoint_nvme_gib_per_node, 0))
    if SharedFsKind(spec.storage.shared.kind) == SharedFsKind.MANAGED:
        missing = np.array([i.shared_storage_usd_per_gib_month is None for i in infos], dtype=bool)
        fails.append((Stage.SHARED_STORAGE, missing[prov], prov))
    if spec.reliability.min_score:
        fails.append((Stage.RELIABILITY, v["reliability"] < spec.reliability.min_score, 0))
    failures = np.zeros(n, dtype=np.int8)
    for check, failed, code in reversed(fails):
        # x += hit * (new - x) sets x where the check fails: branch-free, ~20x a masked store
        hit = np.asarray(failed, dtype=bool).view(np.int8)
        stage += hit * (np.int8(check) - stage)
        sub += hit * ((code.astype(np.int16) if isinstance(code, np.ndarray) else np.int16(code)) - sub)
        failures += hit
    return stage, sub, nodes, failures


def needs_private_network(spec: ClusterSpec) -> bool:
    """Stage 11 applies: the spec has a control plane or asks for a fabric (any value but ``any``,
    ``ethernet`` and the RDMA fabrics included), so its nodes must reach each other privately.
    A catalog row's ``network: none`` is believed even when its fabric is RDMA."""
    return (
        ControlPlane(spec.control_plane) is not ControlPlane.NONE or Fabric(spec.interconnect.fabric) is not Fabric.ANY
    )


__all__ = ["needs_private_network", "offer_stages"]
