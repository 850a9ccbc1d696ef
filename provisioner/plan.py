"""The optimizer's output: ranked options, rejections, and the frozen Plan file.

``PlanResult`` is what ``resolve_plan`` returns and what reports render.
``Plan`` is one chosen option frozen with the spec and the offer it priced, saved as
``plan.json``; realization (templates, stacks, burst) consumes a Plan, never a raw
spec, so what was priced is what gets built.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

from provisioner.capabilities import Bootstrap, Network, Purchase
from provisioner.errors import PlanError, PlanFileError, Rejection
from provisioner.offer import Offer, SafeId
from provisioner.spec import ClusterSpec, empty_list
from provisioner.untrusted import loads_bounded

PLAN_VERSION = 2
"""2: money is exact decimal text; options say how they are bought, booted and networked."""

MICRO_USD = Decimal("0.000001")
Money = Annotated[Decimal, Field(ge=0, le=Decimal("1e16"), allow_inf_nan=False)]
"""USD, exact. Totals are whole cents; hourly prices keep the catalog's written decimals."""


class CostBreakdown(BaseModel):
    """Expected USD for the whole run, each term a whole number of cents. ``total`` is the sum of the terms.

    ``compute`` includes the paid boot/bootstrap time (``boot_usd`` says how much of it).
    Rounding rules: docs/cost-model.md, "Rounding".
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    compute: Money
    storage: Money
    egress: Money
    interruption: Money
    total: Money
    boot_usd: Money = Field(Decimal(0), description="Part of compute paid while nodes boot and bootstrap.")
    move: Money = Field(
        Decimal(0),
        description="A move's re-plan only (lifecycle/recover.py): the checkpoint's download and the work lost.",
    )

    @model_serializer(mode="wrap")
    def _without_move(self, handler: SerializerFunctionWrapHandler) -> Any:
        # 0 outside a move: left out, so every plan.json written before moves existed reads and writes the same.
        data = handler(self)
        if isinstance(data, dict) and not self.move:
            data.pop("move", None)
        return data


class Option(BaseModel):
    """One feasible, buyable way to build the cluster, priced."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    rank: int = Field(ge=1)
    provider: SafeId
    region: SafeId
    zone: SafeId | None
    instance_type: SafeId
    gpu_model: SafeId
    gpus_per_node: int = Field(gt=0)
    nodes: int = Field(gt=0)
    spot: bool
    purchase: Purchase = Purchase.INSTANCE
    bootstrap: Bootstrap = Bootstrap.CLOUD_INIT
    network: Network = Network.PRIVATE
    hourly_usd: Money = Field(description="Whole cluster, per hour (nodes x the offer's price, exact).")
    usd_per_gpu_hour: Money = Field(description="hourly_usd / GPUs, rounded half-even to 1e-6 USD.")
    cost: CostBreakdown
    expected_interruptions: float = Field(ge=0, allow_inf_nan=False)
    as_of: dt.date | None = Field(None, description="Price date of this offer (its own, else its provider's).")
    offer: Offer

    @model_validator(mode="before")
    @classmethod
    def _per_gpu_hour(cls, data: Any) -> Any:
        """``usd_per_gpu_hour`` is derived when not given: hourly / GPUs, half-even to 1e-6 USD."""
        if isinstance(data, dict) and data.get("usd_per_gpu_hour") is None:
            try:
                gpus = int(data["gpus_per_node"]) * int(data["nodes"])
                hourly = Decimal(str(data["hourly_usd"]))
            except (KeyError, TypeError, ValueError, ArithmeticError):
                return data  # the field validators say what is wrong
            if gpus > 0 and hourly.is_finite():
                data = {**data, "usd_per_gpu_hour": per_gpu_hour(hourly, gpus)}
        return data


def per_gpu_hour(hourly_usd: Decimal, gpus: int) -> Decimal:
    """USD per GPU-hour, rounded half-even to a millionth of a dollar (docs/cost-model.md, "Rounding")."""
    return (hourly_usd / gpus).quantize(MICRO_USD, rounding=ROUND_HALF_EVEN)


class Quote(BaseModel):
    """A product that fits the spec but is bought through a reservation or sales: listed, never ranked."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: SafeId
    instance_type: SafeId
    region: SafeId
    gpu_model: SafeId
    gpus_per_node: int
    nodes: int
    purchase: Purchase
    hourly_usd: Money = Field(description="Cluster list price per hour (every catalog row has a price).")
    how_to_obtain: str | None = None
    as_of: dt.date | None = None


class RejectedOffer(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: str
    instance_type: str
    region: str
    reason: str
    field: str = ""
    stage: int = 0
    stage_name: str = ""

    @classmethod
    def of(cls, rejection: Rejection) -> RejectedOffer:
        return cls(
            provider=rejection.provider,
            instance_type=rejection.instance_type,
            region=rejection.region,
            reason=rejection.reason,
            field=rejection.field,
            stage=rejection.stage,
            stage_name=getattr(rejection, "stage_name", ""),
        )


class RejectionGroup(BaseModel):
    """Rejections sharing one (stage, spec field, reason): how many, and at most three examples."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    stage: int
    stage_name: str
    field: str
    reason: str
    count: int = Field(ge=1)
    examples: list[RejectedOffer] = Field(default_factory=empty_list, max_length=3)


class PlanResult(BaseModel):
    """The best ``keep`` buyable options ranked by expected total, the quote-only products, and why the rest failed.

    ``feasible_count`` counts every feasible option (``options`` holds the best of them).
    ``rejection_groups`` is furthest stage first, then count; ``rejected`` lists every
    rejection only when ``resolve_plan(..., explain=True)``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    spec: ClusterSpec
    catalog_as_of: dt.date
    catalog_origin: str
    provider_as_of: dict[str, dt.date] = Field(default_factory=dict)
    options: list[Option]
    feasible_count: int = Field(0, ge=0, description="Every feasible option; len(options) when not given.")
    quotes: list[Quote] = Field(default_factory=empty_list)
    rejection_groups: list[RejectionGroup] = Field(default_factory=empty_list)
    rejected: list[RejectedOffer] = Field(default_factory=empty_list)

    @model_validator(mode="before")
    @classmethod
    def _count(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("feasible_count") is None and isinstance(data.get("options"), list):
            data = {**data, "feasible_count": len(data["options"])}
        return data

    def best_per_provider(self) -> list[Option]:
        seen: dict[str, Option] = {}
        for option in self.options:
            seen.setdefault(option.provider, option)
        return list(seen.values())

    def to_plan(self, rank: int = 1) -> Plan:
        """Freeze option ``rank`` into a Plan. Raises PlanError if there is no such option.

        Quote-only products are never in ``options``, so they can never become a Plan (a Capacity
        Block ranked under ``pricing.reservations`` is an option, bought upfront when realized).
        """
        for option in self.options:
            if option.rank == rank:
                block = option.offer.block_hours > 0 and self.spec.pricing.reservations
                if option.purchase.quote_only and not block:  # unreachable through resolve_plan; the contract
                    raise PlanError(f"option {rank} is quote-only ({option.purchase.value}); it cannot be planned")
                return Plan(
                    spec=self.spec,
                    option=option,
                    catalog_as_of=self.catalog_as_of,
                    catalog_origin=self.catalog_origin,
                )
        raise PlanError(f"no option ranked {rank} (there are {len(self.options)})")


COST_TERMS = ("compute", "storage", "egress", "interruption")


def decided_by(first: Option, second: Option) -> str:
    """The cost term that made the difference between two options: where ``first`` saves the most.

    One of ``compute``, ``storage``, ``egress``, ``interruption``; ties go to the earlier term.
    When the totals are equal the ranking's tie-breaks decided: ``hourly price`` when the
    cluster hourly prices differ, else ``tie-break``.
    """
    if first.cost.total == second.cost.total:
        return "hourly price" if first.hourly_usd != second.hourly_usd else "tie-break"
    savings = {term: getattr(second.cost, term) - getattr(first.cost, term) for term in COST_TERMS}
    return max(COST_TERMS, key=lambda term: (savings[term], -COST_TERMS.index(term)))


class PlanNode(BaseModel):
    """One machine of the planned cluster: the one place node names and roles come from.

    Render, the stacks and the lifecycle commands all read ``Plan.nodes``; an adapter's
    ``NodeSpec`` is built from a PlanNode plus the bootstrap and the cluster's tags.
    """

    # built when first used (a `plan` without --save-plan never does): ~1 ms of every plan
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    name: SafeId
    index: int = Field(ge=0)
    role: Literal["head", "worker"]
    provider: SafeId
    instance_type: SafeId
    region: SafeId
    zone: SafeId | None = None
    offer_id: SafeId | None = None
    gpus: int = Field(gt=0)
    spot: bool = False
    bootstrap: Bootstrap = Bootstrap.CLOUD_INIT


def plan_nodes(spec: ClusterSpec, option: Option) -> tuple[PlanNode, ...]:
    """The nodes of ``option`` for ``spec``: ``<name>-0`` is the head, the rest are workers. Pure."""
    return tuple(
        PlanNode(
            name=f"{spec.name}-{index}",
            index=index,
            role="head" if index == 0 else "worker",
            provider=option.provider,
            instance_type=option.instance_type,
            region=option.region,
            zone=option.zone,
            offer_id=option.offer.offer_id,
            gpus=option.gpus_per_node,
            spot=option.spot,
            bootstrap=option.bootstrap,
        )
        for index in range(option.nodes)
    )


class Plan(BaseModel):
    """A priced, reviewable decision. Versioned; never holds a secret.

    ``nodes`` is derived from the spec and the option when absent; a plan file whose node
    list disagrees with its option is refused (a hand edit cannot build other machines
    than the ones priced).
    """

    # built when first used (a `plan` without --save-plan never does): ~1 ms of every plan
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    kind: Literal["provisioner.plan"] = "provisioner.plan"
    version: Literal[2] = 2
    spec: ClusterSpec
    option: Option
    catalog_as_of: dt.date
    catalog_origin: str
    nodes: tuple[PlanNode, ...] = ()

    @model_validator(mode="after")
    def _nodes(self) -> Plan:
        derived = plan_nodes(self.spec, self.option)
        if not self.nodes:
            object.__setattr__(self, "nodes", derived)
        elif self.nodes != derived:
            raise ValueError("nodes do not match the planned option (edit the spec and plan again)")
        return self

    @property
    def cluster_id(self) -> str:
        return self.spec.name

    @property
    def head(self) -> PlanNode:
        return self.nodes[0]

    def dumps(self) -> str:
        return json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"


def save_plan(plan: Plan, path: Path) -> None:
    path.write_text(plan.dumps(), encoding="utf-8")


def load_plan(path: Path) -> Plan:
    """Read a plan file. Raises PlanFileError (exit 2) with the file name on any problem."""
    try:
        return Plan.model_validate_json(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PlanFileError(f"{path}: cannot read plan: {exc.strerror}") from exc
    except ValidationError as exc:
        if _looks_like_a_spec(path):
            raise PlanFileError(
                f"{path}: a spec, not a plan: a .json file is read as a saved plan here; save the "
                f"spec as .yaml, or plan it first: provisioner plan {path} --save-plan plan.json"
            ) from exc
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise PlanFileError(f"{path}: not a valid plan file: {where}: {first['msg']}") from exc


def _looks_like_a_spec(path: Path) -> bool:
    """A JSON document with a spec's required keys and no plan ``kind`` (JSON is YAML: ``plan`` reads it)."""
    try:
        document = loads_bounded(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(document, dict) and "kind" not in document and {"name", "gpus"} <= document.keys()


__all__ = [
    "COST_TERMS",
    "PLAN_VERSION",
    "CostBreakdown",
    "Money",
    "Option",
    "Plan",
    "PlanNode",
    "PlanResult",
    "Quote",
    "RejectedOffer",
    "RejectionGroup",
    "decided_by",
    "load_plan",
    "per_gpu_hour",
    "plan_nodes",
    "save_plan",
]
