"""``provisioner down``: delete every node of a cluster, or destroy its stack (registered by lifecycle/cli.py).

The engine is the one the local record names (else pulumi when a pulumi ``up`` kept its plan
here, else direct); without a record the direct engine takes the provider from ``--provider``, the
spec/plan file, or the ledger's entry of a cluster brought up from here.
Idempotent: a second ``down`` says nothing is left and exits 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from provisioner.errors import UsageError
from provisioner.lifecycle import command_support

if TYPE_CHECKING:
    from collections.abc import Callable

    from provisioner.lifecycle.state import ClusterRecord
    from provisioner.plan import Plan
    from provisioner.providers.base import Node
    from provisioner.realize.events import Emit


def down(
    target: str,
    engine: str | None = None,
    backend: str | None = None,
    provider: str | None = None,
    catalog: Path | None = None,
    json_out: bool = False,
    force_unowned: bool = False,
) -> None:
    """Delete every node of the cluster through the provider API (or destroy its stack). Idempotent."""
    from provisioner.lifecycle import state

    cluster_id = command_support.cluster_id_of(target, catalog)
    lab = command_support.enter_lab(cluster_id)
    record = state.load_record(cluster_id)
    if not lab and command_support.is_local(cluster_id):  # a dry run whose lab is gone: nothing of it exists anywhere
        _forget_local(cluster_id, record, command_support.emitter(json_out))
        return
    chosen = engine or (record.engine if record is not None else _unrecorded_engine(cluster_id, backend))
    if backend is None and record is not None:
        backend = record.backend  # where up kept the stack
    command_support.check_engine(chosen)
    if chosen == "direct" and record is None and provider is None:
        # No record (an earlier down forgot it): the spec or plan file says where the cluster lives,
        # else the ledger, which outlives the record, for a cluster brought up from here.
        planned = _plan_of_file(target, catalog)
        from provisioner.lifecycle.ledger import last_provider

        provider = planned.option.provider if planned is not None else last_provider(cluster_id)
        if provider is None:
            raise UsageError(
                f"no record of cluster {cluster_id} here: name its provider (--provider P) or give "
                "its spec or plan file; provisioner gc lists what the tool left anywhere"
            )  # no option to blame: --provider was not given (the message says it is one way out)
    emit = command_support.emitter(json_out)
    if chosen == "pulumi":
        from provisioner.lifecycle import pulumi_engine
        from provisioner.lifecycle.lease import hold
        from provisioner.lifecycle.spend import before_teardown, emit_settled

        runtime = command_support.runtime(emit, interrupts=False)
        with hold(cluster_id, "down"):
            listed = before_teardown(runtime.provider, record)
            kept = record.plan if record is not None else pulumi_engine.kept_plan(cluster_id)
            named = provider or (kept.option.provider if kept is not None else None)
            mine = None if record is None else _of_record(record)
            existed = pulumi_engine.down(cluster_id, backend=backend, emit=emit, provider=named, mine=mine)
            if record is not None and listed is not None and listed[1]:  # planned vs actual, ledger, billing
                emit_settled(emit, listed[0], record, listed[1], runtime.now())
            state.remove_record(cluster_id)
        emit(
            "down",
            message=f"cluster {cluster_id} is down (pulumi)"
            if existed or record is not None
            else f"nothing left of cluster {cluster_id} (no pulumi stack)",
            cluster=cluster_id,
        )
        _reservations_left(
            cluster_id, record.plan if record is not None else pulumi_engine.kept_plan(cluster_id), provider, emit
        )
        if lab:
            _stop_lab(cluster_id, emit)
        return
    from provisioner.lifecycle.realize import tear_down

    runtime = command_support.runtime(emit, interrupts=False)
    with _shielded():
        tear_down(cluster_id, runtime, provider=provider, force_unowned=force_unowned)
    if lab:
        _stop_lab(cluster_id, emit)


def _of_record(record: ClusterRecord) -> Callable[[Node], bool]:
    """Whether a listed node is the record's run's (lifecycle.runs.of_run): what ``down`` may delete."""
    from provisioner.lifecycle.runs import of_run

    return lambda node: bool(of_run(record, [node]))


def _stop_lab(cluster_id: str, emit: Emit) -> None:
    """Nothing of the cluster is left at its fake: the lab's nodes and namespace go, unless the lab
    serves another cluster of the run that is still up (``burst --local --recover anywhere``)."""
    from provisioner.lifecycle import state
    from provisioner.local.lab import release

    if not release(cluster_id, lambda other: state.load_record(other) is not None):
        emit("local", message=f"local: the lab of {cluster_id} keeps running for the run's other cluster(s)")
        return
    emit("local", message=f"local: the lab of {cluster_id} is stopped", cluster=cluster_id)


def _forget_local(cluster_id: str, record: object, emit: Emit) -> None:
    """``down`` of a local dry run whose lab is not running (stopped by an earlier ``down``, or killed):
    its nodes were this machine's containers, so nothing is asked of any provider; the record goes."""
    from provisioner.lifecycle import pulumi_engine, state

    if pulumi_engine.plan_path(cluster_id).is_file():  # a pulumi dry run's stack: its nodes went with the lab
        pulumi_engine.forget(cluster_id)
        pulumi_engine.plan_path(cluster_id).unlink(missing_ok=True)
    if record is not None:
        state.remove_record(cluster_id)
        said = f"cluster {cluster_id} (local dry run) is down: its lab is not running, so none of its nodes exist"
    else:
        said = f"nothing left of cluster {cluster_id} (a local dry run; its lab is stopped)"
    emit("down", message=said, cluster=cluster_id, local=True, deleted=[])


def _plan_of_file(target: str, catalog: Path | None) -> Plan | None:
    """The plan a spec or plan file TARGET names (a spec planned as ``up`` would); None for a cluster id."""
    path = Path(target)
    return command_support.ranked_plans(path, catalog, 1)[0] if path.is_file() else None


def _unrecorded_engine(cluster_id: str, backend: str | None = None) -> str:
    """A cluster without a local record: pulumi when a backend is named (another machine's stack) or a
    pulumi ``up`` kept its plan here, else direct."""
    from provisioner.lifecycle import pulumi_engine

    return "pulumi" if backend or pulumi_engine.plan_path(cluster_id).is_file() else "direct"


def _reservations_left(cluster_id: str, plan: Plan | None, provider: str | None, emit: Emit) -> None:
    """After a pulumi ``down``, what the direct engine's says of a paid reservation that outlives the
    cluster (an EC2 Capacity Block): asked of the provider of a Capacity Block plan, or of ``provider``."""
    from provisioner.lifecycle.reservations import report_left

    name = provider or (plan.option.provider if plan is not None and plan.option.offer.block_hours else None)
    if name is not None:
        runtime = command_support.runtime(emit, interrupts=False)
        report_left(runtime, runtime.provider(name), cluster_id, name)


class _shielded:
    """Ctrl-C during ``down`` is ignored once (the delete must finish); a second one stops it."""

    def __enter__(self) -> None:
        from provisioner.realize.interrupts import Interrupts

        self._interrupts = Interrupts().install()
        self._cm = self._interrupts.shielded()
        self._cm.__enter__()

    def __exit__(self, *exc: object) -> None:
        self._cm.__exit__(None, None, None)
        self._interrupts.restore()
