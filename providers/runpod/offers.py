"""What the RunPod adapter lists: one offer per (GPU type, cloud, pod GPU count, data center with
stock), shaped and rated from the bundled catalog's RunPod rows where it has them."""

from __future__ import annotations

import statistics
from functools import cache
from typing import Any

from provisioner.capabilities import Bootstrap, Network, Purchase
from provisioner.catalog import load_bundled_catalog
from provisioner.offer import Offer
from provisioner.providers.base import OfferQuery
from provisioner.providers.runpod import naming
from provisioner.providers.runpod.client import NAME
from provisioner.providers.runpod.models import GpuType

RELIABILITY = {"SECURE": 0.99, "COMMUNITY": 0.98}
# When the bundled catalog has no RunPod row for a model: RunPod's own placement floors
# (v1 minVCPUPerGPU=2, minRAMPerGPU=8), i.e. what a pod is guaranteed at least.
FLOOR_VCPUS_PER_GPU = 2
FLOOR_MEMORY_GIB_PER_GPU = 8.0
DEFAULT_INTERRUPTIONS = (0.0003, 0.02)  # (on-demand, spot) per node-hour, the catalog's seed values
POD_COUNTS = (1, 2, 4, 8)


@cache
def _typical() -> dict[str, Any]:
    """Per-GPU shapes and interruption rates of RunPod rows in the bundled catalog."""
    offers = [o for o in load_bundled_catalog().offers if o.provider == NAME]
    shapes = {o.gpu_model: (o.vcpus // o.gpus, o.memory_gib / o.gpus) for o in offers}
    if not offers:
        return {"shapes": shapes, "interruptions": DEFAULT_INTERRUPTIONS, "basis": "adapter default"}
    spot = [o.spot_interruptions_per_node_hour for o in offers if o.spot_interruptions_per_node_hour]
    rates = (
        statistics.median(o.interruptions_per_node_hour for o in offers),
        statistics.median(spot) if spot else DEFAULT_INTERRUPTIONS[1],
    )
    return {"shapes": shapes, "interruptions": rates, "basis": "typical RunPod value, bundled catalog"}


def gpu_offers(gpu: GpuType, model: str, cloud: str, spot_per_gpu: float | None, query: OfferQuery) -> list[Offer]:
    """The offers of one RunPod GPU type in one cloud: one per pod GPU count and data center with stock."""
    secure = cloud == "SECURE"
    offered = gpu.secure if secure else gpu.community
    price = gpu.price.secure if secure else gpu.price.community
    max_count = gpu.max_count.secure if secure else gpu.max_count.community
    if not offered or not price or max_count < 1 or RELIABILITY[cloud] < query.min_reliability:
        return []
    if query.spot and not spot_per_gpu:
        return []
    counts = sorted({c for c in (*POD_COUNTS, max_count) if query.min_gpus <= c <= max_count})
    centers = [
        dc for dc in gpu.data_centers if dc.availability != "NONE" and (not query.regions or dc.id in query.regions)
    ]
    typical = _typical()
    vcpus_per_gpu, memory_per_gpu = typical["shapes"].get(model, (FLOOR_VCPUS_PER_GPU, FLOOR_MEMORY_GIB_PER_GPU))
    on_demand_rate, spot_rate = typical["interruptions"]
    return [
        Offer(
            provider=NAME,
            instance_type=naming.instance_type(gpu.id, gpu.name, count, cloud),
            region=dc.id,
            offer_id=gpu.id.replace(" ", "+"),  # ids have spaces; SAFE_ID has none (see _resolve)
            gpu_model=model,
            gpus=count,
            gpu_memory_gib=float(gpu.memory_gb),
            vcpus=max(1, vcpus_per_gpu * count),
            memory_gib=memory_per_gpu * count,
            price_per_hour_usd=round(price * count, 4),
            spot_price_per_hour_usd=round(spot_per_gpu * count, 4) if spot_per_gpu else None,
            billing_increment_s=1,
            egress_usd_per_gb=0.0,
            interruptions_per_node_hour=on_demand_rate,
            spot_interruptions_per_node_hour=spot_rate if spot_per_gpu else None,
            interruption_basis=typical["basis"],
            reliability=RELIABILITY[cloud],
            max_nodes=1,
            # Containers on separate hosts: a script entrypoint boots them, no private path between them.
            purchase=Purchase.POD,
            bootstrap=Bootstrap.SCRIPT,
            network=Network.NONE,
        )
        for count in counts
        for dc in centers
    ]


__all__ = ["POD_COUNTS", "RELIABILITY", "gpu_offers"]
