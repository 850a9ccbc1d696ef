"""Why the cost model rejected a candidate, in words: the spec field to blame and a one-line reason
for each ``costs.Stage`` and reason sub-code of a ``offer_table.Ranking`` (docs/cost-model.md), with
the candidate's own figures or, for a group, the wording its members share. The optimizer builds its
rejection groups, examples and no-fit messages from these.

Pure: no I/O, no clock, no environment reads.
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING

from provisioner.capabilities import Capability
from provisioner.costs import FABRICS, Stage
from provisioner.money import usd_of_cents, usd_of_pico
from provisioner.spec import ClusterSpec, Fabric, PricingMode
from provisioner.termtext import counted

if TYPE_CHECKING:
    from provisioner.columns import OfferTable
    from provisioner.offer_table import Ranking


def rejection_reason(
    code: Stage, sub: int, spec: ClusterSpec, table: OfferTable, ranking: Ranking, c: int | None
) -> tuple[str, str]:
    """(spec field to blame, one-line reason) for stage ``code`` and reason ``sub``; with a candidate
    ``c`` the reason carries its own figures, without one it is the group's shared wording."""
    row = None if c is None else ranking.offer_of(c)

    def text(name: str) -> str:
        return "" if row is None else table.text(name, row) or ""

    def num(name: str) -> float:
        return float(table[name][row]) if row is not None else 0.0

    offer = f"{text('provider')} {text('instance_type')}" if row is not None else "the offer"
    count = spec.gpus.count
    nodes = int(ranking.nodes[c]) if c is not None else 0
    nodes_field = "nodes.count" if spec.nodes.count is not None else "gpus.count"
    if code == Stage.PROVIDER:
        name = text("provider") or "provider"
        if sub == 0:
            return "providers.deny", f"provider {name} is denied" if row is not None else "provider is denied"
        return "providers.allow", (
            f"provider {name} is not in providers.allow" if row is not None else "provider is not in providers.allow"
        )
    if code == Stage.REGION:
        return "providers.regions", f"region {text('region') or ''} is not in providers.regions".replace("  ", " ")
    if code == Stage.GPU_MODEL:
        return "gpus.model", f"GPU {text('gpu_model')} is not one of {', '.join(spec.gpus.model)}".replace("  ", " ")
    if code == Stage.GPU_MEMORY:
        have = f"{num('gpu_memory_gib'):g} GiB per GPU" if row is not None else "GPU memory"
        return "gpus.min_memory_gib", f"{have} is below {spec.gpus.min_memory_gib:g} GiB"
    if code == Stage.AVAILABLE:
        return "gpus.model", f"{text('gpu_model') or 'the'} offer is not available now".replace("the offer", "offer")
    if code == Stage.NODE_SPLIT:
        gpus, all_gpus = int(num("gpus")), counted(count, "GPU")
        if sub == 0:
            per_node = spec.nodes.gpus_per_node
            return "nodes.gpus_per_node", (
                f"nodes have {counted(gpus, 'GPU')}, not {per_node}"
                if row is not None
                else f"nodes do not have {counted(per_node, 'GPU')}"
            )
        if sub == 1:
            return "gpus.count", (
                f"{all_gpus} do not split into nodes of {gpus}"
                if row is not None
                else f"{all_gpus} do not split into whole nodes"
            )
        return "nodes.count", (
            f"{all_gpus} in nodes of {gpus} make {counted(nodes, 'node')}, not {spec.nodes.count}"
            if row is not None
            else f"{all_gpus} do not make {counted(spec.nodes.count, 'node')}"
        )
    if code == Stage.MIN_NODES:
        return nodes_field, (
            f"needs {counted(nodes, 'node')}; {offer} is sold as at least {int(num('min_nodes'))}"
            if row is not None
            else "needs fewer nodes than the product is sold as"
        )
    if code == Stage.MAX_NODES:
        return nodes_field, (
            f"needs {nodes} nodes; at most {int(num('max_nodes'))} can be placed together"
            if row is not None
            else "needs more nodes than can be placed together"
        )
    if code == Stage.FABRIC:
        wanted = Fabric(spec.interconnect.fabric)
        return "interconnect.fabric", f"fabric {FABRICS[sub].value} does not provide {wanted.value}"
    if code == Stage.FABRIC_GBPS:
        have = f"{num('fabric_gbps'):g} Gbps per node" if row is not None else "fabric bandwidth"
        return "interconnect.min_gbps_per_node", f"{have} is below {spec.interconnect.min_gbps_per_node:g}"
    if code == Stage.PRIVATE_NETWORK:
        return "interconnect.fabric", (
            f"nodes of {offer} cannot reach each other privately (network: none); a multi-node cluster "
            f"with a control plane or a fabric needs a private network"
        )
    if code == Stage.NVME:
        have = f"{num('local_nvme_gib'):g} GiB local NVMe" if row is not None else "local NVMe"
        return "storage.checkpoint_nvme_gib_per_node", (
            f"{have} is below {spec.storage.checkpoint_nvme_gib_per_node:g} GiB"
        )
    if code == Stage.SHARED_STORAGE:
        return "storage.shared.kind", f"{table.dictionary('provider')[sub]} has no managed shared filesystem"
    if code == Stage.RELIABILITY:
        have = f"reliability {num('reliability'):g}" if row is not None else "reliability"
        return "reliability.min_score", f"{have} is below {spec.reliability.min_score:g}"
    if code == Stage.PRICING_MODE:
        sold = "spot" if sub else "on-demand"
        return "pricing.mode", f"not sold {sold} (pricing.mode {PricingMode(spec.pricing.mode).value})"
    if code == Stage.ADAPTER:
        return adapter_reason(sub, table)
    if code == Stage.QUOTA:
        return nodes_field, quota_reason(sub, table, ranking, c)
    if code == Stage.BLOCK_HOURS:
        run = f"the {spec.workload.hours:g} h run plus the nodes' boot"
        if row is None:
            return "workload.hours", f"the reservation's block ends before {run}"
        return "workload.hours", (
            f"the {int(num('block_hours'))} h {offer} block (paid upfront in full) ends before {run}"
        )
    if code == Stage.MAX_HOURLY:
        budget = f"{usd_text(spec.pricing.max_hourly_usd)}/h"
        if c is None:
            return "pricing.max_hourly_usd", f"cluster hourly price is over {budget}"
        hourly = usd_text(usd_of_pico(int(ranking.hourly_micro[c]), int(ranking.hourly_rest[c])))
        return "pricing.max_hourly_usd", (
            f"{counted(nodes, 'node')} cost{'s' if nodes == 1 else ''} {hourly}/h, over {budget}"
        )
    budget = usd_text(spec.pricing.max_total_usd)
    if c is None:
        return "pricing.max_total_usd", f"expected total is over {budget}"
    return "pricing.max_total_usd", f"expected total ${usd_of_cents(int(ranking.total_cents[c])):,} is over {budget}"


def usd_text(amount: Decimal | None) -> str:
    """``$1,234.56``, exact: every decimal kept past the cents (``$4.355``), never rounded away, and
    never in exponent form (a budget of 0.000000001 is ``$0.000000001``, not ``$1E-9``)."""
    from provisioner.money import usd_text as text

    return text(Decimal(amount or 0))


def adapter_reason(sub: int, table: OfferTable) -> tuple[str, str]:
    """(field, reason) of an ADAPTER rejection: sub-code = provider code * 32 + the index in ``NEEDED``."""
    from provisioner.variant_checks import NEEDED, NO_ADAPTER

    code, lacking = divmod(sub, 32)
    provider = table.dictionary("provider")[code]
    if lacking == NO_ADAPTER:
        return "providers.allow", f"no {provider} adapter in this installation yet"
    need = NEEDED[lacking]
    field = {
        Capability.SPOT: "pricing.mode",
        Capability.ON_DEMAND: "pricing.mode",
        Capability.FABRIC_IB: "interconnect.fabric",
        Capability.FABRIC_EFA: "interconnect.fabric",
        Capability.FABRIC_ROCE: "interconnect.fabric",
    }.get(need, "providers.allow")
    return field, f"the {provider} adapter cannot create {_WHAT[need]}"


def quota_reason(sub: int, table: OfferTable, ranking: Ranking, c: int | None) -> str:
    """The reason of a QUOTA rejection (sub-code: ``variant_checks.QUOTA_SLOTS``), with ``c``'s figures."""
    from provisioner.variant_checks import QUOTA_SLOTS

    p, q = divmod(sub, QUOTA_SLOTS)
    quota = ranking.extra["quotas"][p][q]  # type: ignore[index]
    name = f" ({quota.name})" if quota.name else ""
    ask = f"; ask for more: {quota.how_to_request}" if quota.how_to_request else ""
    left = f"{quota.available} {quota.unit} left of {quota.limit}"
    if c is None:
        return f"over the {table.dictionary('provider')[p]} quota {quota.code}{name} in {quota.region}: {left}{ask}"
    row = ranking.offer_of(c)
    per_node = int(table["vcpus" if quota.unit == "vcpus" else "gpus"][row])
    nodes = int(ranking.nodes[c])
    return (
        f"{nodes} x {table.text('instance_type', row)} need {nodes * per_node} {quota.unit}, over the quota "
        f"{quota.code}{name} in {quota.region}: {left}{ask}"
    )


_WHAT = {
    Capability.ON_DEMAND: "on-demand nodes",
    Capability.SPOT: "spot nodes",
    Capability.MULTI_NODE: "multi-node clusters",
    Capability.PRIVATE_NETWORK: "nodes on a private network",
    Capability.CLUSTER_PRODUCT: "cluster products",
    Capability.USER_DATA: "nodes booted from cloud-init",
    Capability.SCRIPT_BOOTSTRAP: "nodes bootstrapped by a start script",
    Capability.SSH_BOOTSTRAP: "nodes bootstrapped over SSH",
    Capability.FABRIC_IB: "InfiniBand clusters",
    Capability.FABRIC_EFA: "EFA clusters",
    Capability.FABRIC_ROCE: "RoCE clusters",
}


__all__ = ["adapter_reason", "quota_reason", "rejection_reason", "usd_text"]
