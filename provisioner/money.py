"""Exact money: the units the cost model counts in, and its one rounding rule.

Every amount the optimizer computes is an integer: prices in micro-USD (``MICRO``) plus a
remainder in pico-USD (``split_price``: a catalog price keeps every decimal it was written
with, up to ``PRICE_PLACES``), per-GB and per-GiB-hour rates in nano-USD (``NANO``), results
in cents. Spec quantities (floats from YAML) are read as the shortest decimal that round-trips
them (``spec_decimal``), which is the number the user wrote. The rules are stated once, in
docs/cost-model.md, "Rounding".

Pure: no numpy, no I/O.
"""

from __future__ import annotations

from decimal import ROUND_CEILING, ROUND_FLOOR, ROUND_HALF_EVEN, Decimal
from fractions import Fraction

MICRO = 1_000_000
"""Micro-USD per USD: the unit of prices per node-hour (and of cluster hourly prices)."""
NANO = 1_000_000_000
"""Nano-USD per USD: the unit of per-GB and per-GiB-hour rates (disk rates carry 9 decimals)."""
CENTS = 100
CENT = Decimal("0.01")


def to_micro(usd: Decimal | float | int) -> int:
    """USD -> whole micro-USD, half to even (a catalog price with more than 6 decimals is rounded)."""
    return int(Decimal(str(usd)).scaleb(6).to_integral_value(ROUND_HALF_EVEN))


PRICE_PLACES = 12
"""Most decimal places a catalog price may have (a catalog writing more is refused): every price
is exact as an integer number of pico-USD."""
PICO_PER_MICRO = 1_000_000


def split_price(usd: Decimal) -> tuple[int, int]:
    """An exact price -> (whole micro-USD, the pico-USD left over, 0 <= rest < 10^6). No rounding:
    ValueError when it has more than ``PRICE_PLACES`` decimals."""
    units = Decimal(usd).scaleb(PRICE_PLACES)
    if units != units.to_integral_value():
        raise ValueError(f"more than {PRICE_PLACES} decimal places")
    return divmod(int(units), PICO_PER_MICRO)


def usd_of_pico(micro: int, rest: int = 0) -> Decimal:
    """``micro`` micro-USD plus ``rest`` pico-USD -> Decimal USD, at least two places (``Decimal('47.84')``)."""
    value = Decimal(micro * PICO_PER_MICRO + rest).scaleb(-PRICE_PLACES)
    return value.quantize(CENT) if value == value.quantize(CENT) else value.normalize()


def half_even(numerator: int, denominator: int) -> int:
    """``numerator / denominator`` (denominator > 0) rounded half to even, exactly."""
    q, r = divmod(numerator, denominator)
    return q + (2 * r > denominator or (2 * r == denominator and q % 2 == 1))


def to_nano(usd: Decimal | float | int) -> int:
    """USD -> whole nano-USD, half to even."""
    return int(Decimal(str(usd)).scaleb(9).to_integral_value(ROUND_HALF_EVEN))


def spec_decimal(value: float | int | Decimal) -> Decimal:
    """A spec quantity as the decimal the user wrote: the shortest decimal that round-trips the float."""
    return value if isinstance(value, Decimal) else Decimal(repr(value)) if isinstance(value, float) else Decimal(value)


def ceil_int(value: Decimal) -> int:
    return int(value.to_integral_value(ROUND_CEILING))


def round_cents(usd: Fraction | Decimal | int) -> int:
    """An exact USD amount -> whole cents, half to even. The one rounding rule for money terms."""
    scaled = Fraction(usd) * CENTS
    return round(scaled)  # Fraction.__round__ rounds half to even, exactly


def usd_of_cents(cents: int) -> Decimal:
    """Whole cents -> Decimal USD with two places (``Decimal('12.30')``)."""
    return (Decimal(cents) / CENTS).quantize(CENT)


def usd_of_micro(micro: int) -> Decimal:
    """Whole micro-USD -> Decimal USD, normalised to at least two places (``Decimal('47.84')``)."""
    value = Decimal(micro).scaleb(-6)
    return value.quantize(CENT) if value == value.quantize(CENT) else value.normalize()


def usd_text(amount: Decimal | int | str | None) -> str:
    """Money as every human output writes it: ``$8,134.38`` (thousands separators, at least cents,
    a further decimal kept, ``$4.355``, never exponent form), ``-$1.00`` below zero, ``n/a`` when
    unknown. JSON and CSV keep the plain decimal text."""
    if amount is None:
        return "n/a"
    value = Decimal(amount)
    shown = value.quantize(CENT) if value == value.quantize(CENT) else value.normalize()
    text = f"${abs(shown):,f}"
    return f"-{text}" if shown < 0 else text


def cents_text(cents: int | None) -> str:
    """``usd_text`` of whole cents (``n/a`` for None)."""
    return "n/a" if cents is None else usd_text(usd_of_cents(cents))


def floor_units(usd: Decimal, per_usd: int) -> int:
    """The largest whole number of units (``per_usd`` to the dollar) within ``usd``.

    For an integer amount ``x`` in those units, ``x <= usd`` exactly when ``x <= floor_units(usd)``:
    how budgets are compared without rounding.
    """
    return int((usd * per_usd).to_integral_value(ROUND_FLOOR))


__all__ = [
    "CENT",
    "CENTS",
    "MICRO",
    "NANO",
    "PICO_PER_MICRO",
    "PRICE_PLACES",
    "ceil_int",
    "cents_text",
    "floor_units",
    "half_even",
    "round_cents",
    "spec_decimal",
    "split_price",
    "to_micro",
    "to_nano",
    "usd_of_cents",
    "usd_of_micro",
    "usd_of_pico",
    "usd_text",
]
