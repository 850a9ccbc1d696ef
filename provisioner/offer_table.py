"""The cost model: every (offer, pricing variant) of an ``OfferTable`` checked, priced exactly and ranked.

This is the one production implementation of docs/cost-model.md. ``rank_table`` runs the
checks of ``costs.Stage`` over whole columns (the offer checks in ``offer_checks``, the variant
checks in ``variant_checks``), prices the candidates that reach the money
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

from provisioner.capabilities import Purchase
from provisioner.columns import ENUMS, OfferTable
from provisioner.cost_terms import TERMS, boot_exact
from provisioner.costs import dataset_leave_usd, variants
from provisioner.errors import CatalogError
from provisioner.money import CENTS, MICRO, PICO_PER_MICRO, ceil_int, floor_units, spec_decimal
from provisioner.offer import ProviderInfo
from provisioner.offer_checks import offer_stages
from provisioner.spec import ClusterSpec
from provisioner.variant_checks import Capabilities, Checked, VariantSetup, buyable_blocks, variant_checks


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
        found: np.ndarray = self.values[self.slot[c]]
        return found

    def __len__(self) -> int:
        return len(self.slot)


@dataclass(frozen=True, eq=False)
class Ranking:
    """``rank_table``'s answer, one row per candidate (an offer bought one way).

    Candidates are variant-major: candidate ``c`` is offer ``c % n`` bought as variant
    ``c // n`` (``spots[c // n]``). ``stage[c]`` is 0 when feasible, else the ``Stage`` of its
    first failed check, ``sub[c]`` which reason at that stage (see ``rejection_reasons.rejection_reason``).
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
    max_hourly = (
        None
        if spec.pricing.max_hourly_usd is None
        else divmod(floor_units(Decimal(spec.pricing.max_hourly_usd), MICRO * PICO_PER_MICRO), PICO_PER_MICRO)
    )
    max_total = None if spec.pricing.max_total_usd is None else floor_units(Decimal(spec.pricing.max_total_usd), CENTS)
    hours = spec_decimal(spec.workload.hours)

    spots = variants(spec.pricing.mode)
    size = n * len(spots)
    stage = np.tile(offer_stage, len(spots))
    sub = np.tile(offer_sub, len(spots))
    nodes_all = np.tile(offer_nodes, len(spots))
    found: list[Checked] = []
    late_failures = np.zeros(size, dtype=np.int8)
    setup = VariantSetup(
        spec=spec,
        table=table,
        infos=infos,
        provider_infos=provider_infos,
        capabilities=capabilities,
        offer_nodes=offer_nodes,
        quote_only=quote_only,
        blocks=blocks,
        short_block=short_block,
        max_hourly=max_hourly,
        max_total=max_total,
        hours=hours,
    )
    for k, spot in enumerate(spots):
        checked = variant_checks(setup, alive, k, spot)
        base = k * n
        stage[base + alive] = checked.late
        sub[base + alive] = checked.late_sub
        late_failures[base + alive] = checked.failures
        found.append(checked)
    slot: np.ndarray = np.full(size, -1, dtype=np.int32 if size < 2**31 else np.int64)
    slot[np.concatenate([k * n + checked.rows for k, checked in enumerate(found)])] = np.arange(
        sum(len(checked.rows) for checked in found)
    )
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
    return Ranking(
        n=n,
        spots=spots,
        stage=stage,
        sub=sub,
        nodes=nodes_all,
        priced=priced,
        hourly_micro=hourly,
        hourly_rest=hourly_rest,
        expected_interruptions=expected,
        terms=terms,
        boot_cents=boot,
        total_cents=total,
        quote=quote,
        order=order,
        feasible_count=len(ranked),
        extra={
            "quotas": [info.quotas or [] for info in infos],
            "offer_failures": offer_failures,
            "late_failures": late_failures,
            "quote_only": quote_only,
            "setup": setup,
        },
    )


def best_first(
    cands: np.ndarray,
    total: PricedColumn,
    hourly: PricedColumn,
    hourly_rest: PricedColumn,
    key_rank: np.ndarray,
    n: int,
    keep: int,
) -> np.ndarray:
    """The best ``keep`` of ``cands``: total, then cluster hourly, then ``Offer.key`` (``key_rank`` per
    offer), then on-demand first."""
    if len(cands) > keep > 0:
        cut = np.partition(total[cands], keep - 1)[keep - 1]
        cands = cands[total[cands] <= cut]
    ordered = cands[np.lexsort((cands // n, key_rank[cands % n], hourly_rest[cands], hourly[cands], total[cands]))]
    return ordered[:keep] if keep > 0 else ordered


__all__ = ["PricedColumn", "Ranking", "best_first", "rank_table"]
