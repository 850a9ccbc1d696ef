"""The cost model: every (offer, pricing variant) of an ``OfferTable`` checked, priced exactly and ranked.

This is the one production implementation of docs/cost-model.md. ``rank_table`` runs the
checks of ``costs.Stage`` over whole columns, prices the candidates that reach the money
stages, and returns a ``Ranking``: a stage code (and a reason sub-code) per candidate, integer
cents per cost term, and the feasible candidates in rank order. No Python object is built per
offer or per rejection.

The cost terms themselves (``TERMS``, the ``Pricing`` context) are in ``provisioner.cost_terms``.

Overflow. Integers are int64 (|x| < 9.22e18). Bounds (checked when catalogs and specs are
read): price p <= 1e10 micro-USD per node-hour ($10,000), nodes N <= 1e5 (spec MAX_COUNT), run
<= 87,600 h (spec MAX_HOURS) so billed seconds S <= 3.16e8 + one billing increment (<= 3.17e7)
< 3.5e8. Cluster hourly h = N*p <= 1e15 micro-USD. ``_cents_of(h, S, 3600)`` splits S = 3600q + r
and h = 1e4*hc + hr: whole cents hc*q <= 1e11 * 9.7e4 ~ 1e16; the remainder numerator
hr*q*3600 + h*r < 1e4*9.7e4*3600 + 1e15*3600 = 3.5e12 + 3.6e18 < 9.22e18. Totals are sums of
four terms each < 1e17 cents (the interruption estimate is capped at ``CENT_CAP``), so < 4e17.
Budgets compare integers: (h, h_rest) <= divmod(floor(max_hourly * 1e12), 1e6) (exact: prices keep
their sub-micro digits as a pico-USD remainder, priced in exact Python integers by ``hourly_times``),
total <= floor(max_total * 100).
tests/test_money.py drives every bound at once.

Pure: no I/O, no clock, no environment.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal

import numpy as np

from provisioner.capabilities import BOOTSTRAP_CAPABILITY, Bootstrap, Capability, Network, Purchase
from provisioner.columns import ENUMS, OfferTable
from provisioner.cost_terms import (
    CENT_CAP,
    TERMS,
    Pricing,
    boot_cents,
    boot_exact,
)
from provisioner.costs import (
    FABRICS,
    SPOT_FALLBACK_INTERRUPTIONS_PER_NODE_HOUR,
    Stage,
    dataset_leave_usd,
    fabric_accepts,
    variants,
)
from provisioner.errors import CatalogError
from provisioner.money import (
    CENTS,
    MICRO,
    PICO_PER_MICRO,
    ceil_int,
    floor_units,
    spec_decimal,
)
from provisioner.offer import ProviderInfo
from provisioner.spec import ClusterSpec, ControlPlane, Fabric, SharedFsKind, canonical_gpu

NEEDED: tuple[Capability, ...] = (
    Capability.ON_DEMAND, Capability.SPOT, Capability.MULTI_NODE, Capability.PRIVATE_NETWORK,
    Capability.CLUSTER_PRODUCT, Capability.USER_DATA, Capability.SCRIPT_BOOTSTRAP, Capability.SSH_BOOTSTRAP,
    Capability.FABRIC_IB, Capability.FABRIC_EFA, Capability.FABRIC_ROCE,
)
"""Capabilities an option may need, in the order the first missing one is named."""
NO_ADAPTER = len(NEEDED)
"""ADAPTER sub-code: the provider has no adapter at all in this installation."""
_FABRIC_CAPABILITY = {Fabric.INFINIBAND: Capability.FABRIC_IB, Fabric.EFA: Capability.FABRIC_EFA,
                      Fabric.ROCE: Capability.FABRIC_ROCE}

Capabilities = Mapping[str, frozenset[Capability]]


class PricedColumn:
    """A per-candidate column that only priced candidates fill (a few thousand of 10^6, most offers
    failing an offer check): their values stored compactly, read by candidate index (an int or an
    array of them) as a zero-filled full column reads, 0 where not priced. A full column would
    touch a page of memory per priced candidate when filled (~7 ms at 10^5 offers)."""

    __slots__ = ("slot", "values")

    def __init__(self, slot: np.ndarray, values: np.ndarray) -> None:
        self.slot = slot
        """Per candidate: where its value is in ``values``; -1 (the trailing 0) when not priced."""
        self.values = values

    def __getitem__(self, c: int | np.integer | np.ndarray) -> np.ndarray:
        return self.values[self.slot[c]]

    def __len__(self) -> int:
        return len(self.slot)


@dataclass(frozen=True, eq=False)
class Ranking:
    """``rank_table``'s answer, one row per candidate (an offer bought one way).

    Candidates are variant-major: candidate ``c`` is offer ``c % n`` bought as variant
    ``c // n`` (``spots[c // n]``). ``stage[c]`` is 0 when feasible, else the ``Stage`` of its
    first failed check, ``sub[c]`` which reason at that stage (see ``optimizer._reason``).
    Cost columns (whole cents) are meaningful only where ``priced``; ``quote[c]`` marks a
    feasible quote-only product (never ranked). ``order`` lists the best ranked candidates
    first (at most ``keep``); ``feasible_count`` counts them all.
    """

    n: int
    spots: tuple[bool, ...]
    stage: np.ndarray
    sub: np.ndarray
    nodes: np.ndarray
    priced: np.ndarray
    hourly_micro: PricedColumn
    hourly_rest: PricedColumn
    """With ``hourly_micro``, the exact cluster hourly price: whole micro-USD plus these pico-USD."""
    expected_interruptions: PricedColumn
    terms: dict[str, PricedColumn]
    boot_cents: PricedColumn
    total_cents: PricedColumn
    quote: np.ndarray
    order: np.ndarray
    feasible_count: int
    extra: dict[str, object] = field(default_factory=dict)

    def offer_of(self, c: int) -> int:
        return c % self.n

    def spot_of(self, c: int) -> bool:
        return self.spots[c // self.n]

    def deepest_stage(self) -> int:
        return int(self.stage.max()) if len(self.stage) else 0


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
    fails.append((Stage.PROVIDER, ~np.array([p in allowed for p in providers], dtype=bool)[prov],
                  (~denied).astype(np.int16)[prov]))  # sub-code 0: denied, 1: not allowed
    if spec.providers.regions:
        wanted = set(spec.providers.regions)
        fails.append((Stage.REGION, ~np.array([r in wanted for r in table.dictionary("region")], dtype=bool)[
            v["region"]], 0))
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
        fails.append((Stage.PRIVATE_NETWORK, (nodes > 1) & (v["network"] == ENUMS["network"].index(Network.NONE)),
                      0))
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
    return (ControlPlane(spec.control_plane) is not ControlPlane.NONE
            or Fabric(spec.interconnect.fabric) is not Fabric.ANY)


def missing_capability(
    spec: ClusterSpec, table: OfferTable, rows: np.ndarray, nodes: np.ndarray, spot: bool, capabilities: Capabilities,
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
        network == ENUMS["network"].index(Network.PARTITION))
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


def quota_refusals(table: OfferTable, rows: np.ndarray, nodes: np.ndarray, spot: bool,
                   infos: list[ProviderInfo]) -> np.ndarray:
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
            short = in_region[table["region"][r]] & covered[table["instance_type"][r]] & (
                nodes[mine] * per_node > quota.available)
            out[mine[short]] = p * QUOTA_SLOTS + q
    return out


def rank_table(
    spec: ClusterSpec,
    table: OfferTable,
    provider_infos: Mapping[str, ProviderInfo],
    capabilities: Capabilities | None = None,
    *,
    keep: int = 50,
) -> Ranking:
    """Check, price and rank every (offer, variant) of ``table`` for ``spec``.

    ``capabilities`` maps provider -> what its adapter declares; a candidate needing a
    capability its adapter lacks is rejected at ``Stage.ADAPTER`` (None: no adapter gate).
    Quote-only products (reservation, sales) skip that stage and, when they pass everything
    else, are marked ``quote``, never ranked; a reservation sold as one block is ranked instead when
    ``buyable_blocks`` says so, and rejected at ``Stage.BLOCK_HOURS`` when it ends before the run
    and the boot do. A candidate within every budget that needs more
    of an account quota than its provider's ``ProviderInfo.quotas`` has left is rejected at
    ``Stage.QUOTA`` (quote-only products are not: their capacity is not drawn from it).
    Linear in ``len(table)`` plus a partial sort.
    Raises CatalogError (exit 2) when a provider in the table, or the dataset's source provider
    (when there is data to move), has no entry in ``provider_infos``.
    """
    n = len(table)
    providers = table.dictionary("provider")
    missing = [name for name in providers if name not in provider_infos]
    if missing:
        raise CatalogError(f"catalog has offers from {missing[0]} but no pricing facts for it")
    infos = [provider_infos[name] for name in providers]
    dataset_leave_usd(spec, provider_infos)  # CatalogError up front when the dataset's source has no facts
    offer_stage, offer_sub, offer_nodes, offer_failures = offer_stages(spec, table, infos)
    alive = np.flatnonzero(offer_stage == 0)
    quote_only = np.isin(table["purchase"], [ENUMS["purchase"].index(p) for p in Purchase if p.quote_only])
    blocks = buyable_blocks(spec, table, capabilities)
    quote_only &= ~blocks
    boot_up = np.array([math.ceil(s) for s in boot_exact(infos)], dtype=np.int64)  # x < f iff x < ceil(f), x whole
    need_s = ceil_int(spec_decimal(spec.workload.hours) * 3600) + boot_up[table["provider"]]
    short_block = blocks & (table["block_hours"].astype(np.int64) * 3600 < need_s)
    max_hourly = None if spec.pricing.max_hourly_usd is None else divmod(floor_units(
        Decimal(spec.pricing.max_hourly_usd), MICRO * PICO_PER_MICRO), PICO_PER_MICRO)
    max_total = None if spec.pricing.max_total_usd is None else floor_units(Decimal(spec.pricing.max_total_usd), CENTS)
    hours = spec_decimal(spec.workload.hours)

    spots = variants(spec.pricing.mode)
    size = n * len(spots)
    stage = np.tile(offer_stage, len(spots))
    sub = np.tile(offer_sub, len(spots))
    nodes_all = np.tile(offer_nodes, len(spots))
    found: list[Checked] = []
    late_failures = np.zeros(size, dtype=np.int8)
    setup = _Setup(spec=spec, table=table, infos=infos, provider_infos=provider_infos, capabilities=capabilities,
                   offer_nodes=offer_nodes, quote_only=quote_only, blocks=blocks, short_block=short_block,
                   max_hourly=max_hourly, max_total=max_total, hours=hours)
    for k, spot in enumerate(spots):
        checked = variant_checks(setup, alive, k, spot)
        base = k * n
        stage[base + alive] = checked.late
        sub[base + alive] = checked.late_sub
        late_failures[base + alive] = checked.failures
        found.append(checked)
    slot: np.ndarray = np.full(size, -1, dtype=np.int32 if size < 2**31 else np.int64)
    slot[np.concatenate([k * n + checked.rows for k, checked in enumerate(found)])] = np.arange(
        sum(len(checked.rows) for checked in found))
    priced = slot >= 0

    def column(parts: list[np.ndarray], dtype: type = np.int64) -> PricedColumn:
        return PricedColumn(slot, np.concatenate([*parts, np.zeros(1, dtype=dtype)]).astype(dtype, copy=False))

    terms = {name: column([checked.terms[name] for checked in found]) for name in TERMS}
    boot, total = column([c.boot for c in found]), column([c.total for c in found])
    hourly, hourly_rest = column([c.hourly for c in found]), column([c.hourly_rest for c in found])
    expected = column([c.expected for c in found], np.float64)

    passed = stage == 0
    quote = passed & np.tile(quote_only, len(spots))
    ranked = np.flatnonzero(passed & ~quote)
    order = best_first(ranked, total, hourly, hourly_rest, table["key_rank"], n, keep)
    return Ranking(n=n, spots=spots, stage=stage, sub=sub, nodes=nodes_all, priced=priced, hourly_micro=hourly,
                   hourly_rest=hourly_rest,
                   expected_interruptions=expected, terms=terms, boot_cents=boot, total_cents=total, quote=quote,
                   order=order, feasible_count=len(ranked),
                   extra={"quotas": [info.quotas or [] for info in infos], "offer_failures": offer_failures,
                          "late_failures": late_failures, "quote_only": quote_only, "setup": setup})


@dataclass(frozen=True, eq=False)
class _Setup:
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


def variant_checks(s: _Setup, alive: np.ndarray, k: int, spot: bool) -> Checked:
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
    ctx = Pricing(spec=spec, table=table, infos=s.infos, rows=rows, nodes=nodes[sold].astype(np.int64),
                  hourly_micro=h, hourly_rest=h_rest, rate=rate, hours=s.hours, provider_infos=s.provider_infos)
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
    for check, failed in ((Stage.BLOCK_HOURS, too_short), (Stage.QUOTA, quota), (Stage.MAX_TOTAL, over_total),
                          (Stage.MAX_HOURLY, over_hourly)):
        late[at[failed]] = check
        failures[at[failed]] += 1
    late_sub[at[quota & (late[at] == Stage.QUOTA)]] = short[quota & (late[at] == Stage.QUOTA)]
    late[blocked] = Stage.ADAPTER
    failures[blocked] += 1
    late[~sold] = Stage.PRICING_MODE
    late_sub[~sold] = k
    failures[~sold] += 1
    return Checked(late=late, late_sub=late_sub, failures=failures, rows=rows, terms=terms, boot=boot_cents(ctx),
                   total=run_total, hourly=h, hourly_rest=h_rest, expected=rate * ctx.nodes * spec.workload.hours)


def buyable_blocks(spec: ClusterSpec, table: OfferTable, capabilities: Capabilities | None) -> np.ndarray:
    """Per offer: a reservation sold as one block that is ranked, not quoted: the spec sets
    ``pricing.reservations``, the block's length is known and the provider's adapter declares
    ``Capability.RESERVATION`` (every provider when there is no adapter gate)."""
    if not spec.pricing.reservations:
        return np.zeros(len(table), dtype=bool)
    found = (table["purchase"] == ENUMS["purchase"].index(Purchase.RESERVATION)) & (table["block_hours"] > 0)
    if capabilities is not None:
        has = np.array([Capability.RESERVATION in capabilities.get(p, frozenset())
                        for p in table.dictionary("provider")], dtype=bool)
        found &= has[table["provider"]] if len(has) else False
    return found


def best_first(cands: np.ndarray, total: PricedColumn, hourly: PricedColumn, hourly_rest: PricedColumn,
               key_rank: np.ndarray, n: int, keep: int) -> np.ndarray:
    """The best ``keep`` of ``cands``: total, then cluster hourly, then ``Offer.key`` (``key_rank`` per
    offer), then on-demand first."""
    if len(cands) > keep > 0:
        cut = np.partition(total[cands], keep - 1)[keep - 1]
        cands = cands[total[cands] <= cut]
    ordered = cands[np.lexsort((cands // n, key_rank[cands % n], hourly_rest[cands], hourly[cands], total[cands]))]
    return ordered[:keep] if keep > 0 else ordered


__all__ = ["NEEDED", "NO_ADAPTER", "QUOTA_SLOTS", "Capabilities", "Checked", "PricedColumn", "Ranking",
           "buyable_blocks", "needs_private_network", "quota_refusals", "rank_table", "variant_checks"]
