"""Vast.ai asks -> ``provisioner.offer.Offer``, and the search filters that find them.

Pure functions: no network. Vast is a marketplace of single hosts, so one ask is one
Offer (``offer_id`` is the ask id that ``PUT /api/v0/asks/{id}/`` rents) and
``max_nodes`` says how many asks of the same shape in the same country were found,
i.e. how many nodes a cluster of that shape could have right now.

Naming. ``instance_type`` is ``<num_gpus>x<gpu_name>`` with spaces as underscores
(``8x_H100_SXM``, as in the bundled catalog), ``region`` the ISO country code from ``geolocation`` ("Oslo, NO" -> NO)
and ``zone`` the city.

Interruption estimates (Vast publishes no rates; the same model as the bundled catalog,
docs/catalog.md, so a refresh does not change how risk is priced):

- on-demand: ``FLEET_FAILURES_PER_NODE_HOUR + (1 - reliability) / MEAN_OUTAGE_HOURS``.
  The base is the Llama 3 fleet rate (419 unexpected interruptions over 2,048 nodes x 54
  days = 3.79 per 1000 node-days); the second term reads Vast's per-host ``reliability``
  (historical uptime share) as downtime in outages of ``MEAN_OUTAGE_HOURS`` (assumed 24 h).
- interruptible (bid): the on-demand rate plus ``OUTBID_PER_NODE_HOUR`` (assumed 0.04,
  one pause per 25 node-hours); an outbid instance is paused, not deleted.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from provisioner.capabilities import Bootstrap, Network, Purchase
from provisioner.offer import Offer
from provisioner.providers.base import OfferQuery
from provisioner.providers.screening import safe_id
from provisioner.providers.vastai.models import BundleOffer
from provisioner.spec import canonical_gpu

PROVIDER = "vastai"
FLEET_FAILURES_PER_NODE_HOUR = 3.79 / 1000 / 24
MEAN_OUTAGE_HOURS = 24.0
OUTBID_PER_NODE_HOUR = 0.04
HOURS_PER_MONTH = 730.0
SEARCH_LIMIT = 1000
INTERRUPTION_BASIS = (
    "vastai constants: base 3.79/1000 node-days (Llama 3 fleet) + (1 - host reliability) / 24 h "
    "outages; +0.04/node-hour outbid pauses for interruptible"
)

# Canonical model -> the gpu_name strings Vast lists for it.
VAST_GPU_NAMES: dict[str, tuple[str, ...]] = {
    "H100": ("H100 SXM", "H100 PCIE", "H100 NVL"),
    "H200": ("H200", "H200 NVL"),
    "B200": ("B200",),
    "GH200": ("GH200 SXM",),
    "A100": ("A100 SXM4", "A100 PCIE", "A100X"),
    "L40S": ("L40S",),
    "L40": ("L40",),
    "A40": ("A40",),
    "A10": ("A10",),
    "RTX4090": ("RTX 4090",),
    "RTX5090": ("RTX 5090",),
    "RTX3090": ("RTX 3090",),
    "RTXA6000": ("RTX A6000",),
    "RTX6000ADA": ("RTX 6000Ada",),
    "V100": ("Tesla V100",),
}
_CANONICAL = {name: model for model, names in VAST_GPU_NAMES.items() for name in names}
_INSTANCE_TYPE = re.compile(r"^(?P<count>\d+)x(?P<gpu>.+)$")

# The CLI's defaults, so results match what the Vast UI and ``vastai search offers`` show.
DEFAULT_FILTERS: dict[str, Any] = {
    "verified": {"eq": True},
    "external": {"eq": False},
    "rentable": {"eq": True},
    "rented": {"eq": False},
}


def canonical_model(vast_gpu_name: str) -> str:
    """``H100 SXM`` -> ``H100``; unknown names are normalised (``RTX 2080 Ti`` -> ``RTX2080TI``)."""
    return _CANONICAL.get(vast_gpu_name) or canonical_gpu(vast_gpu_name.removeprefix("Tesla "))


def instance_type_of(num_gpus: int, gpu_name: str) -> str:
    return f"{num_gpus}x_{gpu_name.replace(' ', '_')}"


def parse_instance_type(instance_type: str) -> tuple[int, str] | None:
    """``8x_H100_SXM`` (or the older ``8xH100_SXM``) -> (8, "H100 SXM"); None if not of that form."""
    found = _INSTANCE_TYPE.match(instance_type)
    if not found:
        return None
    gpu = found["gpu"].replace("_", " ").strip()
    return (int(found["count"]), gpu) if gpu else None


def region_of(geolocation: str | None) -> tuple[str, str | None]:
    """("NO", "Oslo") from "Oslo, NO"; ("unknown", None) when Vast gives no location."""
    if not geolocation:
        return "unknown", None
    city, sep, country = geolocation.rpartition(",")
    if not sep:
        return geolocation.strip(), None
    return country.strip(), city.strip() or None


def search_body(
    *,
    spot: bool | None = None,
    gpu_names: Sequence[str] = (),
    num_gpus: int | None = None,
    min_gpus: int = 1,
    regions: Sequence[str] = (),
    min_reliability: float = 0.0,
    limit: int = SEARCH_LIMIT,
) -> dict[str, Any]:
    """The JSON filter object for ``POST /api/v0/bundles/`` (ordered by score, best first), in the
    official client's form: its default filters, ``type`` "on-demand" or "bid", ``order`` a list
    of [field, direction] pairs. Numbers are sent as JSON numbers (the spec's form; the client
    sends the strings a user typed, which the server also takes)."""
    body: dict[str, Any] = dict(DEFAULT_FILTERS)
    if gpu_names:
        body["gpu_name"] = {"in": list(gpu_names)}
    if num_gpus is not None:
        body["num_gpus"] = {"eq": num_gpus}
    elif min_gpus > 1:
        body["num_gpus"] = {"gte": min_gpus}
    if regions:
        body["geolocation"] = {"in": list(regions)}
    if min_reliability > 0:
        body["reliability"] = {"gte": min_reliability}
    # As the client's ``--order score-,dph_total``: the cheaper of two asks of equal score first.
    body["order"] = [["score", "desc"], ["dph_total", "asc"]]
    # "on-demand" is what the client sends (the spec's enum says "ondemand"; its example, on-demand).
    body["type"] = "bid" if spot else "on-demand"
    body["limit"] = limit
    return body


def query_body(query: OfferQuery) -> dict[str, Any]:
    names: list[str] = []
    for model in query.gpu_models:
        names.extend(VAST_GPU_NAMES.get(canonical_gpu(model), (model,)))
    return search_body(
        spot=query.spot,
        gpu_names=names,
        min_gpus=query.min_gpus,
        regions=query.regions,
        min_reliability=query.min_reliability,
    )


def matches(ask: BundleOffer, query: OfferQuery) -> bool:
    """Client-side re-check of ``query`` (the server filters too; this guards odd names)."""
    if query.gpu_models and canonical_model(ask.gpu_name) not in {canonical_gpu(m) for m in query.gpu_models}:
        return False
    if ask.num_gpus < query.min_gpus:
        return False
    if query.regions and region_of(ask.geolocation)[0] not in query.regions:
        return False
    if query.spot and ask.min_bid is None:
        return False
    return _reliability(ask) >= query.min_reliability


def _reliability(ask: BundleOffer) -> float:
    value = ask.reliability if ask.reliability is not None else ask.reliability2
    return min(max(value if value is not None else 0.0, 0.0), 1.0)


def usable(asks: Iterable[BundleOffer]) -> list[BundleOffer]:
    """The asks that can be rented now and sell GPUs."""
    return [ask for ask in asks if ask.rentable and not ask.rented and ask.num_gpus > 0 and ask.gpu_ram > 0]


def shape_of(ask: BundleOffer) -> tuple[str, str]:
    """(instance type, country) of an ask: asks of one shape can form one cluster."""
    return instance_type_of(ask.num_gpus, ask.gpu_name), region_of(ask.geolocation)[0]


def shape_counts(asks: Iterable[BundleOffer]) -> Counter[tuple[str, str]]:
    return Counter(shape_of(ask) for ask in asks)


def to_offers(asks: Iterable[BundleOffer]) -> list[Offer]:
    """One Offer per rentable ask; ``max_nodes`` = asks of the same shape and country. Unscreened:
    the adapter screens what it lists (providers.screening)."""
    found = usable(asks)
    counts = shape_counts(found)
    return [to_offer(ask, counts[shape_of(ask)]) for ask in found]


def to_offer(ask: BundleOffer, same_shape_asks: int = 1) -> Offer:
    region, city = region_of(ask.geolocation)
    zone = re.sub(r"\s+", "-", city) if city else None  # "San Jose" -> "San-Jose"; the zone is informational
    zone = zone if zone and safe_id(zone) else None
    reliability = _reliability(ask)
    on_demand_rate = FLEET_FAILURES_PER_NODE_HOUR + (1.0 - reliability) / MEAN_OUTAGE_HOURS
    storage_per_hour = max(ask.dph_total - ask.dph_base, 0.0) if ask.dph_base is not None else 0.0
    bandwidth_mbps = min(ask.inet_up or 0.0, ask.inet_down or 0.0)
    return Offer(
        provider=PROVIDER,
        instance_type=instance_type_of(ask.num_gpus, ask.gpu_name),
        region=region,
        zone=zone,
        offer_id=str(ask.id),
        gpu_model=canonical_model(ask.gpu_name),
        gpus=ask.num_gpus,
        gpu_memory_gib=round(ask.gpu_ram / 1024.0, 2),
        vcpus=max(1, math.floor(ask.cpu_cores_effective or ask.cpu_cores or 1)),
        memory_gib=max(round(ask.cpu_ram / 1024.0, 2), 0.01),
        local_nvme_gib=max(ask.disk_space, 0.0),
        fabric_gbps=round(bandwidth_mbps / 1000.0, 3),
        price_per_hour_usd=ask.dph_total,
        # Vast bids are for the GPUs; storage is charged on top at the same rate as on-demand.
        spot_price_per_hour_usd=None if ask.min_bid is None else round(ask.min_bid + storage_per_hour, 6),
        billing_increment_s=1,
        egress_usd_per_gb=max(ask.inet_up_cost or 0.0, 0.0),
        ingress_usd_per_gb=max(ask.inet_down_cost or 0.0, 0.0),
        disk_usd_per_gib_hour=max((ask.storage_cost or 0.0) / HOURS_PER_MONTH, 0.0),
        interruptions_per_node_hour=on_demand_rate,
        spot_interruptions_per_node_hour=None if ask.min_bid is None else on_demand_rate + OUTBID_PER_NODE_HOUR,
        interruption_basis=INTERRUPTION_BASIS,
        reliability=reliability,
        max_nodes=max(same_shape_asks, 1),
        # One container per host: the onstart script boots it; hosts share no private network.
        purchase=Purchase.INSTANCE,
        bootstrap=Bootstrap.SCRIPT,
        network=Network.NONE,
        available=True,
    )


__all__ = [
    "DEFAULT_FILTERS",
    "VAST_GPU_NAMES",
    "canonical_model",
    "instance_type_of",
    "matches",
    "parse_instance_type",
    "query_body",
    "region_of",
    "search_body",
    "shape_counts",
    "shape_of",
    "to_offer",
    "to_offers",
    "usable",
]
