"""The cost model's variant checks (stages 15-20 of ``costs.Stage``): an offer that passed the offer
checks (``offer_checks``) bought one way (on-demand or spot): sold that way, an adapter that can
create it, its price and costs in integer cents (``cost_terms``), the budgets, the account quotas
and a reservation block's length. Run over whole columns by ``offer_table.rank_table``; the
optimizer runs them again to find the spec field that alone keeps candidates out.

Pure: no I/O, no clock, no environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

import numpy as np

from provisioner.capabilities import BOOTSTRAP_CAPABILITY, Bootstrap, Capability, Network, Purchase
from provisioner.columns import ENUMS, OfferTable
from provisioner.cost_terms import CENT_CAP, TERMS, Pricing, boot_cents
from provisioner.costs import SPOT_FALLBACK_INTERRUPTIONS_PER_NODE_HOUR, Stage
from provisioner.money import PICO_PER_MICRO
from provisioner.offer import ProviderInfo
from provisioner.spec import ClusterSpec, Fabric

NEEDED: tuple[Capability, ...] = (
    Capability.ON_DEMAND,
    Capability.SPOT,
    Capability.MULTI_NODE,
    Capability.PRIVATE_NETWORK,
    Capability.CLUSTER_PRODUCT,
    Capability.USER_DATA,
    Capability.SCRIPT_BOOTSTRAP,
    Capability.SSH_BOOTSTRAP,
    Capability.FABRIC_IB,
    Capability.FABRIC_EFA,
    Capability.FABRIC_ROCE,
)
"""Capabilities an option may need, in the order the first missing one is named."""
NO_ADAPTER = len(NEEDED)
"""ADAPTER sub-code: the provider has no adapter at all in this installation."""
_FABRIC_CAPABILITY = {
    Fabric.INFINIBAND: Capability.FABRIC_IB,
    Fabric.EFA: Capability.FABRIC_EFA,
    Fabric.ROCE: Capability.FABRIC_ROCE,
}

Capabilities = Mapping[str, frozenset[Capability]]


def missing_capability(
    spec: ClusterSpec,
    table: OfferTable,
    rows: np.ndarray,
    nodes: np.ndarray,
    spot: bool,
    capabilities: Capabilities,
) -> np.ndarray:
    """Per candidate: -1 when its provider's adapter declares everything it needs, else the index in
    ``NEEDED`` of the first missing capability (``NO_ADAPTER`` when the provider has no adapter)."""
    v = table.values
    providers = table.dictionary("provider")
    has = np.array([[need in capabilities.get(p, frozenset()) for p in providers] for need in NEEDED], dtype=bool)
    no_adapter = np.array([not capabilities.get(p) for p in providers], dtype=bool)
    prov = v["provider"][rows]
    multi = nodes > 1
    network = v["network"][rows]
    purchase = v["purchase"][rows]
    bootstrap = v["bootstrap"][rows]
    private = (network == ENUMS["network"].index(Network.PRIVATE)) | (
        network == ENUMS["network"].index(Network.PARTITION)
    )
    wanted_fabric = _FABRIC_CAPABILITY.get(Fabric(spec.interconnect.fabric))
    needs: dict[Capability, np.ndarray | bool] = {
        Capability.ON_DEMAND: not spot,
        Capability.SPOT: spot,
        Capability.MULTI_NODE: multi,
        Capability.PRIVATE_NETWORK: multi & private,
        Capability.CLUSTER_PRODUCT: purchase == ENUMS["purchase"].index(Purchase.CLUSTER),
        **{BOOTSTRAP_CAPABILITY[b]: bootstrap == ENUMS["bootstrap"].index(b) for b in Bootstrap},
    }
    if wanted_fabric is not None:
        needs[wanted_fabric] = multi
    first = np.full(len(rows), -1, dtype=np.int16)
    for index in reversed(range(len(NEEDED))):
        need = needs.get(NEEDED[index], False)
        np.putmask(first, need & ~has[index][prov], index)
    np.putmask(first, no_adapter[prov], NO_ADAPTER)
    return first


QUOTA_SLOTS = 256
"""QUOTA sub-code: provider code * QUOTA_SLOTS + the quota's index in that provider's ``quotas``
(a provider's quotas past the first QUOTA_SLOTS are not checked)."""


def quota_refusals(
    table: OfferTable, rows: np.ndarray, nodes: np.ndarray, spot: bool, infos: list[ProviderInfo]
) -> np.ndarray:
    """Per candidate: -1 when every quota its (provider, region, instance type) counts against has
    room for ``nodes`` of it bought ``spot`` or not, else the QUOTA sub-code of the first one short.

    What a quota counts is ``QuotaHeadroom.unit`` per node: the offer's vCPUs or GPUs. Providers
    with no quotas read (``ProviderInfo.quotas`` None) are never refused here."""
    out = np.full(len(rows), -1, dtype=np.int16)
    prov = table["provider"][rows]
    regions, types = table.dictionary("region"), table.dictionary("instance_type")
    for p, info in enumerate(infos):
        mine = np.flatnonzero(prov == p)
        if not info.quotas or not len(mine):
            continue
        for q, quota in reversed(list(enumerate(info.quotas[:QUOTA_SLOTS]))):  # the first one short wins
            if quota.spot != spot:
                continue
            names = set(quota.instance_types)
            in_region = np.array([r == quota.region for r in regions], dtype=bool)
            covered = np.array([t in names for t in types], dtype=bool)
            r = rows[mine]
            per_node = table["vcpus" if quota.unit == "vcpus" else "gpus"][r].astype(np.int64)
            short = (
                in_region[table["region"][r]]
                & covered[table["instance_type"][r]]
                & (nodes[mine] * per_node > quota.available)
            )
            out[mine[short]] = p * QUOTA_SLOTS + q
    return out


@dataclass(frozen=True, eq=False)
class VariantSetup:
    """What the variant checks (stages 15-20) of every candidate read, set up once per plan."""

    spec: ClusterSpec
    table: OfferTable
    infos: list[ProviderInfo]
    provider_infos: Mapping[str, ProviderInfo]
    capabilities: Capabilities | None
    offer_nodes: np.ndarray
    quote_only: np.ndarray
    blocks: np.ndarray
    short_block: np.ndarray
    max_hourly: tuple[int, int] | None
    """(whole micro-USD, pico-USD) of the hourly budget, rounded down: exact comparison."""
    max_total: int | None
    hours: Decimal


@dataclass(frozen=True, eq=False)
class Checked:
    """``variant_checks``' answer for offer rows ``alive`` bought as one variant: per row the first
    failed variant stage (0: none), its sub-code and how many variant checks fail; the costs of
    the ``rows`` that have a price (every one sold this way, adapter-blocked ones included)."""

    late: np.ndarray
    late_sub: np.ndarray
    failures: np.ndarray
    rows: np.ndarray
    terms: dict[str, np.ndarray]
    boot: np.ndarray
    total: np.ndarray
    hourly: np.ndarray
    hourly_rest: np.ndarray
    expected: np.ndarray


def variant_checks(s: VariantSetup, alive: np.ndarray, k: int, spot: bool) -> Checked:
    """Stages 15-20 for offer rows ``alive`` bought as variant ``k``, each check on its own (a
    later one is evaluated even where an earlier one fails, so ``failures`` counts them all)."""
    spec, table = s.spec, s.table
    price = table["spot_price_micro" if spot else "price_micro"][alive]
    late = np.zeros(len(alive), dtype=np.int8)
    late_sub = np.zeros(len(alive), dtype=np.int16)
    failures = np.zeros(len(alive), dtype=np.int8)
    sold = price >= 0
    nodes = s.offer_nodes[alive]
    blocked = np.zeros(len(alive), dtype=bool)
    if s.capabilities is not None:
        lacking = missing_capability(spec, table, alive, nodes, spot, s.capabilities)
        blocked = sold & (lacking >= 0) & ~s.quote_only[alive]
        late_sub[blocked] = table["provider"][alive][blocked] * 32 + lacking[blocked]
    rows = alive[sold]
    below = nodes[sold].astype(np.int64) * table["spot_price_rest" if spot else "price_rest"][rows]
    h = nodes[sold].astype(np.int64) * price[sold] + below // PICO_PER_MICRO
    h_rest = below % PICO_PER_MICRO
    if spot:
        spot_rate = table["spot_interruptions_per_node_hour"][rows]
        fallback = np.maximum(table["interruptions_per_node_hour"][rows], SPOT_FALLBACK_INTERRUPTIONS_PER_NODE_HOUR)
        rate = np.where(np.isnan(spot_rate), fallback, spot_rate)
    else:
        rate = table["interruptions_per_node_hour"][rows]
    ctx = Pricing(
        spec=spec,
        table=table,
        infos=s.infos,
        rows=rows,
        nodes=nodes[sold].astype(np.int64),
        hourly_micro=h,
        hourly_rest=h_rest,
        rate=rate,
        hours=s.hours,
        provider_infos=s.provider_infos,
    )
    terms = {name: np.minimum(term(ctx), CENT_CAP) for name, term in TERMS.items()}
    run_total = sum(terms.values(), np.zeros(len(rows), dtype=np.int64))
    over_hourly = np.zeros(len(rows), dtype=bool)
    if s.max_hourly is not None:
        over_hourly = (h > s.max_hourly[0]) | ((h == s.max_hourly[0]) & (h_rest > s.max_hourly[1]))
    over_total = np.zeros(len(rows), dtype=bool) if s.max_total is None else run_total > s.max_total
    short = quota_refusals(table, rows, ctx.nodes, spot, s.infos)
    quota = (short >= 0) & ~s.quote_only[rows] & ~s.blocks[rows]  # blocks: their own capacity
    too_short = s.short_block[rows]
    at = np.flatnonzero(sold)
    # Applied last-first, so the lowest failed stage is the one recorded.
    for check, failed in (
        (Stage.BLOCK_HOURS, too_short),
        (Stage.QUOTA, quota),
        (Stage.MAX_TOTAL, over_total),
        (Stage.MAX_HOURLY, over_hourly),
    ):
        late[at[failed]] = check
        failures[at[failed]] += 1
    late_sub[at[quota & (late[at] == Stage.QUOTA)]] = short[quota & (late[at] == Stage.QUOTA)]
    late[blocked] = Stage.ADAPTER
    failures[blocked] += 1
    late[~sold] = Stage.PRICING_MODE
    late_sub[~sold] = int(spot)  # the sub-code says which way it is not sold (not the variant index)
    failures[~sold] += 1
    return Checked(
        late=late,
        late_sub=late_sub,
        failures=failures,
        rows=rows,
        terms=terms,
        boot=boot_cents(ctx),
        total=run_total,
        hourly=h,
        hourly_rest=h_rest,
        expected=rate * ctx.nodes * spec.workload.hours,
    )


def buyable_blocks(spec: ClusterSpec, table: OfferTable, capabilities: Capabilities | None) -> np.ndarray:
    """Per offer: a reservation sold as one block that is ranked, not quoted: the spec sets
    ``pricing.reservations``, the block's length is known and the provider's adapter declares
    ``Capability.RESERVATION`` (every provider when there is no adapter gate)."""
    if not spec.pricing.reservations:
        return np.zeros(len(table), dtype=bool)
    found = (table["purchase"] == ENUMS["purchase"].index(Purchase.RESERVATION)) & (table["block_hours"] > 0)
    if capabilities is not None:
        has = np.array(
            [Capability.RESERVATION in capabilities.get(p, frozenset()) for p in table.dictionary("provider")],
            dtype=bool,
        )
        found &= has[table["provider"]] if len(has) else False
    out: np.ndarray = found
    return out


__all__ = [
    "NEEDED",
    "NO_ADAPTER",
    "QUOTA_SLOTS",
    "Capabilities",
    "Checked",
    "VariantSetup",
    "buyable_blocks",
    "missing_capability",
    "quota_refusals",
    "variant_checks",
]
