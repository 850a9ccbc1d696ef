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
  when none is held.
- ``provisioner:run``: the bring-up's run id (``run_id``, else the record's), each node's run mark
  as the direct engine writes it; removed when there is none.
- ``provisioner:capacityReservationId``: for a Capacity Block plan, the block the stack's launch
  template targets. The stack never buys one: ``up`` adopts the cluster's block or buys it first
  through the AWS adapter, exactly as the direct engine does (``reservations.reserve``: offerings,
  purchase, wait until active), after the stack is opened and before ``pulumi up``. A failure
  after the purchase says what was bought (``Reservation.bought``). Other plans have the key removed.

Backend: ``--backend URL`` (``s3://...``, ``gs://...``, ``https://api.pulumi.com``), else a
local file backend under the state dir (``file://<state>/pulumi``). The file backend encrypts
secrets with a passphrase: ``$PULUMI_CONFIG_PASSPHRASE`` when set, else one generated once and
kept 0600 in ``<state>/pulumi/passphrase``.

The ``pulumi`` CLI must be on PATH (the Automation API drives it); when it is absent every
entry point raises StackError with one line saying how to install it and that ``--engine
direct`` needs none. A failed ``up``/``destroy`` raises StackError (exit 5) naming the
resources left in the stack and the command that removes them.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import secrets as _secrets
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from provisioner.errors import ProvisionerError, StackError
from provisioner.lifecycle import state
from provisioner.lifecycle.stack_capacity import StackCapacityError, capacity_in
from provisioner.lifecycle.stack_faults import Where, clear_pending, owners, sweep, unlocked
from provisioner.lifecycle.stack_lock import WORK_VAR
from provisioner.plan import Plan, save_plan
from provisioner.realize.events import Emit, no_events

if TYPE_CHECKING:
    from provisioner.lifecycle.realize import Runtime
    from provisioner.providers.base import Reservation

INSTALL_HINT = (
    "the pulumi CLI is not installed (the pulumi engine drives it): install it with "
    "'curl -fsSL https://get.pulumi.com | sh' (see https://www.pulumi.com/docs/install/), "
    "or run with --engine direct"
)

LEASE_KEY = "provisioner:lease"
"""The stack config carrying the running ``up``'s lease mark (``providers.ownership.LeaseMark``)."""
RUN_KEY = "provisioner:run"
"""The stack config carrying the bring-up's run id (``lifecycle.state.new_run_id``)."""
RESERVATION_KEY = "provisioner:capacityReservationId"
"""The stack config naming the EC2 Capacity Block a Capacity Block plan launches into."""


SDK_HINT = "the pulumi Python SDK is not installed: pip install 'gpu-provisioner[cloud]', or run with --engine direct"


def require_pulumi(which: Callable[[str], str | None] = shutil.which) -> str:
    """The ``pulumi`` executable's path. StackError (one line, install hint) when it or the pulumi
    Python SDK (the [cloud] extra) is absent: ``up`` asks before it plans or records anything."""
    found = which("pulumi")
    if not found:
        raise StackError(INSTALL_HINT)
    import importlib.util

    if importlib.util.find_spec("pulumi") is None:
        raise StackError(SDK_HINT)
    return found


def _automation() -> Any:
    """``pulumi.automation``, after checking the CLI is there. StackError (one line) when either is missing."""
    require_pulumi()
    try:
        from pulumi import automation
    except ModuleNotFoundError:
        raise StackError(SDK_HINT) from None
    return automation


def backend_url(backend: str | None) -> str:
    if backend:
        return backend
    folder = state.state_dir() / "pulumi"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return f"file://{folder}"


def _passphrase() -> str:
    given = os.environ.get("PULUMI_CONFIG_PASSPHRASE")
    if given is not None:
        return given
    path = state.state_dir() / "pulumi" / "passphrase"
    try:
        return path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    value = _secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="ascii") as handle:
        handle.write(value + "\n")
    return value


def plan_path(cluster_id: str) -> Path:
    return state.clusters_dir() / f"{cluster_id}.plan.json"


def kept_plan(cluster_id: str) -> Plan | None:
    """The plan the cluster's last ``up`` gave the stack (kept in the state dir), None if there is none
    or it cannot be read."""
    from provisioner.plan import load_plan

    path = plan_path(cluster_id)
    if not path.is_file():
        return None
    try:
        return load_plan(path)
    except ProvisionerError:
        return None


PROJECT = "provisioner"
"""The Pulumi project of every stack (``stacks/Pulumi.yaml``'s name: the config namespace)."""


def _program() -> None:
    """The inline program ``up`` runs in this process: ``stacks/``'s own (``provisioner.stacks.program``)."""
    from provisioner.stacks.program import main

    main()


def _no_program() -> None:
    """What ``down`` and ``outputs`` hand the engine: they read or destroy the state, never run a program."""


def program_dir() -> Path:
    """The installed ``stacks/`` folder: the work dir's ``Pulumi.yaml`` names it as ``main``, so a
    hand-run ``pulumi preview``/``refresh`` in the work dir runs the program ``up`` ran inline."""
    import provisioner.stacks as stacks

    return Path(stacks.__file__).resolve().parent


def work_dir() -> Path:
    """The workspace the Automation API keeps ``Pulumi.yaml`` and each stack's config file in (0700)."""
    folder = state.state_dir() / "pulumi" / "work"
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    return folder


def runtime_options(prefix: str = sys.prefix, base_prefix: str = sys.base_prefix) -> dict[str, str]:
    """The project's python runtime options: ``virtualenv`` naming the environment this process runs in
    when it is one, so the dynamic-provider plugin the engine starts (``pulumi-resource-pulumi-python``)
    runs this interpreter, the one ``provisioner`` is installed in, not the first ``python3`` on PATH."""
    return {"virtualenv": prefix} if prefix != base_prefix else {}


def _stack(cluster_id: str, backend: str | None, *, create: bool) -> Any:
    auto = _automation()
    # PULUMI_PYTHON_CMD: the interpreter a language host or dynamic-provider plugin runs when the
    # project names no virtualenv (this one, where provisioner and its program are installed).
    env = {
        "PULUMI_BACKEND_URL": backend_url(backend),
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_PYTHON_CMD": sys.executable,
        WORK_VAR: str(work_dir()),
    }
    if not (backend or "").startswith("https://"):
        env["PULUMI_CONFIG_PASSPHRASE"] = _passphrase()
    settings = auto.ProjectSettings(
        name=PROJECT,
        runtime=auto.ProjectRuntimeInfo(name="python", options=runtime_options() or None),
        main=str(program_dir()),
    )
    opts = auto.LocalWorkspaceOptions(work_dir=str(work_dir()), env_vars=env, project_settings=settings)
    program = _program if create else _no_program
    try:
        if create:
            return auto.create_or_select_stack(cluster_id, PROJECT, program, opts=opts)
        return auto.select_stack(cluster_id, PROJECT, program, opts=opts)
    except auto.errors.StackNotFoundError:
        raise StackError(f"no pulumi stack {cluster_id} in {env['PULUMI_BACKEND_URL']}") from None
    except (auto.errors.CommandError, ValueError, OSError) as exc:
        raise StackError(f"pulumi cannot open stack {cluster_id}: {_last_line(str(exc))}") from None


def _remaining(stack: Any) -> list[str]:
    """Resources still recorded in the stack (type and name), the stack itself left out."""
    try:
        deployment = stack.export_stack().deployment or {}
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
        f"pulumi {verb} of {cluster_id} failed: {_last_line(str(exc))}; still in the stack: {named}; "
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
    auto = _automation()

    stack = _stack(plan.cluster_id, backend, create=True)
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
    from provisioner.providers.registry import facts

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
    try:
        if mark is not None:
            config[LEASE_KEY] = auto.ConfigValue(value=mark.token())
        else:
            stack.remove_config(LEASE_KEY)
        run = run_id or _record_run(plan.cluster_id)
        if run is not None:
            config[RUN_KEY] = auto.ConfigValue(value=run)
        else:
            stack.remove_config(RUN_KEY)
        if reservation is not None:
            config[RESERVATION_KEY] = auto.ConfigValue(value=reservation.reservation_id)
        else:  # a stack once of a block plan must not keep targeting its block
            stack.remove_config(RESERVATION_KEY)
        stack.set_all_config(config)
    except (auto.errors.CommandError, ValueError, OSError) as exc:
        raise StackError(f"pulumi cannot set the config of {plan.cluster_id}: {_last_line(str(exc))}") from None
    emit("pulumi", message=f"pulumi up {plan.cluster_id} ({backend_url(backend)})", cluster=plan.cluster_id)
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
    return {key: ("[secret]" if value.secret else value.value) for key, value in result.outputs.items()}


def down(cluster_id: str, *, backend: str | None = None, emit: Emit = no_events, provider: str | None = None) -> bool:
    """Destroy the cluster's stack and remove it, then (``provider`` given) delete through the adapter any
    node of the cluster still there: one a killed engine made but never recorded (``stack_faults.sweep``).
    Blocks; a missing stack is already down (False), its nodes swept all the same."""
    auto = _automation()

    try:
        stack = _stack(cluster_id, backend, create=False)
    except StackError as exc:
        if "no pulumi stack" not in str(exc):
            raise
        if provider is not None:
            sweep(provider, cluster_id, emit)
        return False
    if provider is None:  # another machine's stack: its outputs name the provider
        with contextlib.suppress(auto.errors.CommandError, ValueError, OSError, KeyError):
            provider = str(stack.outputs()["provider"].value)
    made_for = owners(stack)  # before the destroy forgets them
    emit("pulumi", message=f"pulumi destroy {cluster_id}", cluster=cluster_id)
    try:
        if clear_pending(auto, stack, _where(cluster_id, backend), emit) and provider is not None:
            # a dropped create's nodes first: they hold what the destroy removes next (Lambda's firewall)
            sweep(provider, cluster_id, emit, made_for)
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
        sweep(provider, cluster_id, emit, made_for)
    return True


def outputs(cluster_id: str, *, backend: str | None = None) -> dict[str, Any]:
    """The stack's outputs, secret ones masked. StackError when pulumi fails or answers oddly."""
    auto = _automation()

    stack = _stack(cluster_id, backend, create=False)
    try:
        found = stack.outputs()
    except (auto.errors.CommandError, ValueError, OSError) as exc:
        raise StackError(f"pulumi cannot read the outputs of {cluster_id}: {_last_line(str(exc))}") from None
    return {key: ("[secret]" if value.secret else value.value) for key, value in found.items()}


def _where(cluster_id: str, backend: str | None) -> Where:
    return Where(cluster_id, backend_url(backend), work_dir())


def _last_line(text: str) -> str:
    """The last meaningful line of a CommandError's text (``code:/stdout:/stderr:`` labels dropped)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    lines = [
        line.removeprefix("stderr:").removeprefix("stdout:").strip() for line in lines if not line.startswith("code:")
    ]
    lines = [line for line in lines if line]
    return lines[-1][:300] if lines else "no output"


__all__ = [
    "INSTALL_HINT",
    "RESERVATION_KEY",
    "StackCapacityError",
    "backend_url",
    "capacity_in",
    "down",
    "kept_plan",
    "outputs",
    "program_dir",
    "require_pulumi",
    "runtime_options",
    "up",
    "work_dir",
]
