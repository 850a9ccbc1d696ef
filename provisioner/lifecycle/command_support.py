"""What the lifecycle commands share: option parsing (durations, amounts, the engine), the engine
choice, planning a target, naming a cluster, and the runtime every command runs with.

The command modules (up_command, down_command, look_commands, watch, costs_report, and the
``validate`` command) import this module and call ``runtime()`` through it at call time, so a test
that swaps ``command_support.runtime`` swaps it for every command. lifecycle/cli.py registers them.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING

from provisioner import cliargs
from provisioner.errors import UsageError

if TYPE_CHECKING:
    from provisioner.lifecycle.realize import Runtime
    from provisioner.plan import Plan
    from provisioner.realize.events import Emit

ENGINES = ("pulumi", "direct")
ON_BUDGET = ("stop", "warn")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "": 3600}

ENGINE_HELP = "pulumi (drive the stacks/ program) | direct (call the adapters)."
BACKEND_HELP = (
    "Pulumi state backend URL (s3://..., gs://..., https://api.pulumi.com); default: a file backend "
    "under the state dir."
)


MAX_DURATION_S = 87_600 * 3600
"""The longest duration an option takes: ten years, the spec's ``workload.hours`` bound (a date
further out overflows the expiry arithmetic)."""
MAX_USD = Decimal(10) ** 9
"""The largest amount an option takes: the bound of every quantity in a spec."""


def parse_duration(text: str, option: str = "--ttl") -> float:
    """``90s``, ``30m``, ``4h``, ``2d`` (a bare number is hours) -> seconds, at most ten years.
    UsageError otherwise."""
    found = _DURATION.match(text)
    if not found or float(found.group(1)) <= 0:
        raise UsageError(f"{text!r} is not a duration like 30m, 4h or 2d", option=option)
    seconds = float(found.group(1)) * _UNIT_S[found.group(2)]
    if seconds > MAX_DURATION_S:
        raise UsageError(f"{text!r} is longer than 87600h (ten years)", option=option)
    return seconds


def parse_money(text: str) -> Decimal:
    """A positive amount of USD, at most 10^9. UsageError otherwise."""
    try:
        value = Decimal(text)
    except InvalidOperation:
        value = Decimal("NaN")
    if not value.is_finite() or value <= 0:
        raise UsageError(f"{text!r} is not a positive amount of USD", option="--max-cost")
    if value > MAX_USD:
        raise UsageError(f"{text!r} is over the largest amount, 1000000000 USD", option="--max-cost")
    return value


def check_engine(engine: str) -> None:
    if engine not in ENGINES:
        raise UsageError(f"must be one of {', '.join(ENGINES)}", option="--engine")


def default_engine(which: Callable[[str], str | None] = shutil.which) -> tuple[str, str]:
    """(engine, why) for an ``up`` without ``--engine``: pulumi when its CLI is on PATH, else direct."""
    found = which("pulumi")
    if found:
        return "pulumi", f"the pulumi CLI is on PATH ({found}); --engine direct calls the adapters instead"
    return "direct", "no pulumi CLI on PATH; --engine pulumi needs it"


def emitter(json_out: bool) -> Emit:
    from provisioner.realize.events import JsonLines, RichLines

    return JsonLines() if json_out else RichLines()


def ranked_plans(source: Path, catalog: Path | None, count: int = 3) -> list[Plan]:
    """A saved plan as the one plan; a spec's best ``count`` options, best first."""
    from provisioner.loader import load_spec
    from provisioner.plan import load_plan
    from provisioner.workflow import choose_catalog, resolve

    if source.suffix == ".json":
        return [load_plan(source)]
    result = resolve(load_spec(source), choose_catalog(catalog), source, keep=max(count, 1))
    return [result.to_plan(option.rank) for option in result.options[:count]]


def cluster_id_of(target: str, catalog: Path | None) -> str:
    """The cluster id TARGET names: a spec/plan file's cluster, else TARGET itself, which must be a
    cluster name as a spec writes it (it names files in the state dir: ``../x`` must not reach out)."""
    path = Path(target)
    try:
        is_file = path.is_file()
    except OSError:  # a name too long for a file name is no file
        is_file = False
    if is_file:
        if path.suffix == ".json":
            from provisioner.plan import load_plan

            return load_plan(path).cluster_id
        from provisioner.loader import load_spec

        return load_spec(path).name
    return cliargs.cluster_name(target, option="CLUSTER_OR_FILE", file_too=True)


def runtime(emit: Emit, *, interrupts: bool = True) -> Runtime:
    from provisioner.lifecycle.realize import Runtime
    from provisioner.realize.interrupts import Interrupts

    return Runtime(emit=emit, interrupts=Interrupts().install() if interrupts else None)


def enter_lab(cluster_id: str) -> bool:
    """Into the cluster's local lab (``up --local``) when one runs here; see provisioner.local.lab.
    A local cluster whose lab is gone seals this process to nothing (providers.seal): what follows
    never asks a real provider about a dry run. Returns whether a lab was entered."""
    from provisioner.local.lab import enter

    if enter(cluster_id):
        return True
    if is_local(cluster_id):
        from provisioner.providers.seal import seal_to

        seal_to(cluster_id)
    return False


def is_local(cluster_id: str) -> bool:
    """Whether ``cluster_id`` is a local dry run: its record says so, else (no record: an earlier
    ``down`` forgot it) the ledger's last bring-up of the name from here. An unreadable record is not."""
    from provisioner.errors import ProvisionerError
    from provisioner.lifecycle import ledger, state

    try:
        record = state.load_record(cluster_id)
        return record.local if record is not None else ledger.last_was_local(cluster_id)
    except ProvisionerError:
        return False


def require_lab(cluster_id: str, entered: bool) -> None:
    """UsageError (one line) when ``cluster_id`` is a local dry run whose lab is not running here:
    its nodes were this machine's containers and are gone with it."""
    if not entered and is_local(cluster_id):
        raise UsageError(
            f"cluster {cluster_id} is a local dry run and its lab is not running here (its nodes went "
            f"with it): provisioner down {cluster_id} forgets it; provisioner up SPEC --local starts another"
        )


def local_gc(cluster_id: str, delete: bool) -> int | None:
    """The exit code of ``gc --cluster cluster_id`` when it is a local dry run (None: it is not), never
    asking a real provider: while its lab runs, gc looks through the lab's fake only (the process is
    sealed to it, providers.seal); once the lab is gone nothing of the cluster exists (its nodes were
    this machine's containers), so gc says so and, with ``delete``, forgets the record."""
    from provisioner.lifecycle import state
    from provisioner.termtext import printable, say

    if not is_local(cluster_id):
        return None
    if enter_lab(cluster_id):
        from provisioner.lifecycle.gc import collect_garbage
        from provisioner.providers.seal import sealed

        seal = sealed()
        if seal is not None and seal.provider is None and seal.providers:  # a run's lab: each fake it serves
            from provisioner.providers import registry

            adapters = {name: registry.get_provider(name) for name in seal.providers}
            report = collect_garbage(adapters=adapters, cluster_id=cluster_id, delete=delete)
        else:
            report = collect_garbage(provider=seal.provider if seal else None, cluster_id=cluster_id, delete=delete)
        say(report.render())
        return report.exit_code
    record = state.load_record(cluster_id)
    said = f"cluster {cluster_id} is a local dry run whose lab is not running: nothing of it exists at any provider"
    if record is not None and delete:
        state.remove_record(cluster_id)
        said += "; its record is forgotten"
    elif record is not None:
        said += f"; provisioner gc --cluster {cluster_id} --yes forgets its record"
    say(printable(said))
    return 0


def plans_to_try(
    target: Path, catalog: Path | None, max_tries: int, ssh_from: list[str] | None, local: bool
) -> list[Plan]:
    """The ranked plans ``up`` and ``burst`` try, their input judged (one-line errors, nothing started):
    a local dry run's are the options its lab can boot (SSH comes from the lab's own address,
    lab.fit_to_host). The checkpoint store's credentials the spec names must be set now."""
    from provisioner.realize.store_credentials import require_store_credentials

    if local:
        from provisioner.local import lab

        lab.require_host()
        plans = ranked_plans(target, catalog, lab.LOCAL_RANKED)
        lab.local_options(plans, max_tries)  # refused here, before the first progress line
    else:
        from provisioner.lifecycle.access import require_ssh_sources

        plans = with_ssh_sources(ranked_plans(target, catalog, max_tries), ssh_from)
        require_ssh_sources(plans[0], target)
    require_store_credentials(plans[0].spec.checkpoint)  # read again by the SSH pass, sent only over SSH
    return plans


def with_ssh_sources(plans: list[Plan], cidrs: list[str] | None) -> list[Plan]:
    """``plans`` admitting SSH from ``cidrs`` (``--ssh-from``) instead of the spec's
    ``access.allowed_cidrs``; unchanged without. UsageError for a block that is not an address or CIDR."""
    if not cidrs:
        return plans
    import ipaddress

    blocks = []
    for text in cidrs:
        try:
            blocks.append(str(ipaddress.ip_network(text.strip(), strict=False)))
        except ValueError:
            raise UsageError(f"{text!r} is not an address or CIDR like 203.0.113.7/32", option="--ssh-from") from None
    out = []
    for plan in plans:
        access = plan.spec.access.model_copy(update={"allowed_cidrs": blocks})
        out.append(plan.model_copy(update={"spec": plan.spec.model_copy(update={"access": access})}))
    return out
