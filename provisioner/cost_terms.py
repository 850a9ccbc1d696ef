"""The cost terms of docs/cost-model.md over whole columns: integer cents per priced candidate.

Each term is one function in ``TERMS`` taking the ``Pricing`` context and returning int64 cents
for the priced rows; adding a term means adding one function there (and its field on
``plan.CostBreakdown``). ``provisioner.offer_table`` checks and ranks; the overflow bounds are
in its docstring. Money is exact: whole micro-USD in int64 where that is exact, exact Python
integers (``hourly_times``) for a price with sub-micro digits or a boot time with a fraction
of a second. The interruption term is an estimate in binary64.

Pure: no I/O, no clock, no environment.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

import numpy as np

from provisioner.columns import OfferTable
from provisioner.costs import HOURS_PER_MONTH, billed_span, dataset_leave_usd, tiered_usd
from provisioner.money import NANO, PICO_PER_MICRO, ceil_int, half_even, round_cents, spec_decimal
from provisioner.offer import ProviderInfo
from provisioner.spec import ClusterSpec, SharedFsKind

CENT_CAP = 10**17
"""Cap on every cost term in cents ($10^15, a million times any real cluster's bill): keeps absurd
inputs (10^7 GiB of NVMe per node for ten years) inside int64. Budgets are at most $10^9."""


@dataclass(frozen=True, eq=False)
class Pricing:
    """What every cost term reads: the spec's exact quantities, the table, the provider facts."""

    spec: ClusterSpec
    table: OfferTable
    infos: list[ProviderInfo]
    rows: np.ndarray
    """Offer rows of the candidates being priced."""
    nodes: np.ndarray
    hourly_micro: np.ndarray
    hourly_rest: np.ndarray
    """The pico-USD of each cluster hourly price below its whole micro-USD (0 for most catalogs)."""
    rate: np.ndarray
    """Interruptions per node-hour of each candidate (an estimate, float)."""
    hours: Decimal
    provider_infos: Mapping[str, ProviderInfo]
    """Every provider's facts (the dataset's source may sell nothing here)."""


def _cents_of(x: np.ndarray, amount: np.ndarray, unit: int) -> np.ndarray:
    """Exact round-half-even of ``x * amount / (unit * 1e4)`` in int64 (``x`` micro-USD per unit of
    ``amount``). Splits both factors so no product overflows (module docstring, "Overflow")."""
    q, r = np.divmod(amount, unit)
    xc, xr = np.divmod(x, 10_000)
    den = unit * 10_000
    fq, fr = np.divmod(xr * q * unit + x * r, den)
    cents = xc * q + fq
    rounded: np.ndarray = cents + ((2 * fr > den) | ((2 * fr == den) & (cents % 2 == 1)))
    return rounded


def _per_key(columns: list[np.ndarray], value: Callable[..., int]) -> np.ndarray:
    """``value(*key)`` for every row, evaluated once per distinct key (exact Python arithmetic)."""
    if not len(columns[0]):
        return np.zeros(0, dtype=np.int64)
    # Each column's values become codes 0..k-1 and a row's codes one integer (mixed radix): the distinct
    # rows are the distinct integers, a sort of ints (np.unique(axis=0) compares rows as bytes, ~15x slower).
    combined, size = np.zeros(len(columns[0]), dtype=np.int64), 1
    for column in columns:
        distinct, codes = np.unique(column, return_inverse=True)
        if size * len(distinct) >= 2**62:  # renumber the rows so far 0..m-1 (m <= rows) before going on
            _, combined = np.unique(combined, return_inverse=True)
            combined = combined.reshape(-1)
            size = int(combined.max()) + 1
        combined = combined * len(distinct) + codes.reshape(-1)
        size *= len(distinct)
    _, first, inverse = np.unique(combined, return_index=True, return_inverse=True)
    rows = np.stack([column[first] for column in columns], axis=1).tolist()
    out = np.array([min(value(*row), CENT_CAP) for row in rows], dtype=np.int64)
    return out[inverse.reshape(-1)]


def billed_seconds(p: Pricing) -> np.ndarray:
    """Run time counted in whole seconds (rounded up), then up to the billing increment, at least the minimum."""
    run_s = ceil_int(p.hours * 3600)
    billed: np.ndarray = billed_span(
        run_s, p.table["billing_increment_s"][p.rows], p.table["billing_minimum_s"][p.rows]
    )
    return billed


def boot_exact(infos: list[ProviderInfo]) -> list[Fraction]:
    """Each provider's boot time in seconds, exact (``boot_minutes`` as written x 60), by provider code."""
    return [Fraction(spec_decimal(i.boot_minutes)) * 60 for i in infos]


def hourly_times(
    p: Pricing, seconds: np.ndarray, exact: Callable[[int], Fraction] | None = None, also: np.ndarray | None = None
) -> np.ndarray:
    """Cluster hourly x ``seconds`` (whole seconds per row) in cents, half-even, exact. int64
    arithmetic where the hourly price is whole micro-USD; exact integers for a price with pico-USD
    and for the rows in ``also``, where ``exact(i)`` replaces row ``i``'s seconds (a fraction)."""
    out = _cents_of(p.hourly_micro, seconds, 3600)
    odd = p.hourly_rest != 0
    if also is not None:
        odd |= also
    for i in np.flatnonzero(odd).tolist():
        sec = exact(i) if exact is not None and (also is None or also[i]) else Fraction(int(seconds[i]))
        pico = int(p.hourly_micro[i]) * PICO_PER_MICRO + int(p.hourly_rest[i])
        out[i] = min(half_even(pico * sec.numerator, sec.denominator * 3600 * PICO_PER_MICRO * 10_000), CENT_CAP)
    return out


def boot_cents(p: Pricing) -> np.ndarray:
    """Paid boot time: cluster hourly x the provider's boot time, exact (a fraction of a second
    included), rounded once to cents. 0 for a Capacity Block: its nodes boot inside the block
    already paid for."""
    exact = boot_exact(p.infos)
    prov = p.table["provider"][p.rows]
    block = p.table["block_hours"][p.rows] > 0
    whole = np.array([int(s) if s.denominator == 1 else 0 for s in exact], dtype=np.int64)
    fractional = np.array([s.denominator != 1 for s in exact], dtype=bool)[prov] & ~block
    return hourly_times(p, np.where(block, 0, whole[prov]), lambda i: exact[int(prov[i])], fractional)


def block_fee_term(p: Pricing) -> np.ndarray:
    """A Capacity Block's upfront fee: cluster hourly x the block's own hours (not the run's: the whole
    block is paid before it starts, non-refundable), rounded once to cents; 0 for other offers."""
    return hourly_times(p, p.table["block_hours"][p.rows].astype(np.int64) * 3600)


def compute_term(p: Pricing) -> np.ndarray:
    """Cluster hourly x billed hours, rounded to cents, plus the boot time, rounded on its own; for a
    Capacity Block, its upfront fee (``block_fee_term``)."""
    run = hourly_times(p, billed_seconds(p)) + boot_cents(p)
    return np.where(p.table["block_hours"][p.rows] > 0, block_fee_term(p), run)


def storage_term(p: Pricing) -> np.ndarray:
    """Checkpoint NVMe at the offer's disk rate plus the provider's managed filesystem, rounded once."""
    spec, hours = p.spec, Fraction(p.hours)
    nvme_gib_hours = Fraction(spec_decimal(spec.storage.checkpoint_nvme_gib_per_node)) * hours
    shared = spec.storage.shared
    managed = SharedFsKind(shared.kind) == SharedFsKind.MANAGED
    shared_usd = [
        Fraction(i.shared_storage_usd_per_gib_month or 0)
        * Fraction(spec_decimal(shared.size_gib))
        * hours
        / HOURS_PER_MONTH
        if managed
        else Fraction(0)
        for i in p.infos
    ]
    if not nvme_gib_hours and not any(shared_usd):
        return np.zeros(len(p.rows), dtype=np.int64)

    def cents(disk_nano: int, nodes: int, provider: int) -> int:
        return round_cents(Fraction(disk_nano, NANO) * nodes * nvme_gib_hours + shared_usd[provider])

    return _per_key([p.table["disk_nano"][p.rows], p.nodes, p.table["provider"][p.rows]], cents)


def egress_term(p: Pricing) -> np.ndarray:
    """The dataset coming in plus the results going out, rounded once (docs/cost-model.md, "Egress")."""
    spec, table = p.spec, p.table
    dataset = spec.workload.dataset
    data_gb = Fraction(spec_decimal(dataset.size_gb))
    out_gb = Fraction(spec_decimal(spec.workload.results_out_gb))
    if not data_gb and not out_gb:
        return np.zeros(len(p.rows), dtype=np.int64)
    source, source_region = dataset.source
    providers = table.dictionary("provider")
    leave = dataset_leave_usd(spec, p.provider_infos)
    results = [
        tiered_usd(i.internet_egress_tiers, spec.workload.results_out_gb, i.free_egress_gb)
        if i.internet_egress_tiers
        else None
        for i in p.infos
    ]
    wanted_region = None if source_region is None else source_region.encode()
    # Only whether the offer sits in the dataset's own region matters, not which region it is:
    # keying on that flag keeps the exact per-key arithmetic to a few dozen keys at 10^5 offers.
    in_source_region = (table.names["region"] == wanted_region)[table["region"][p.rows]]

    def cents(provider: int, same_region: int, ingress_nano: int, egress_nano: int) -> int:
        usd = Fraction(0)
        if data_gb:
            if source is not None and providers[provider] == source:
                info = p.infos[provider]
                usd = Fraction(0) if same_region else data_gb * Fraction(info.inter_region_usd_per_gb)
            else:
                usd = leave + data_gb * Fraction(ingress_nano, NANO)
        if out_gb:
            tiered = results[provider]
            usd += tiered if tiered is not None else out_gb * Fraction(egress_nano, NANO)
        return round_cents(usd)

    return _per_key(
        [
            table["provider"][p.rows],
            in_source_region.astype(np.int64),
            table["ingress_nano"][p.rows],
            table["egress_nano"][p.rows],
        ],
        cents,
    )


def interruption_term(p: Pricing) -> np.ndarray:
    """Expected lost work, an estimate in binary64: E = rate*N*H; E * L * hourly USD * 100, half-even."""
    w = p.spec.workload
    lost_h = (w.checkpoint_interval_minutes / 2 + w.restart_overhead_minutes) / 60.0
    expected = p.rate * p.nodes * w.hours
    loss = expected * lost_h * (p.hourly_micro / 1e6) * 100.0
    cents: np.ndarray = np.rint(np.minimum(loss, CENT_CAP)).astype(np.int64)
    return cents


def move_term(p: Pricing) -> np.ndarray:
    """A move's price, 0 unless the spec is a move's re-plan (``checkpoint.restore``, set by
    lifecycle/recover.py): the checkpoint (``checkpoint.size_gb``) downloaded from its store, plus the
    work lost since its last copy (``restore.lost_minutes``) redone at the candidate's hourly price.
    Each part rounded once (docs/cost-model.md, "Move").

    The download leaves the store's provider (s3:// AWS, gs:// GCP) at its internet egress tiers for a
    candidate of another provider; for one of its own, free in the bucket's region
    (``checkpoint.region``), at its inter-region rate elsewhere and when the region is not given (then
    staying is not assumed free); at ``checkpoint.egress_usd_per_gb`` whenever that is set (0 for an
    ``endpoint_url`` store without it); plus the candidate's ingress."""
    checkpoint = p.spec.checkpoint
    restore = checkpoint.restore
    if restore is None:
        return np.zeros(len(p.rows), dtype=np.int64)
    size_gb = Fraction(spec_decimal(checkpoint.size_gb))
    store = checkpoint.store_provider()
    info = p.provider_infos.get(store) if store is not None else None
    providers = p.table.dictionary("provider")
    if checkpoint.egress_usd_per_gb is not None:
        leave = size_gb * Fraction(spec_decimal(checkpoint.egress_usd_per_gb))
    elif info is not None:
        leave = tiered_usd(info.internet_egress_tiers, checkpoint.size_gb, info.free_egress_gb)
    else:
        leave = Fraction(0)

    def download(provider: int, in_bucket_region: int, ingress_nano: int) -> int:
        out = leave
        if checkpoint.egress_usd_per_gb is None and info is not None and providers[provider] == store:
            out = Fraction(0) if in_bucket_region else size_gb * Fraction(info.inter_region_usd_per_gb)
        return round_cents(out + size_gb * Fraction(ingress_nano, NANO))

    # Whether the row sits in the bucket's region, not which region (few keys, as egress_term).
    wanted = None if checkpoint.region is None else checkpoint.region.encode()
    in_region = (p.table.names["region"] == wanted)[p.table["region"][p.rows]].astype(np.int64)
    moved = _per_key([p.table["provider"][p.rows], in_region, p.table["ingress_nano"][p.rows]], download)
    lost_s = Fraction(spec_decimal(restore.lost_minutes)) * 60
    whole = np.full(len(p.rows), int(lost_s), dtype=np.int64)
    fraction = np.full(len(p.rows), lost_s.denominator != 1, dtype=bool)
    redo = hourly_times(p, whole, lambda _i: lost_s, fraction)
    total: np.ndarray = np.minimum(moved + redo, CENT_CAP)
    return total


def dataset_region_warning(spec: ClusterSpec, table: OfferTable) -> tuple[str, str] | None:
    """(field, message) when the dataset's region is not one the catalog sells in for its provider (a typo such
    as ``aws:us-eats-1`` would price the move as from another region), naming the field and the
    nearest regions it knows; None otherwise. A warning, not a refusal: the catalog lists only the
    regions where GPUs are sold, and a bucket may sit in any of the provider's regions."""
    dataset = spec.workload.dataset
    source, region = dataset.source
    if source is None or region is None:
        return None
    providers = table.dictionary("provider")
    if source not in providers:
        return None  # the provider sells nothing here: no region list to judge by
    here = table["region"][table["provider"] == providers.index(source)]
    codes = np.flatnonzero(np.bincount(here[here >= 0]))  # (np.unique would import numpy.ma: 6 ms)
    known = sorted(table.names["region"][code].decode("utf-8") for code in codes.tolist())
    if not known or region in known:
        return None
    import difflib

    field = "workload.dataset.region" if "://" in dataset.location else "workload.dataset.location"
    nearest = difflib.get_close_matches(region, known, n=3, cutoff=0.6) or known[:3]
    return field, (
        f"{source} region {region!r} is not in the catalog (nearest: {', '.join(nearest)}); "
        f"moving the data is priced as from another {source} region"
    )


TERMS: dict[str, Callable[[Pricing], np.ndarray]] = {
    "compute": compute_term,
    "storage": storage_term,
    "egress": egress_term,
    "interruption": interruption_term,
    "move": move_term,
}
"""The cost terms, in CostBreakdown order; the total is their sum."""


__all__ = [
    "CENT_CAP",
    "TERMS",
    "Pricing",
    "block_fee_term",
    "boot_cents",
    "boot_exact",
    "dataset_region_warning",
    "hourly_times",
    "move_term",
]
