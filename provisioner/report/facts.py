"""What every report states about a PlanResult: assumptions, price dates, why #1 won, quotes (the
rejections: ``report.rejections``).

Pure functions (no I/O, no clock: the generation time comes in as ``ReportMeta``). They read
the PlanResult through small accessors so the reports render both the current model and the
fields the core adds (Decimal money, ``rejection_groups``, ``quotes``, ``provider_as_of``,
``feasible_count``, ``Option.network``/``usd_per_gpu_hour``/``as_of``, a ``decided_by`` helper):
where a field is absent the value is derived here from what is present.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from provisioner.plan import Option, PlanResult, RejectedOffer
from provisioner.spec import ClusterSpec

STALE_AFTER_DAYS = 7
"""A ranked provider's prices older than this (at generation time) get a warning."""
COST_PARTS = ("compute", "storage", "egress", "interruption")


@dataclass(frozen=True)
class ReportMeta:
    """What the shell knows and the pure core does not: when, and by which version."""

    generated_at: dt.datetime | None = None
    tool_version: str | None = None


def money(value: object) -> Decimal:
    """An amount as an exact Decimal: Decimals as they are, floats by their shortest repr (never binary noise)."""
    if isinstance(value, Decimal):
        return value
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, int | str):
        return Decimal(value)
    raise TypeError(f"not an amount: {value!r}")


def cost_part(option: Option, part: str) -> Decimal:
    return money(getattr(option.cost, part))


def total(option: Option) -> Decimal:
    return cost_part(option, "total")


def hourly(option: Option) -> Decimal:
    return money(option.hourly_usd)


def usd_per_gpu_hour(option: Option) -> Decimal:
    """The core's ``usd_per_gpu_hour`` when it has one, else the cluster's $/h over its GPUs (exact)."""
    given = getattr(option, "usd_per_gpu_hour", None)
    if given is not None:
        return money(given)
    gpus = option.gpus_per_node * option.nodes
    return hourly(option) / gpus if gpus else Decimal(0)


def _offer_attr(option: Option, name: str, default: Any) -> Any:
    value = getattr(option, name, None)
    if value is None:
        value = getattr(option.offer, name, None)
    return default if value is None else value


def enum_text(value: object) -> str:
    return str(getattr(value, "value", value))


def network(option: Option) -> str:
    """How the nodes reach each other: private | partition | cluster_fabric | none."""
    return enum_text(_offer_attr(option, "network", "private"))


def purchase(option: Option) -> str:
    return enum_text(_offer_attr(option, "purchase", "instance"))


def bootstrap(option: Option) -> str:
    return enum_text(_offer_attr(option, "bootstrap", "cloud_init"))


NETWORK_WORDS = {
    "private": "the provider's private network",
    "partition": "a dedicated network partition",
    "cluster_fabric": "the cluster product's own fabric",
    "none": "public addresses only (no private network)",
}


def network_words(option: Option) -> str:
    name = network(option)
    return NETWORK_WORDS.get(name, name)


def provider_as_of(result: PlanResult) -> dict[str, dt.date]:
    """Each provider's price date: the core's ``provider_as_of``, else the catalog's ``as_of``."""
    given = getattr(result, "provider_as_of", None)
    dates: dict[str, dt.date] = dict(given) if given else {}
    for option in result.options:
        dates.setdefault(option.provider, result.catalog_as_of)
    for quote in quotes(result):
        dates.setdefault(quote.provider, result.catalog_as_of)
    return dates


def option_as_of(option: Option, result: PlanResult) -> dt.date:
    """The price date of one option: its own, else its provider's, else the catalog's."""
    own = getattr(option, "as_of", None) or getattr(option.offer, "as_of", None)
    return own or provider_as_of(result).get(option.provider, result.catalog_as_of)


@dataclass(frozen=True)
class PriceDate:
    provider: str
    as_of: dt.date
    age_days: int | None
    stale: bool


def price_dates(result: PlanResult, options: Sequence[Option], meta: ReportMeta) -> list[PriceDate]:
    """Price dates of the providers the report ranks or quotes (oldest option date per provider)."""
    dates = provider_as_of(result)
    shown: dict[str, dt.date] = {}
    for option in options:
        date = option_as_of(option, result)
        shown[option.provider] = min(shown.get(option.provider, date), date)
    for quote in quotes(result):
        shown.setdefault(quote.provider, dates.get(quote.provider, result.catalog_as_of))
    today = meta.generated_at.date() if meta.generated_at else None
    found = []
    for provider in sorted(shown):
        age = (today - shown[provider]).days if today else None
        found.append(PriceDate(provider, shown[provider], age, age is not None and age > STALE_AFTER_DAYS))
    return found


def stale_warnings(dates: Sequence[PriceDate]) -> list[str]:
    """One line naming every ranked provider whose prices are older than STALE_AFTER_DAYS; else none."""
    stale = [f"{d.provider} {d.as_of.isoformat()} ({d.age_days} days)" for d in dates if d.stale]
    if not stale:
        return []
    return [
        f"prices older than {STALE_AFTER_DAYS} days: {', '.join(stale)}; "
        "run `provisioner catalog refresh` before buying"
    ]


def access_warnings(spec: ClusterSpec, providers: Sequence[str] = ()) -> list[str]:
    """What the spec opens to the Internet: SSH (tcp/22) from ``access.allowed_cidrs`` only, the one
    port a node answers from outside its cluster. One line when it is closed (up and burst then
    refuse) or open to every address (provisioner.exposure.open_to_all: any split of 0.0.0.0/0 or
    ::/0 counts), and one per provider of ``providers`` (the ranked rows) that cannot apply it."""
    from provisioner.exposure import exposure_lines, unfiltered_lines

    cidrs = spec.access.allowed_cidrs
    if not cidrs:
        return [
            "SSH: access.allowed_cidrs is not set, so nothing outside the cluster reaches the nodes; "
            "up and burst need it (e.g. [203.0.113.7/32], this machine's public address)",
            *unfiltered_lines(providers),
        ]
    return exposure_lines(cidrs, providers)


# -- assumptions ----------------------------------------------------------------------------


def assumptions(spec: ClusterSpec) -> dict[str, Any]:
    """What the costs assume, read from the spec (the JSON report's ``assumptions`` object)."""
    workload = spec.workload
    return {
        "hours": workload.hours,
        "dataset_size_gb": workload.dataset.size_gb,
        "dataset_location": workload.dataset.location,
        "dataset_region": workload.dataset.region,
        "results_out_gb": workload.results_out_gb,
        "pricing_mode": enum_text(spec.pricing.mode),
        "checkpoint_interval_minutes": workload.checkpoint_interval_minutes,
        "restart_overhead_minutes": workload.restart_overhead_minutes,
    }


def _num(value: object) -> str:
    return f"{value:,g}" if isinstance(value, float | int) else str(value)


def assumptions_text(spec: ClusterSpec) -> str:
    """One line: ``48 h run; dataset 40,000 GB from aws:us-east-1; results out 0 GB; on-demand; ...``."""
    facts = assumptions(spec)
    if facts["dataset_size_gb"] and facts["dataset_location"] != "none":
        region = f" ({facts['dataset_region']})" if facts["dataset_region"] else ""
        dataset = f"dataset {_num(facts['dataset_size_gb'])} GB from {facts['dataset_location']}{region}"
    else:
        dataset = "no dataset to move"
    mode = {"on_demand": "on-demand", "spot": "spot", "either": "on-demand or spot"}.get(
        facts["pricing_mode"], facts["pricing_mode"]
    )
    return (
        f"{_num(facts['hours'])} h run; {dataset}; results out {_num(facts['results_out_gb'])} GB; "
        f"pricing {mode}; checkpoint every {_num(facts['checkpoint_interval_minutes'])} min "
        f"(restart {_num(facts['restart_overhead_minutes'])} min)"
    )


# -- why #1 beat #2 -------------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    """Which cost term decided rank 1 over rank 2, and the sentence that says so."""

    term: str
    margin_usd: Decimal
    sentence: str


def decided_by(first: Option, second: Option) -> str:
    """The cost term that made the difference: the core's helper when it has one, else the term
    where ``first`` saves the most against ``second`` (ties: the earlier term in COST_PARTS)."""
    from provisioner import plan as plan_module

    core = getattr(plan_module, "decided_by", None)
    if callable(core):
        return str(core(first, second))
    savings = {part: cost_part(second, part) - cost_part(first, part) for part in COST_PARTS}
    return max(COST_PARTS, key=lambda part: (savings[part], -COST_PARTS.index(part)))


def decision(options: Sequence[Option]) -> Decision | None:
    """Why the first option beat the second, in one sentence; None with fewer than two options."""
    if len(options) < 2:
        return None
    first, second = options[0], options[1]
    term = decided_by(first, second)
    margin = total(second) - total(first)
    who = f"#{second.rank} ({second.provider} {second.instance_type} in {second.region}"
    who += ", spot)" if second.spot else ")"
    if margin == 0:
        return Decision(term, margin, f"#1 and {who} cost the same; #1 is first on the stable tie-break.")
    if term not in COST_PARTS:
        return Decision(term, margin, f"#1 beats {who} by {usd(margin)}, decided by {term}.")
    saved = cost_part(second, term) - cost_part(first, term)
    against = [
        (cost_part(first, p) - cost_part(second, p), p)
        for p in COST_PARTS
        if cost_part(first, p) > cost_part(second, p)
    ]
    sentence = f"#1 beats {who} by {usd(margin)}, decided by {term}: {usd(saved)} less"
    if against:
        extra, part = max(against)
        sentence += f", outweighing {usd(extra)} more {part}"
    return Decision(term, margin, sentence + ".")


# -- quotes and rejections ------------------------------------------------------------------


@dataclass(frozen=True)
class QuoteRow:
    provider: str
    instance_type: str
    region: str
    gpu_model: str
    gpus_per_node: int
    nodes: int
    purchase: str
    hourly_usd: Decimal
    how_to_obtain: str


def quotes(result: PlanResult) -> list[QuoteRow]:
    """Quote-only products (reservations, sales-led clusters): listed, never ranked."""
    rows = []
    for quote in getattr(result, "quotes", None) or []:
        price = getattr(quote, "hourly_usd", None)
        rows.append(
            QuoteRow(
                provider=quote.provider,
                instance_type=quote.instance_type,
                region=quote.region,
                gpu_model=quote.gpu_model,
                gpus_per_node=quote.gpus_per_node,
                nodes=quote.nodes,
                purchase=enum_text(quote.purchase),
                hourly_usd=money(price),
                how_to_obtain=getattr(quote, "how_to_obtain", None) or "ask the provider",
            )
        )
    return rows


def unplannable_result(spec: ClusterSpec, catalog_as_of: dt.date, catalog_origin: str, error: Exception) -> PlanResult:
    """A PlanResult with no options for a spec nothing fits, so ``--explain`` can print why.

    Reads the rejections a NoFeasibleOfferError carries (``groups``/``rejection_groups`` and
    ``rejected``) and the quote-only products that fit (``quotes``); built without validation
    because it is only ever rendered, never planned.
    """
    rejected = [
        item if isinstance(item, RejectedOffer) else RejectedOffer.of(item)
        for item in getattr(error, "rejected", None) or []
    ]
    fields: dict[str, Any] = {
        "spec": spec,
        "catalog_as_of": catalog_as_of,
        "catalog_origin": catalog_origin,
        "options": [],
        "rejected": rejected,
    }
    groups = getattr(error, "rejection_groups", None) or getattr(error, "groups", None)
    if groups:
        fields["rejection_groups"] = list(groups)
    fields["quotes"] = list(getattr(error, "quotes", None) or [])
    return PlanResult.model_construct(**fields)


def feasible_count(result: PlanResult) -> int:
    given = getattr(result, "feasible_count", None)
    return len(result.options) if given is None else int(given)


def usd(amount: object) -> str:
    """``$1,234.56``; amounts under a cent but above zero keep three decimals. Exact (Decimal) rounding."""
    value = money(amount)
    if 0 < abs(value) < Decimal("0.01"):
        return f"${value:,.3f}"
    return f"${value:,.2f}"


__all__ = [
    "COST_PARTS",
    "STALE_AFTER_DAYS",
    "Decision",
    "PriceDate",
    "QuoteRow",
    "ReportMeta",
    "access_warnings",
    "assumptions",
    "assumptions_text",
    "decided_by",
    "decision",
    "feasible_count",
    "money",
    "network",
    "network_words",
    "option_as_of",
    "price_dates",
    "provider_as_of",
    "quotes",
    "stale_warnings",
    "unplannable_result",
    "usd",
    "usd_per_gpu_hour",
]
