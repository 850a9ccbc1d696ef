"""When nothing fits: every spec field whose relaxation alone lets a buyable option fit, with the
cheapest option each admits, and the field a no-fit error is located at (docs/cost-model.md,
"When nothing fits").

A candidate (offer, pricing variant) that fails exactly one of the 20 checks, every check judged on
its own, is admitted by relaxing that check's field. ``pricing.mode`` is the one field whose
relaxation changes the variant: a candidate refused for the way it is sold (stage 15, or an adapter
that cannot buy that way) is admitted when the offer, bought the other way, passes every check.

Pure: no I/O, no clock, no environment reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, cast

from provisioner.costs import Stage
from provisioner.money import usd_of_cents
from provisioner.rejection_reasons import rejection_reason
from provisioner.spec import ClusterSpec, PricingMode

if TYPE_CHECKING:
    import numpy as np

    from provisioner.columns import OfferTable
    from provisioner.offer_table import Ranking
    from provisioner.variant_checks import VariantSetup

SCOPE_FIELDS = frozenset({"providers.allow", "providers.deny", "providers.regions"})
"""Where the user chose to buy: blamed only when no other field alone admits an option ("go to
another provider" is the last thing a no-fit should suggest to someone who named one)."""
_MODE = "pricing.mode"


@dataclass(frozen=True)
class Relaxation:
    """Relaxing ``field`` alone admits ``count`` buyable candidates; the cheapest is ``provider
    instance_type`` in ``region`` bought ``spot`` (or on-demand), ``total_usd`` expected."""

    field: str
    count: int
    stage: int
    provider: str
    instance_type: str
    region: str
    spot: bool
    total_usd: Decimal

    @property
    def text(self) -> str:
        """``pricing.mode (lambda gpu_8x_h100 on-demand, $1,234.56 expected)``."""
        way = "spot" if self.spot else "on-demand"
        return f"{self.field} ({self.provider} {self.instance_type} {way}, ${self.total_usd:,} expected)"


def relaxations(spec: ClusterSpec, table: OfferTable, ranking: Ranking) -> list[Relaxation]:
    """Every field whose relaxation alone admits a buyable candidate, the one a no-fit blames first
    (``blame_order``)."""
    admitted: list[tuple[str, int, int, bool, int]] = []  # (field, stage, offer row, spot, total cents)
    for field, stage, rows, spot, totals in _admitted(spec, table, ranking):
        admitted += [(field, stage, row, spot, total) for row, total in zip(rows, totals, strict=True)]
    key_rank = table["key_rank"]
    found: dict[str, Relaxation] = {}
    for field in dict.fromkeys(item[0] for item in admitted):
        mine = [item for item in admitted if item[0] == field]
        _, _, row, spot, total = min(mine, key=lambda item: (item[4], int(key_rank[item[2]]), item[3]))
        found[field] = Relaxation(
            field=field,
            count=len(mine),
            stage=max(item[1] for item in mine),
            provider=table.text("provider", row) or "",
            instance_type=table.text("instance_type", row) or "",
            region=table.text("region", row) or "",
            spot=spot,
            total_usd=usd_of_cents(total),
        )
    return sorted(found.values(), key=blame_order)


def blame_order(relaxation: Relaxation) -> tuple[bool, int, int]:
    """A field of the spec's scope last; then the most candidates admitted; a tie to the higher stage."""
    return (relaxation.field in SCOPE_FIELDS, -relaxation.count, -relaxation.stage)


def _admitted(
    spec: ClusterSpec, table: OfferTable, ranking: Ranking
) -> list[tuple[str, int, list[int], bool, list[int]]]:
    """(field, stage, offer rows, spot, total cents) of each batch of candidates one field admits."""
    import numpy as np

    from provisioner.variant_checks import variant_checks

    n, setup = ranking.n, cast("VariantSetup", ranking.extra["setup"])
    quote_only = cast("np.ndarray", ranking.extra["quote_only"])
    offer_failures = cast("np.ndarray", ranking.extra["offer_failures"])
    late_failures = cast("np.ndarray", ranking.extra["late_failures"])
    out: list[tuple[str, int, list[int], bool, list[int]]] = []

    def fitting(rows: np.ndarray, k: int, spot: bool) -> tuple[np.ndarray, np.ndarray]:
        """Of ``rows`` (ascending), those passing every variant check bought as ``spot``, and their totals."""
        checked = variant_checks(setup, rows, k, spot)
        fits = rows[checked.failures == 0]
        return fits, checked.total[np.searchsorted(checked.rows, fits)]

    def field_of(c: int) -> str:
        return rejection_reason(Stage(int(ranking.stage[c])), int(ranking.sub[c]), spec, table, ranking, None)[0]

    # Offers failing one offer check (stages 1-14), bought either way the spec allows.
    first = ranking.stage[:n]
    lone = np.flatnonzero((first > 0) & (first < Stage.PRICING_MODE) & (offer_failures == 1) & ~quote_only)
    for k, spot in enumerate(ranking.spots):
        if len(lone):
            fits, totals = fitting(lone, k, spot)
            for row, total in zip(fits.tolist(), totals.tolist(), strict=True):
                out.append((field_of(row), int(first[row]), [row], spot, [total]))
    # Candidates passing every offer check that fail one variant check (stages 15-20).
    one_late = np.flatnonzero((late_failures == 1) & ~np.tile(quote_only, len(ranking.spots)))
    either = PricingMode(spec.pricing.mode) == PricingMode.EITHER
    for c in one_late.tolist():
        field, stage, spot = field_of(c), int(ranking.stage[c]), ranking.spot_of(c)
        if field != _MODE:
            out.append((field, stage, [c % n], spot, [int(ranking.total_cents[c])]))
        elif not either:  # the mode is relaxed: the same offer bought the other way
            fits, totals = fitting(np.array([c % n]), 0, not spot)
            out.append((field, stage, fits.tolist(), not spot, totals.tolist()))
    return out


__all__ = ["SCOPE_FIELDS", "Relaxation", "blame_order", "relaxations"]
