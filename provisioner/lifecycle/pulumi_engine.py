"""The pulumi engine: ``up``/``down``/``outputs`` drive the ``stacks/`` program through the Automation API.

One stack per cluster (stack name = cluster id) of the project in the installed
``provisioner.stacks`` folder. Config written before each ``up``:

- ``provisioner:plan``: the path of the plan file kept in the state dir (``<id>.plan.json``);
- ``provisioner:secretsFile``: the path of the cluster's 0600 secrets file in the state dir. Not
  the values as secret config (``provisioner:secrets``): the Automation API hands config values
  to the pulumi CLI as command-line arguments, which every local user can read in ``ps``. The
  program renders from the file and keeps the user data as Pulumi secrets; output is run with
  ``show_secrets=False``.
- ``provisioner:lease``: the lease mark of the ``up`` holding the cluster (``lifecycle.lease``), which
  the program writes on each node as the direct engine does (``realize.inputs.RunFacts``); removed
  when none is held. While ``pulumi up`` runs, the holder renews that lease on the nodes through the
  provider's adapter where marks can change (``lifecycle.lease_renewal``: every 10 min of the hold's
  heartbeat, each renewal listing the cluster, so nodes the stack creates meanwhile are covered) and
  releases it when the update succeeded; a failed one stops renewing, as the direct engine's.
- ``provisioner:run``: the bring-up's run id (``run_id``, else the record's), each node's run mark
  as the direct engine writes it; removed when there is none.
- ``provisioner:capacityReservationId``: for a Capacity Block plan, the block the stack's launch
  template targets. The stack never buys one: ``up`` adopts the cluster's block or buys it first
  through the AWS adapter, exactly as the direct engine does (``reservations.reserve``: offerings,
  purchase, wait until active), after the stack is opened and before ``pulumi up``. A failure
  after the purchase says what was bought (``Reservation.bought``). Other plans have the key removed.

Opening a stack (the CLI check, backend, passphrase, workspace) is ``lifecycle.pulumi_workspace``'s,
re-exported here. A failed ``up``/``destroy`` raises StackError (exit 5) naming the resources left
in the stack and the command that removes them.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from provisioner.errors import ProvisionerError, StackError
from provisioner.lifecycle import lease_renewal, state
from provisioner.lifecycle.pulumi_workspace import (
    INSTALL_HINT,
    automation,
    backend_url,
    forget,
    kept_plan,
    last_line,
    open_stack,
    plan_path,
    program_dir,
    require_pulumi,
    runtime_options,
    work_dir,
)
from provisioner.lifecycle.stack_capacity import StackCapacityError, capacity_in
from provisioner.lifecycle.stack_faults import Where, clear_pending, owners, stack_runs, sweep, unlocked
from provisioner.plan import Plan, save_plan
from provisioner.realize.events import Emit, no_events

if TYPE_CHECKING:
    from provisioner.lifecycle.realize import Runtime
    from provisioner.providers.base import Node, Reservation

LEASE_KEY = "provisioner:lease"
"""The stack config carrying the running ``up``'s lease mark (``providers.ownership.LeaseMark``)."""
RUN_KEY = "provisioner:run"
"""The stack config carrying the bring-up's run id (``lifecycle.state.new_run_id``)."""
RESERVATION_KEY = "provisioner:capacityReservationId"
"""The stack config naming the EC2 Capacity Block a Capacity Block plan launches into."""

log = logging.getLogger("provisioner.lease")


def _remaining(stack: Any) -> list[str]:
    """Resources still recorded in the stack (type and name), the stack itself left out."""
    try:
        deployment = stack.state()  # read afresh: the failed update dropped what was read before it
    except Exception:  # best effort: the error message must still be written
        return ["(the stack's state could not be read)"]
    out = []
    for resource in deployment.get("resources", []):
        urn = str(resource.get("urn", ""))
        kind = str(resource.get("type", ""))
        if kind.startswith("pulumi:"):
            continue
        out.append(f"{kind} {urn.rsplit('::', 1)[-1]}")
    return out


def _failed(verb: str, cluster_id: str, stack: Any, exc: Exception, backend: str | None) -> StackError:
    left = _remaining(stack)
    where = f" --backend {backend}" if backend else ""
    named = "; ".join(left[:10]) + (f" and {len(left) - 10} more" if len(left) > 10 else "") if left else "nothing"
    return StackError(
        f"pulumi {verb} of {cluster_id} failed: {last_line(str(exc))}; still in the stack: {named}; "
        f"remove with: provisioner down {cluster_id} --engine pulumi{where}"
    )


def up(
    plan: Plan,
    *,
    backend: str | None = None,
    emit: Emit = no_events,
    expires_at: dt.datetime | None = None,
    runtime: Runtime | None = None,
    run_id: str | None = None,
) -> dict[str, Any]:
    """Create or update the cluster's stack and return its outputs (secret ones masked). Blocks.

    ``expires_at`` pins the nodes' expiry tag (``provisioner:expiresAt``); None lets the program
    use now + the spec's TTL. ``run_id`` is the nodes' run mark (None: the record's run id).
    ``provisioner:owner`` is this machine's ``owner_id()`` (what gc reads).
    A Capacity Block plan's block is adopted or bought first (blocking until it starts) through
    ``runtime``'s adapter (default: the registry's); see the module docstring."""
    auto = automation()

    stack = open_stack(plan.cluster_id, backend, create=True)
    from provisioner.lifecycle.realize import Runtime, cluster_secrets
    from provisioner.lifecycle.reservations import reserve

    cluster_secrets(plan.cluster_id)  # created once, 0600, in the state dir
    path = plan_path(plan.cluster_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_plan(plan, path)  # before a block is bought: what down reads when no record was kept
    reservation = reserve(plan, runtime or Runtime(emit=emit), expires_at)
    try:
        return _up(auto, stack, plan, path, backend, emit, expires_at, reservation, runtime, run_id)
    except ProvisionerError as exc:
        if reservation is None:
            raise
        raise StackError(f"{exc}; {reservation.bought()}") from None  # the block stays paid: say so


def _record_run(cluster_id: str) -> str | None:
    """The run id of the cluster's record here (None: no record, or one written before runs had ids)."""
    record = state.load_record(cluster_id)
    return record.run_id if record is not None else None


def _up(
    auto: Any,
    stack: Any,
    plan: Plan,
    path: Path,
    backend: str | None,
    emit: Emit,
    expires_at: dt.datetime | None,
    reservation: Reservation | None,
    runtime: Runtime | None = None,
    run_id: str | None = None,
) -> dict[str, Any]:
    # The Automation API passes config values on pulumi's command line, where any local user can
    # read them (ps): secrets travel as the path of their 0600 file, never as values.
    from provisioner.providers.base import expiry_text, owner_id

    config = {
        "provisioner:plan": auto.ConfigValue(value=str(path)),
        "provisioner:secretsFile": auto.ConfigValue(value=str(state.secrets_path(plan.cluster_id))),
        # A stack keeps the owner its nodes were made for: a teammate's up must not replace them all.
        "provisioner:owner": auto.ConfigValue(value=(owners(stack) or [owner_id()])[0]),
    }
    if expires_at is not None:
        config["provisioner:expiresAt"] = auto.ConfigValue(value=expiry_text(expires_at))
    from provisioner.lifecycle.lease import held_mark

    mark = held_mark(plan.cluster_id)  # the up's lease mark, on each node as the direct engine writes it
    run = run_id or _record_run(plan.cluster_id)
    # a stack once of a block plan must not keep targeting its block; nor an old up's lease or run
    given = {LEASE_KEY: mark.token() if mark is not None else None, RUN_KEY: run, RESERVATION_KEY: None}
    if reservation is not None:
        given[RESERVATION_KEY] = reservation.reservation_id
    config.update({key: auto.ConfigValue(value=value) for key, value in given.items() if value is not None})
    try:
        stale = _kept_config(stack, [key for key, value in given.items() if value is None])
        if stale:
            stack.remove_all_config(stale)
        stack.set_all_config(config)
    except (auto.errors.CommandError, ValueError, OSError) as exc:
        raise StackError(f"pulumi cannot set the config of {plan.cluster_id}: {last_line(str(exc))}") from None
    emit("pulumi", message=f"pulumi up {plan.cluster_id} ({backend_url(backend)})", cluster=plan.cluster_id)
    renewal = None if mark is None else _renewal(plan, mark.token(), config["provisioner:owner"].value, runtime, emit)
    try:
        result = _stack_up(auto, stack, plan, backend, emit, runtime)
    except BaseException:
        if renewal is not None:  # its nodes are left to the stack and the record; their lease ages
            lease_renewal.stop(plan.cluster_id, renewal)
        raise
    if renewal is not None:  # done: the record holds the cluster now, as after the direct engine's up
        lease_renewal.release(plan.cluster_id)
    return {key: ("[secret]" if value.secret else value.value) for key, value in result.outputs.items()}


def _kept_config(stack: Any, keys: list[str]) -> list[str]:
    """Those of ``keys`` the stack's config file in the workspace holds (all of them when it cannot be
    read: the config may live elsewhere), so that ``up`` removes them in one call or none."""
    try:
        kept = stack.workspace.stack_settings(stack.name).config or {}
    except Exception:  # absent or unreadable: remove them all, as pulumi ignores what is not there
        return keys
    return [key for key in keys if key in kept]


def _renewal(plan: Plan, lease: str, owner: str, runtime: Runtime | None, emit: Emit) -> lease_renewal.Renewal | None:
    """The renewal of ``lease`` on the stack's nodes while this process holds the cluster, through the
    adapter of the plan's provider (None: marks cannot change there, or no adapter can be built here:
    the nodes keep an unrenewed lease, which another machine keeps)."""
    from provisioner.lifecycle.realize import Runtime

    rt = runtime or Runtime(emit=emit)
    try:
        adapter = rt.provider(plan.option.provider)
    except ProvisionerError as exc:
        log.warning("%s: the lease of %s is not renewed: %s", plan.option.provider, plan.cluster_id, exc)
        return None
    # Not at once: the stack has not made its nodes yet (the first renewal lists them, 10 min in).
    return lease_renewal.start(adapter, plan.cluster_id, lease, owner, rt.now(), at_once=False)


def _stack_up(auto: Any, stack: Any, plan: Plan, backend: str | None, emit: Emit, runtime: Runtime | None) -> Any:
    """``pulumi up`` of ``stack`` (pending operations cleared first); its result. StackError (or
    StackCapacityError, Interrupted) when it fails."""
    from provisioner.providers.registry import facts

    try:
        clear_pending(auto, stack, _where(plan.cluster_id, backend), emit)
        # Ctrl-C reaches pulumi too (the terminal's process group): it cancels, records what it did and
        # releases the lock; this process holds the signal until then (realize.interrupts).
        with runtime.held() if runtime is not None else contextlib.nullcontext():
            result = unlocked(
                auto,
                stack,
                _where(plan.cluster_id, backend),
                lambda: stack.up(
                    on_output=lambda line: emit("pulumi-output", message=line.rstrip()),
                    color="never",
                    show_secrets=False,
                ),
            )
    except auto.errors.CommandError as exc:
        interrupts = runtime.interrupts if runtime is not None else None
        if interrupts is not None and interrupts.pending:  # pulumi cancelled on Ctrl-C
            from provisioner.realize.interrupts import Interrupted

            raise Interrupted(interrupts.received[-1]) from None
        failed = _failed("up", plan.cluster_id, stack, exc, backend)
        name = plan.option.provider
        capacity = capacity_in(str(exc), name, facts()[name].capacity_codes)
        if capacity is not None:
            raise StackCapacityError(*capacity, left=failed) from None
        raise failed from None
    except (ValueError, OSError) as exc:  # an answer the Automation API could not read
        raise _failed("up", plan.cluster_id, stack, exc, backend) from None
    return result


def down(
    cluster_id: str,
    *,
    backend: str | None = None,
    emit: Emit = no_events,
    provider: str | None = None,
    mine: Callable[[Node], bool] | None = None,
) -> bool:
    """Destroy the cluster's stack and remove it, then (``provider`` given) delete through the adapter any
    node of the cluster still there of the stack's run (its nodes' run mark, or ``mine``: the record's
    run): one a killed engine made but never recorded (``stack_faults.sweep``); another run's node of
    the name is named, not deleted. Blocks; a missing stack is already down (False), its nodes swept all
    the same (every node of the name without ``mine``: no run is known)."""
    auto = automation()

    try:
        stack = open_stack(cluster_id, backend, create=False)
    except StackError as exc:
        if "no pulumi stack" not in str(exc):
            raise
        if provider is not None:
            sweep(provider, cluster_id, emit, select=mine)
        return False
    if provider is None:  # another machine's stack: its outputs name the provider
        with contextlib.suppress(auto.errors.CommandError, ValueError, OSError, KeyError):
            provider = str(stack.outputs()["provider"].value)
    made_for = owners(stack)  # before the destroy forgets them
    select = _of_stack(stack_runs(stack), mine)
    emit("pulumi", message=f"pulumi destroy {cluster_id}", cluster=cluster_id)
    try:
        if clear_pending(auto, stack, _where(cluster_id, backend), emit) and provider is not None:
            # a dropped create's nodes first: they hold what the destroy removes next (Lambda's firewall)
            sweep(provider, cluster_id, emit, made_for, select)
        unlocked(
            auto,
            stack,
            _where(cluster_id, backend),
            lambda: stack.destroy(
                on_output=lambda line: emit("pulumi-output", message=line.rstrip()), color="never", show_secrets=False
            ),
        )
        stack.workspace.remove_stack(cluster_id)
    except (auto.errors.CommandError, ValueError, OSError) as exc:
        raise _failed("destroy", cluster_id, stack, exc, backend) from None
    if provider is not None:
        sweep(provider, cluster_id, emit, made_for, select)
    return True


def _of_stack(runs: set[str], mine: Callable[[Node], bool] | None) -> Callable[[Node], bool] | None:
    """What a sweep may delete: a node of the stack's ``runs``, else one ``mine`` (the record's run)
    accepts; without a record, an unmarked node (nothing tells its run) or any when no run is known."""
    if not runs and mine is None:
        return None

    def select(node: Node) -> bool:
        if node.run is not None and node.run in runs:
            return True
        return mine(node) if mine is not None else node.run is None

    return select


def outputs(cluster_id: str, *, backend: str | None = None) -> dict[str, Any]:
    """The stack's outputs, secret ones masked. StackError when pulumi fails or answers oddly."""
    auto = automation()

    stack = open_stack(cluster_id, backend, create=False)
    try:
        found = stack.outputs()
    except (auto.errors.CommandError, ValueError, OSError) as exc:
        raise StackError(f"pulumi cannot read the outputs of {cluster_id}: {last_line(str(exc))}") from None
    return {key: ("[secret]" if value.secret else value.value) for key, value in found.items()}


def _where(cluster_id: str, backend: str | None) -> Where:
    return Where(cluster_id, backend_url(backend), work_dir())


__all__ = [
    "INSTALL_HINT",
    "RESERVATION_KEY",
    "StackCapacityError",
    "backend_url",
    "capacity_in",
    "down",
    "forget",
    "kept_plan",
    "outputs",
    "plan_path",
    "program_dir",
    "require_pulumi",
    "runtime_options",
    "up",
    "work_dir",
]
