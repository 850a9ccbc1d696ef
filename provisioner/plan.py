"""The optimizer's output: ranked options, rejections, and the frozen Plan file.

``PlanResult`` is what ``resolve_plan`` returns and what reports render.
``Plan`` is one chosen option frozen with the spec and the offer it priced, saved as
``plan.json``; realization (templates, stacks, burst) consumes a Plan, never a raw
spec, so what was priced is what gets built.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from provisioner.errors import PlanError, Rejection
from provisioner.offer import Offer
from provisioner.spec import ClusterSpec

PLAN_VERSION = 1


class CostBreakdown(BaseModel):
    """Expected USD for the whole run. ``total`` is the sum of the four parts.

    ``compute`` includes the paid boot/bootstrap time (``boot_usd`` says how much of it).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    compute: float
    storage: float
    egress: float
    interruption: float
    total: float
    boot_usd: float = Field(0, description="Part of compute paid while nodes boot and bootstrap.")


class Option(BaseModel):
    """One feasible way to build the cluster, priced."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rank: int
    provider: str
    region: str
    zone: str | None
    instance_type: str
    gpu_model: str
    gpus_per_node: int
    nodes: int
    spot: bool
    hourly_usd: float = Field(description="Whole cluster, per hour.")
    cost: CostBreakdown
    expected_interruptions: float
    offer: Offer


class RejectedOffer(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: str
    instance_type: str
    region: str
    reason: str
    field: str = ""

    @classmethod
    def of(cls, rejection: Rejection) -> RejectedOffer:
        return cls(
            provider=rejection.provider,
            instance_type=rejection.instance_type,
            region=rejection.region,
            reason=rejection.reason,
            field=rejection.field,
        )


class PlanResult(BaseModel):
    """Every feasible option ranked by expected total cost, and every rejection with its reason."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    spec: ClusterSpec
    catalog_as_of: dt.date
    catalog_origin: str
    options: list[Option]
    rejected: list[RejectedOffer]

    def best_per_provider(self) -> list[Option]:
        seen: dict[str, Option] = {}
        for option in self.options:
            seen.setdefault(option.provider, option)
        return list(seen.values())

    def to_plan(self, rank: int = 1) -> Plan:
        """Freeze option ``rank`` into a Plan. Raises PlanError if there is no such option."""
        for option in self.options:
            if option.rank == rank:
                return Plan(
                    spec=self.spec,
                    option=option,
                    catalog_as_of=self.catalog_as_of,
                    catalog_origin=self.catalog_origin,
                )
        raise PlanError(f"no option ranked {rank} (there are {len(self.options)})")


class Plan(BaseModel):
    """A priced, reviewable decision. Versioned; never holds a secret."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["provisioner.plan"] = "provisioner.plan"
    version: Literal[1] = 1
    spec: ClusterSpec
    option: Option
    catalog_as_of: dt.date
    catalog_origin: str

    @property
    def cluster_id(self) -> str:
        return self.spec.name

    def dumps(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"


def save_plan(plan: Plan, path: Path) -> None:
    path.write_text(plan.dumps(), encoding="utf-8")


def load_plan(path: Path) -> Plan:
    """Read a plan file. Raises PlanError with the file name on any problem."""
    try:
        return Plan.model_validate_json(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PlanError(f"{path}: cannot read plan: {exc.strerror}") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise PlanError(f"{path}: not a valid plan file: {where}: {first['msg']}") from exc


__all__ = [
    "PLAN_VERSION",
    "CostBreakdown",
    "Option",
    "Plan",
    "PlanResult",
    "RejectedOffer",
    "load_plan",
    "save_plan",
]
