"""The optimizer's columnar core: an offer table and one vectorized pass that checks and prices it.

``OfferTable`` holds one numpy array per offer attribute (built once from ``Offer`` models,
or generated directly by a benchmark). ``rank_table`` checks every (offer, pricing variant)
against a spec in the stage order of ``costs.Stage``, prices them with the cost model of
``docs/cost-model.md``, and returns a ``Ranking``: integer cents per cost term, a stage code
per candidate, and the feasible candidates in rank order. Nothing here builds a pydantic
object per offer, so 10^6 offers take well under a second.

It is the vectorized twin of ``costs.price_offers`` and must give identical numbers, so each
arithmetic step is written in the same order as there. Pure: no I/O, no clock, no
environment. Importing it imports numpy (60-120 ms), which is why ``resolve_plan`` only
does so for large catalogs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from provisioner.costs import (
    FABRICS,
    HOURS_PER_MONTH,
    SPOT_FALLBACK_INTERRUPTIONS_PER_NODE_HOUR,
    Candidate,
    Stage,
    dataset_leave_usd,
    fabric_accepts,
    tiered_usd,
    variants,
)
from provisioner.errors import PlanError
from provisioner.offer import Offer, ProviderInfo
from provisioner.spec import ClusterSpec, Fabric, SharedFsKind, canonical_gpu

_FLOAT_COLUMNS = (
    "gpu_memory_gib", "local_nvme_gib", "fabric_gbps", "price_per_hour_usd", "spot_price_per_hour_usd",
    "billing_increment_s", "billing_minimum_s", "egress_usd_per_gb", "ingress_usd_per_gb",
    "disk_usd_per_gib_hour", "interruptions_per_node_hour", "spot_interruptions_per_node_hour",
    "reliability",
)
_INT_COLUMNS = ("provider_idx", "region_idx", "gpu_model_idx", "gpus", "fabric_idx", "max_nodes", "key_rank")


@dataclass(frozen=True, eq=False)
class OfferTable:
    """Offers as columns. Row ``i`` of every array describes offer ``i``.

    ``*_idx`` columns index the ``providers``/``regions``/``gpu_models``/``FABRICS`` tuples.
    Prices and the spot rate are NaN where the offer has none. ``key_rank`` is each
    offer's position when all offers are sorted by ``Offer.key`` (the final tie-break).
    ``offers`` holds the source models when the table was built from them (needed to
    materialise options and rejection messages); a generated table has none.
    """

    providers: tuple[str, ...]
    regions: tuple[str, ...]
    gpu_models: tuple[str, ...]
    provider_idx: np.ndarray
    region_idx: np.ndarray
    gpu_model_idx: np.ndarray
    gpus: np.ndarray
    gpu_memory_gib: np.ndarray
    local_nvme_gib: np.ndarray
    fabric_idx: np.ndarray
    fabric_gbps: np.ndarray
    price_per_hour_usd: np.ndarray
    spot_price_per_hour_usd: np.ndarray
    billing_increment_s: np.ndarray
    billing_minimum_s: np.ndarray
    egress_usd_per_gb: np.ndarray
    ingress_usd_per_gb: np.ndarray
    disk_usd_per_gib_hour: np.ndarray
    interruptions_per_node_hour: np.ndarray
    spot_interruptions_per_node_hour: np.ndarray
    reliability: np.ndarray
    max_nodes: np.ndarray
    available: np.ndarray
    key_rank: np.ndarray
    offers: tuple[Offer, ...] | None = None

    def __post_init__(self) -> None:
        n = len(self.gpus)
        for name in (*_FLOAT_COLUMNS, *_INT_COLUMNS, "available"):
            if len(getattr(self, name)) != n:
                raise ValueError(f"OfferTable column {name} has {len(getattr(self, name))} rows, not {n}")
        if self.offers is not None and len(self.offers) != n:
            raise ValueError(f"OfferTable has {n} rows but {len(self.offers)} offers")

    def __len__(self) -> int:
        return len(self.gpus)

    @classmethod
    def from_offers(cls, offers: Sequence[Offer]) -> OfferTable:
        """Build the table from offer models (linear in ``len(offers)``, plus one sort for ``key_rank``)."""
        offers = tuple(offers)
        n = len(offers)
        providers, provider_idx = _codes([o.provider for o in offers])
        regions, region_idx = _codes([o.region for o in offers])
        gpu_models, gpu_model_idx = _codes([o.gpu_model for o in offers])
        fabric_pos = {fabric: i for i, fabric in enumerate(FABRICS)}
        key_rank = np.empty(n, dtype=np.int64)
        key_rank[sorted(range(n), key=lambda i: offers[i].key)] = np.arange(n)

        def floats(values: list[float | None]) -> np.ndarray:
            return np.array([math.nan if v is None else v for v in values], dtype=np.float64)

        return cls(
            providers=providers,
            regions=regions,
            gpu_models=gpu_models,
            provider_idx=provider_idx,
            region_idx=region_idx,
            gpu_model_idx=gpu_model_idx,
            gpus=np.array([o.gpus for o in offers], dtype=np.int64),
            gpu_memory_gib=floats([o.gpu_memory_gib for o in offers]),
            local_nvme_gib=floats([o.local_nvme_gib for o in offers]),
            fabric_idx=np.array([fabric_pos[o.fabric] for o in offers], dtype=np.int8),
            fabric_gbps=floats([o.fabric_gbps for o in offers]),
            price_per_hour_usd=floats([o.price_per_hour_usd for o in offers]),
            spot_price_per_hour_usd=floats([o.spot_price_per_hour_usd for o in offers]),
            billing_increment_s=floats([o.billing_increment_s for o in offers]),
            billing_minimum_s=floats([o.billing_minimum_s for o in offers]),
            egress_usd_per_gb=floats([o.egress_usd_per_gb for o in offers]),
            ingress_usd_per_gb=floats([o.ingress_usd_per_gb for o in offers]),
            disk_usd_per_gib_hour=floats([o.disk_usd_per_gib_hour for o in offers]),
            interruptions_per_node_hour=floats([o.interruptions_per_node_hour for o in offers]),
            spot_interruptions_per_node_hour=floats([o.spot_interruptions_per_node_hour for o in offers]),
            reliability=floats([o.reliability for o in offers]),
            max_nodes=np.array([o.max_nodes for o in offers], dtype=np.int64),
            available=np.array([o.available for o in offers], dtype=bool),
            key_rank=key_rank,
            offers=offers,
        )


def _codes(values: list[str]) -> tuple[tuple[str, ...], np.ndarray]:
    names: dict[str, int] = {}
    codes = np.array([names.setdefault(v, len(names)) for v in values], dtype=np.int32)
    return tuple(names), codes


@dataclass(frozen=True, eq=False)
class Ranking:
    """``rank_table``'s answer, one row per candidate (an offer bought one way).

    ``offer_idx[c]`` is the table row of candidate ``c`` and ``spot[c]`` its variant.
    ``stage[c]`` is 0 when feasible, else the ``Stage`` of its first failed check.
    Cost terms are whole cents (``total_cents`` is exactly their sum; ``boot_cents`` is
    the part of ``compute_cents`` paid while booting). ``order`` lists the feasible
    candidates best first: total, then cluster hourly price, then ``Offer.key``, then
    on-demand before spot. Costs of infeasible candidates are meaningless.
    """

    offer_idx: np.ndarray
    spot: np.ndarray
    stage: np.ndarray
    nodes: np.ndarray
    hourly_usd: np.ndarray
    expected_interruptions: np.ndarray
    compute_cents: np.ndarray
    storage_cents: np.ndarray
    egress_cents: np.ndarray
    interruption_cents: np.ndarray
    boot_cents: np.ndarray
    total_cents: np.ndarray
    order: np.ndarray

    def __len__(self) -> int:
        return len(self.offer_idx)

    def deepest_stage(self) -> int:
        """The furthest stage any rejected candidate reached (0 when none was rejected)."""
        return int(self.stage.max()) if len(self.stage) else 0

    def candidates(self) -> list[Candidate]:
        """Every row as a ``Candidate``, offer by offer, on-demand first (as ``costs.price_offers``)."""
        rows = np.lexsort((self.spot, self.offer_idx))
        columns = zip(*(
            getattr(self, name)[rows].tolist()
            for name in ("offer_idx", "spot", "stage", "nodes", "hourly_usd", "expected_interruptions",
                         "compute_cents", "storage_cents", "egress_cents", "interruption_cents", "boot_cents")
        ), strict=True)
        return list(map(Candidate._make, columns))


def _cents(usd: np.ndarray) -> np.ndarray:
    return np.rint(usd * 100.0).astype(np.int64)


def rank_table(spec: ClusterSpec, table: OfferTable, provider_infos: Mapping[str, ProviderInfo]) -> Ranking:
    """Check, price and rank every (offer, variant) of ``table`` for ``spec``.

    Linear time and memory in ``len(table)`` plus a sort of the feasible candidates.
    Raises PlanError when a provider in the table, or the dataset's source provider
    (when there is data to move), has no entry in ``provider_infos``.
    """
    n = len(table)
    infos = []
    for name in table.providers:
        if name not in provider_infos:
            raise PlanError(f"catalog has offers from {name} but no pricing facts for it")
        infos.append(provider_infos[name])
    hours = spec.workload.hours
    prov = table.provider_idx
    stage = np.zeros(n, dtype=np.int8)
    # Checks are applied last-stage-first so that each row ends up holding its earliest failure.
    fails: list[tuple[Stage, np.ndarray]] = []

    allowed = set(spec.allowed_providers())
    fails.append((Stage.PROVIDER, ~np.array([p in allowed for p in table.providers], dtype=bool)[prov]))
    if spec.providers.regions:
        wanted_regions = set(spec.providers.regions)
        ok = np.array([r in wanted_regions for r in table.regions], dtype=bool)
        fails.append((Stage.REGION, ~ok[table.region_idx]))
    if spec.gpus.model:
        wanted_models = {canonical_gpu(m) for m in spec.gpus.model}
        ok = np.array([canonical_gpu(m) in wanted_models for m in table.gpu_models], dtype=bool)
        fails.append((Stage.GPU_MODEL, ~ok[table.gpu_model_idx]))
    if spec.gpus.min_memory_gib:
        fails.append((Stage.GPU_MEMORY, table.gpu_memory_gib < spec.gpus.min_memory_gib))
    fails.append((Stage.AVAILABLE, ~table.available))

    count = spec.gpus.count
    nodes = count // table.gpus
    split_bad = (count % table.gpus) != 0
    if spec.nodes.gpus_per_node is not None:
        split_bad |= table.gpus != spec.nodes.gpus_per_node
    if spec.nodes.count is not None:
        split_bad |= nodes != spec.nodes.count
    nodes = np.maximum(nodes, 1)
    fails.append((Stage.NODE_SPLIT, split_bad))
    fails.append((Stage.MAX_NODES, nodes > table.max_nodes))

    fabric = Fabric(spec.interconnect.fabric)
    fabric_ok = np.array([fabric_accepts(fabric, f) for f in FABRICS], dtype=bool)
    fails.append((Stage.FABRIC, ~fabric_ok[table.fabric_idx]))
    if spec.interconnect.min_gbps_per_node:
        fails.append((Stage.FABRIC_GBPS, (nodes > 1) & (table.fabric_gbps < spec.interconnect.min_gbps_per_node)))
    nvme_gib = spec.storage.checkpoint_nvme_gib_per_node
    if nvme_gib:
        fails.append((Stage.NVME, table.local_nvme_gib < nvme_gib))

    shared = spec.storage.shared
    storage_usd = nodes * (nvme_gib * hours) * table.disk_usd_per_gib_hour
    if SharedFsKind(shared.kind) == SharedFsKind.MANAGED:
        price = np.array(
            [math.nan if i.shared_storage_usd_per_gib_month is None else float(i.shared_storage_usd_per_gib_month)
             for i in infos], dtype=np.float64,
        )
        fails.append((Stage.SHARED_STORAGE, np.isnan(price)[prov]))
        storage_usd = storage_usd + np.nan_to_num(price * (shared.size_gib * hours / HOURS_PER_MONTH))[prov]
    if spec.reliability.min_score:
        fails.append((Stage.RELIABILITY, table.reliability < spec.reliability.min_score))

    for check, failed in reversed(fails):
        np.putmask(stage, failed, check)

    egress_usd = _egress_usd(spec, table, provider_infos, infos)
    storage_c = _cents(storage_usd)
    egress_c = _cents(egress_usd)
    boot_h = np.array([i.boot_minutes / 60.0 for i in infos], dtype=np.float64)[prov]
    increment = table.billing_increment_s
    billed_h = np.maximum(np.ceil(hours * 3600.0 / increment) * increment, table.billing_minimum_s) / 3600.0
    lost_h = (spec.workload.checkpoint_interval_minutes / 2 + spec.workload.restart_overhead_minutes) / 60.0

    parts = []
    for spot in variants(spec.pricing.mode):
        price = table.spot_price_per_hour_usd if spot else table.price_per_hour_usd
        sold = ~np.isnan(price)
        price = np.where(sold, price, 0.0)
        if spot:
            spot_rate = table.spot_interruptions_per_node_hour
            fallback = np.maximum(table.interruptions_per_node_hour, SPOT_FALLBACK_INTERRUPTIONS_PER_NODE_HOUR)
            rate = np.where(np.isnan(spot_rate), fallback, spot_rate)
        else:
            rate = table.interruptions_per_node_hour
        hourly = nodes * price
        boot_c = _cents(hourly * boot_h)
        compute_c = _cents(hourly * billed_h) + boot_c
        expected = rate * nodes * hours
        interruption_c = _cents(expected * lost_h * hourly)
        total_c = compute_c + storage_c + egress_c + interruption_c
        late = np.zeros(n, dtype=np.int8)
        if spec.pricing.max_total_usd is not None:
            np.putmask(late, total_c > round(spec.pricing.max_total_usd * 100), Stage.MAX_TOTAL)
        if spec.pricing.max_hourly_usd is not None:
            np.putmask(late, hourly > spec.pricing.max_hourly_usd, Stage.MAX_HOURLY)
        np.putmask(late, ~sold, Stage.PRICING_MODE)
        parts.append((np.where(stage != 0, stage, late), hourly, expected,
                      compute_c, interruption_c, boot_c, total_c))

    many = len(parts) > 1

    def cat(i: int) -> np.ndarray:
        return np.concatenate([p[i] for p in parts]) if many else parts[0][i]

    def tile(a: np.ndarray) -> np.ndarray:
        return np.tile(a, len(parts)) if many else a

    offer_idx = tile(np.arange(n, dtype=np.int64))
    spot_flags = np.repeat(np.array(variants(spec.pricing.mode), dtype=bool), n)
    all_stage, hourly_all, total_all = cat(0), cat(1), cat(6)
    feasible = np.flatnonzero(all_stage == 0)
    order = feasible[np.lexsort((spot_flags[feasible], table.key_rank[offer_idx[feasible]],
                                 hourly_all[feasible], total_all[feasible]))]
    return Ranking(
        offer_idx=offer_idx, spot=spot_flags, stage=all_stage, nodes=tile(nodes),
        hourly_usd=hourly_all, expected_interruptions=cat(2), compute_cents=cat(3),
        storage_cents=tile(storage_c), egress_cents=tile(egress_c), interruption_cents=cat(4),
        boot_cents=cat(5), total_cents=total_all, order=order,
    )


def _egress_usd(
    spec: ClusterSpec,
    table: OfferTable,
    provider_infos: Mapping[str, ProviderInfo],
    infos: list[ProviderInfo],
) -> np.ndarray:
    """Dataset in plus results out, per offer (see docs/cost-model.md, "Egress")."""
    prov = table.provider_idx
    dataset = spec.workload.dataset
    data_gb = dataset.size_gb
    usd = np.zeros(len(table), dtype=np.float64)
    if data_gb:
        ingress = data_gb * table.ingress_usd_per_gb
        source, source_region = dataset.source
        if source is None:
            usd = ingress
        else:
            leave = dataset_leave_usd(spec, provider_infos)
            info = provider_infos[source]
            usd = leave + ingress
            if source in table.providers:
                same_provider = prov == table.providers.index(source)
                usd = np.where(same_provider, data_gb * float(info.inter_region_usd_per_gb), usd)
                if source_region in table.regions:
                    same_place = same_provider & (table.region_idx == table.regions.index(source_region))
                    usd = np.where(same_place, 0.0, usd)
    out_gb = spec.workload.results_out_gb
    if out_gb:
        tiered = np.array([tiered_usd(i.internet_egress_tiers, out_gb, i.free_egress_gb) for i in infos])
        has_tiers = np.array([bool(i.internet_egress_tiers) for i in infos], dtype=bool)
        usd = usd + np.where(has_tiers[prov], tiered[prov], out_gb * table.egress_usd_per_gb)
    return usd


__all__ = ["OfferTable", "Ranking", "rank_table"]
