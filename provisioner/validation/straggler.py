"""Straggler detection: robust, relative to the median of the peers.

One slow GPU drags every synchronous step, so a GPU (among a node's GPUs) or a node (among
the cluster's nodes) is a straggler when it is *both*

* at least ``min_shortfall`` (default 5 %) below the median of its peers: the spread the
  reference accepts between healthy GPUs on one node (ml-engineering's MAMF notes), and
* an outlier by the modified z-score, ``0.6745 * (x - median) / MAD`` below ``-z_threshold``
  (Iglewicz and Hoaglin's 3.5): the median absolute deviation ignores the outlier itself,
  unlike a mean and standard deviation, which one bad node pulls towards itself.

When every peer but one agrees exactly (MAD = 0) the shortfall rule decides alone. With
fewer than three peers no median is robust, so nothing is flagged (the absolute thresholds
against the reference still apply). Higher values are better (TFLOP/s, GB/s).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass

MIN_PEERS = 3
Z_THRESHOLD = 3.5
MIN_SHORTFALL = 0.05


@dataclass(frozen=True)
class Straggler:
    name: str
    value: float
    median: float
    shortfall: float  # 0.12 = 12 % below the median
    robust_z: float | None  # None when MAD is 0

    def describe(self, metric: str, unit: str) -> str:
        return (
            f"{metric} {self.value:.1f} {unit} is {self.shortfall:.0%} below the median "
            f"{self.median:.1f} {unit} of its peers"
        )


def find_stragglers(
    values: Mapping[str, float], *, z_threshold: float = Z_THRESHOLD, min_shortfall: float = MIN_SHORTFALL
) -> list[Straggler]:
    """The names whose value is a robust low outlier, slowest first. Pure; never raises on few values."""
    finite = {name: value for name, value in values.items() if value == value}  # drop NaN
    if len(finite) < MIN_PEERS:
        return []
    median = statistics.median(finite.values())
    if median <= 0:
        return []
    mad = statistics.median(abs(value - median) for value in finite.values())
    found = []
    for name, value in finite.items():
        shortfall = (median - value) / median
        if shortfall < min_shortfall:
            continue
        z = 0.6745 * (value - median) / mad if mad > 0 else None
        if z is None or z < -z_threshold:
            found.append(Straggler(name, value, median, shortfall, z))
    return sorted(found, key=lambda s: s.value)


__all__ = ["MIN_PEERS", "MIN_SHORTFALL", "Z_THRESHOLD", "Straggler", "find_stragglers"]
