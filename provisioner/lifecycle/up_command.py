"""``provisioner up``: plan, buy and boot (registered by lifecycle/cli.py).

``up`` on the pulumi engine drives the stacks/ program through the Automation API, keeps a local
record (saved as ``creating`` before the stack is touched) and, unless ``--no-wait``, runs the
direct engine's last steps on the stack's nodes; on the direct engine it calls
``lifecycle.realize.bring_up_first`` over the spec's ranked options. ``burst`` lives in
lifecycle/burst_command.py.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

from provisioner.errors import ProvisionerError, StackError, StackLockedError, UsageError
from provisioner.lifecycle import command_support

if TYPE_CHECKING:
    from provisioner.lifecycle.realize import Runtime
    from provisioner.plan import Plan
    from provisioner.providers.base import Node
    from provisioner.realize.events import Emit


def up(
    target: Path,
    engine: str | None = None,
    backend: str | None = None,
    catalog: Path | None = None,
    ttl: str | None = None,
    max_tries: int = 3,
    json_out: bool = False,
    max_cost: str | None = None,
    on_budget: str = "warn",
    wait: bool = True,
    local: bool = False,
    ssh_from: list[str] | None = None,
) -> None:
    """Buy and boot the cluster; block until its control plane lists every node ready (on either
    engine; --no-wait, pulumi engine only: return once the stack is up). --local: a dry run that
    boots the plan's nodes as containers on this machine behind the provider's fake (the direct
    engine unless --engine pulumi names the other)."""
    why = "--engine " + engine if engine else ""
    if local:
        engine, why = engine or "direct", "--local" + (f" --engine {engine}" if engine else "")
        if backend is not None:
            raise UsageError("a local dry run keeps its stack in this machine's state dir", option="--backend")
    if engine is None:
        engine, why = command_support.default_engine()
    command_support.check_engine(engine)
    if not wait and engine != "pulumi":
        raise UsageError("the direct engine always waits for the control plane", option="--no-wait")
    ttl_s = command_support.parse_duration(ttl) if ttl else None
    max_cost_usd = command_support.parse_money(max_cost) if max_cost else None
    emit = command_support.emitter(json_out)
    if engine == "pulumi":
        from provisioner.lifecycle import pulumi_engine
        from provisioner.lifecycle.access import say_exposure

        pulumi_engine.require_pulumi()  # before planning: one line when the CLI is absent
        plans = command_support.plans_to_try(target, catalog, max_tries, ssh_from, local)
        emit("engine", message=f"engine: pulumi ({why})", engine="pulumi")  # after the input is judged
        if local:
            from provisioner.lifecycle.pulumi_local import local_plans

            plans = local_plans(plans, emit, max_tries)
        else:
            say_exposure(plans, emit)
        _pulumi_up(
            plans,
            emit,
            backend=backend,
            ttl_s=ttl_s,
            max_cost_usd=max_cost_usd,
            on_budget=on_budget,
            wait=wait,
            max_tries=max_tries,
            local=local,
        )
        return
    from provisioner.lifecycle.access import say_exposure
    from provisioner.lifecycle.realize import bring_up_first

    plans = command_support.plans_to_try(target, catalog, max_tries, ssh_from, local)
    emit("engine", message=f"engine: direct ({why})", engine="direct")  # a mistake stays a one-line error
    if local:  # a local dry run's nodes are this machine's containers, reached from its lab only
        from provisioner.local import lab

        plans = lab.local_plans(plans, emit, max_tries)
    else:
        say_exposure(plans, emit)
    runtime = command_support.runtime(emit)
    try:
        bring_up_first(
            plans,
            runtime,
            max_tries=max_tries,
            ttl_s=ttl_s,
            max_cost_usd=max_cost_usd,
            on_budget=on_budget,
            local=local,
        )
    except KeyboardInterrupt:
        cluster_id = plans[0].cluster_id
        _mark(cluster_id, "interrupted")
        emit(
            "error",
            message=f"interrupted: cluster {cluster_id} may have nodes; remove them with: "
            f"provisioner down {cluster_id} --engine direct",
            cluster=cluster_id,
        )
        raise
    finally:
        if runtime.interrupts is not None:
            runtime.interrupts.restore()


def _pulumi_up(
    plans: list[Plan],
    emit: Emit,
    *,
    backend: str | None,
    ttl_s: float | None,
    max_cost_usd: Decimal | None,
    on_budget: str,
    wait: bool,
    max_tries: int,
    local: bool = False,
) -> None:
    """The pulumi engine's ``up`` over the ranked plans, failing over as the direct engine does
    (``provisioner.realize.failover.first_that_fits``): each try saves its record as ``creating``
    before the stack is touched, runs ``pulumi up`` and, with ``wait``, the direct engine's last
    steps; a try that failed for capacity has its stack destroyed before the next option is tried.
    The local lock is held throughout; machines sharing the backend are kept apart by its stack lock."""
    from provisioner.lifecycle import pulumi_engine
    from provisioner.lifecycle.lease import hold
    from provisioner.lifecycle.realize import emit_up, expiry_for, utc_now
    from provisioner.lifecycle.spend import budget_expiry
    from provisioner.lifecycle.state import new_run_id
    from provisioner.realize.failover import first_that_fits

    runtime = command_support.runtime(emit)  # a Capacity Block plan's purchase holds Ctrl-C, as on the direct engine
    cluster_id = plans[0].cluster_id
    known = _run_id_of(cluster_id)
    run_id = known or new_run_id(utc_now())  # one run across the tries

    def attempt(plan: Plan) -> None:
        now = utc_now()
        expires_at = budget_expiry(plan, now, expiry_for(plan, now, ttl_s), max_cost_usd, on_budget)
        _refuse_rejected_key(plan, runtime)  # before the record and the stack, as on the direct engine
        _save_pulumi_record(
            plan,
            now,
            expires_at,
            max_cost_usd,
            on_budget,
            status="creating",
            run_id=run_id,
            backend=backend,
            local=local,
        )
        outputs = pulumi_engine.up(
            plan, backend=backend, emit=emit, expires_at=expires_at, runtime=runtime, run_id=run_id
        )
        nodes = _await_stack(plan, runtime) if wait else None
        _save_pulumi_record(plan, now, expires_at, max_cost_usd, on_budget, run_id=run_id, backend=backend, local=local)
        if nodes is None:
            emit(
                "up",
                message=f"cluster {plan.cluster_id} is up (pulumi; not waited for)",
                cluster=plan.cluster_id,
                outputs=outputs,
            )
        else:
            emit_up(runtime, plan, nodes[plan.head.name], expires_at, outputs=outputs)

    def cleared(plan: Plan) -> bool:
        """The failed try's stack destroyed, so nothing of it is left (False: it could not be)."""
        try:
            pulumi_engine.down(plan.cluster_id, backend=backend, emit=emit)
        except ProvisionerError:
            return False
        return True

    try:
        with hold(cluster_id, "up"):
            try:
                first_that_fits(plans, attempt, cleared, emit=emit, max_tries=max_tries)
            except KeyboardInterrupt:
                _mark(cluster_id, "interrupted")
                where = f" --backend {backend}" if backend else ""
                emit(
                    "error",
                    message=f"interrupted: pulumi cancelled the update of {cluster_id}, which may have nodes; "
                    f"remove them with: provisioner down {cluster_id}{where}",
                    cluster=cluster_id,
                )
                raise
            except pulumi_engine.StackCapacityError as exc:  # no option left
                if cleared(plans[0]):  # as the direct engine: nothing of the failed create is left
                    from provisioner.lifecycle import state

                    state.remove_record(cluster_id)
                    raise
                _mark(cluster_id, "failed")
                raise exc.left from None  # say what the stack still holds
            except StackLockedError:
                if known is None:  # a teammate's update holds the stack: this up made nothing, keeps no
                    from provisioner.lifecycle import state  # record (its run id would hide their nodes)

                    state.remove_record(cluster_id)
                else:
                    _mark(cluster_id, "failed")
                raise
            except ProvisionerError:
                _mark(cluster_id, "failed")
                raise
    finally:
        if runtime.interrupts is not None:
            runtime.interrupts.restore()


def _refuse_rejected_key(plan: Plan, runtime: Runtime) -> None:
    """The direct engine's key check (``realize.refuse_rejected_key``: one read-only request, CredentialsError
    saying nothing was bought) where the stack buys through this same adapter, at the endpoint it is
    configured with: the neoclouds' NeocloudNodes (``facts().stack == "neocloud"``). AWS and GCP stacks
    buy through pulumi-aws/gcp with pulumi's own credentials, which the adapter's would not prove; a key
    not set at all builds no adapter here and is left to the stack, as before."""
    from provisioner.errors import CredentialsError
    from provisioner.lifecycle.realize import refuse_rejected_key
    from provisioner.providers.registry import facts

    name = plan.option.provider
    if facts()[name].stack != "neocloud":
        return
    try:
        provider = runtime.provider(name)
    except CredentialsError:
        return
    refuse_rejected_key(provider, name)


def _await_stack(plan: Plan, runtime: Runtime) -> dict[str, Node]:
    """The direct engine's last steps on the stack's nodes (run, control plane ready); the nodes by name."""
    from provisioner.lifecycle.realize import await_stack

    try:
        return await_stack(plan, runtime)
    except StackError:
        raise
    except ProvisionerError as exc:  # the stack is up and billing: say what remains and how to remove it
        raise StackError(f"{exc}; the stack's nodes remain: provisioner down {plan.cluster_id}") from None


def _save_pulumi_record(
    plan: Plan,
    now: dt.datetime,
    expires_at: dt.datetime | None,
    max_cost_usd: Decimal | None = None,
    on_budget: str = "warn",
    status: str = "up",
    run_id: str = "",
    backend: str | None = None,
    local: bool = False,
) -> None:
    from provisioner.lifecycle import state

    state.save_record(
        state.ClusterRecord(
            cluster_id=plan.cluster_id,
            provider=plan.option.provider,
            engine="pulumi",
            backend=backend,
            plan=plan,
            created_at=now,
            expires_at=expires_at,
            max_cost_usd=max_cost_usd,
            on_budget=on_budget,
            status=status,
            run_id=run_id or state.new_run_id(now),
            local=local,
        )
    )


def _run_id_of(cluster_id: str) -> str | None:
    """The run id of the cluster's record when one is kept (an ``up`` again goes on with that run);
    None: a new run."""
    from provisioner.lifecycle import state

    try:
        record = state.load_record(cluster_id)
    except ProvisionerError:
        return None
    return record.run_id if record is not None else None


def _mark(cluster_id: str, status: str) -> None:
    """Set the local record's status (``interrupted``, ``failed``) if there is one; never raises."""
    from provisioner.lifecycle import state

    try:
        record = state.load_record(cluster_id)
        if record is not None:
            state.save_record(record.model_copy(update={"status": status}))
    except (ProvisionerError, OSError):
        pass
