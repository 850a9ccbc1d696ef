"""EC2 vCPU quotas for GPU instances: which Service Quotas code governs a type, and refusals
that name the code and the command that asks for more.

Codes (checked 2026-11-23 against the EC2 User Guide "Spot Instance quotas" page, which lists
"All P4, P3 and P2 Spot Instance Requests", "All P5 Spot Instance Requests" and "All G and VT
Spot Instance Requests", and dstack's ``_ON_DEMAND_QUOTA_CODES``; the code strings themselves
are from public scripts, see docs/aws-gcp.md):

=============  ===========  ==============================================
family         market       quota code (name)
=============  ===========  ==============================================
p* (all)       on-demand    L-417A185B  Running On-Demand P instances
g*, vt*        on-demand    L-DB2E81BA  Running On-Demand G and VT instances
p2, p3, p4*    spot         L-7212CCBC  All P4, P3 and P2 Spot Instance Requests
p5*, p6*       spot         L-C4BD4855  All P5 Spot Instance Requests (p6: UNVERIFIED)
g*, vt*        spot         L-3819A6DF  All G and VT Spot Instance Requests
=============  ===========  ==============================================

Quotas count vCPUs of running (and, for spot, requested) instances per account per region.
Pure except ``check_quota``'s caller-supplied lookup.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from provisioner.errors import QuotaError

ON_DEMAND_P = "L-417A185B"
ON_DEMAND_G_VT = "L-DB2E81BA"
SPOT_P2_P3_P4 = "L-7212CCBC"
SPOT_P5 = "L-C4BD4855"
SPOT_G_VT = "L-3819A6DF"

QUOTA_NAMES = {
    ON_DEMAND_P: "Running On-Demand P instances",
    ON_DEMAND_G_VT: "Running On-Demand G and VT instances",
    SPOT_P2_P3_P4: "All P4, P3 and P2 Spot Instance Requests",
    SPOT_P5: "All P5 Spot Instance Requests",
    SPOT_G_VT: "All G and VT Spot Instance Requests",
}

_FAMILY = re.compile(r"^([a-z]+)(\d*)")


def quota_code(instance_type: str, spot: bool) -> str | None:
    """The Service Quotas code limiting ``instance_type`` (None: not a P/G/VT type)."""
    found = _FAMILY.match(instance_type.lower())
    if not found:
        return None
    letters, generation = found.group(1), int(found.group(2) or 0)
    if letters == "p":
        if not spot:
            return ON_DEMAND_P
        return SPOT_P5 if generation >= 5 else SPOT_P2_P3_P4
    if letters in ("g", "vt"):
        return SPOT_G_VT if spot else ON_DEMAND_G_VT
    return None


def increase_command(code: str, region: str, desired_vcpus: int) -> str:
    """The AWS CLI command that asks for ``desired_vcpus`` under ``code`` in ``region``."""
    return (
        f"aws service-quotas request-service-quota-increase --service-code ec2 --quota-code {code} "
        f"--desired-value {desired_vcpus} --region {region}"
    )


def how_to_request(code: str, region: str) -> str:
    """The increase command with the value left for the reader (what ``QuotaHeadroom`` records)."""
    return increase_command(code, region, 0).replace("--desired-value 0", "--desired-value <vCPUs wanted>")


@dataclass(frozen=True)
class QuotaShortfall:
    """A request that does not fit a quota: enough to render a rejection reason or raise.

    ``instance_type`` names every type of the request under this code (comma-separated);
    ``used_vcpus`` is what running instances already use of it."""

    instance_type: str
    region: str
    spot: bool
    code: str
    limit_vcpus: int
    needed_vcpus: int
    used_vcpus: int = 0

    @property
    def reason(self) -> str:
        market = "spot" if self.spot else "on-demand"
        used = f" ({self.used_vcpus} already in use)" if self.used_vcpus else ""
        return (
            f"{self.needed_vcpus} vCPUs of {market} {self.instance_type} in {self.region} exceed the quota "
            f"{self.code} ({QUOTA_NAMES.get(self.code, 'EC2 vCPU quota')}) of {self.limit_vcpus} vCPUs{used}; "
            f"ask for more with: {increase_command(self.code, self.region, self.used_vcpus + self.needed_vcpus)}"
        )


def shortfall(
    instance_type: str, region: str, vcpus_per_node: int, count: int, spot: bool, limit_vcpus: float | None
) -> QuotaShortfall | None:
    """The shortfall when ``count`` nodes need more vCPUs than ``limit_vcpus`` (None: fits or unknown).

    The quota covers every running instance of the family, so this is optimistic: usage by
    instances already running is not subtracted (Service Quotas reports usage only through
    CloudWatch; see docs/aws-gcp.md).
    """
    code = quota_code(instance_type, spot)
    if code is None or limit_vcpus is None:
        return None
    needed = vcpus_per_node * count
    if needed <= limit_vcpus:
        return None
    return QuotaShortfall(instance_type, region, spot, code, int(limit_vcpus), needed)


def check_quota(
    lookup: Callable[[str, str], float | None],
    instance_type: str,
    region: str,
    vcpus_per_node: int,
    count: int,
    spot: bool,
) -> None:
    """Raise QuotaError naming the code and the increase command when ``count`` nodes do not fit.

    ``lookup(region, code)`` returns the quota value in vCPUs (None when unknown: no refusal).
    """
    code = quota_code(instance_type, spot)
    if code is None:
        return
    found = shortfall(instance_type, region, vcpus_per_node, count, spot, lookup(region, code))
    if found is not None:
        raise QuotaError("aws", found.reason)


__all__ = [
    "ON_DEMAND_G_VT",
    "ON_DEMAND_P",
    "QUOTA_NAMES",
    "SPOT_G_VT",
    "SPOT_P2_P3_P4",
    "SPOT_P5",
    "QuotaShortfall",
    "check_quota",
    "how_to_request",
    "increase_command",
    "quota_code",
    "shortfall",
]
