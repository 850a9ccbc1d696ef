"""``provisioner up|down|status|outputs|ssh|burst``: the lifecycle commands (registered by provisioner/cli.py).

TARGET is a spec (YAML), a saved plan (JSON) or, for the commands that act on an existing
cluster, its id. ``--engine pulumi`` drives the ``stacks/`` program through the Automation API;
``--engine direct`` calls the adapters itself (``lifecycle.realize``). Without ``--engine``,
``up`` uses pulumi when the ``pulumi`` CLI is on PATH, else direct (``default_engine``), and says
which in its first progress line; ``down`` uses the engine the local record names (else pulumi
when a pulumi ``up`` kept its plan here, else direct). Progress goes to stderr through rich; ``--json`` prints one JSON
event per line on stdout instead. Errors are one line and the error tree's exit code
(5: a stack failure, naming what remains and the command that removes it); ``burst`` exits
with the job's status (124 when its TTL or cost cap stopped it, 130 on Ctrl-C).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
import sys
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING, Any

from provisioner import cliargs
from provisioner.errors import ProvisionerError, StackError, UsageError
from provisioner.money import usd_of_cents
from provisioner.termtext import printable

if TYPE_CHECKING:
    from provisioner.lifecycle.realize import Runtime
    from provisioner.plan import Plan
    from provisioner.realize.events import Emit

ENGINES = ("pulumi", "direct")
ON_BUDGET = ("stop", "warn")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "": 3600}

ENGINE_HELP = "pulumi (drive the stacks/ program) | direct (call the adapters)."
BACKEND_HELP = ("Pulumi state backend URL (s3://..., gs://..., https://api.pulumi.com); default: a file backend "
                "under the state dir.")


def parse_duration(text: str, option: str = "--ttl") -> float:
    """``90s``, ``30m``, ``4h``, ``2d`` (a bare number is hours) -> seconds. UsageError otherwise."""
    found = _DURATION.match(text)
    if not found or float(found.group(1)) <= 0:
        raise UsageError(f"{text!r} is not a duration like 30m, 4h or 2d", option=option)
    return float(found.group(1)) * _UNIT_S[found.group(2)]


def parse_money(text: str) -> Decimal:
    try:
        value = Decimal(text)
    except InvalidOperation:
        value = Decimal("NaN")
    if not value.is_finite() or value <= 0:
        raise UsageError(f"{text!r} is not a positive amount of USD", option="--max-cost")
    return value


def _check_engine(engine: str) -> None:
    if engine not in ENGINES:
        raise UsageError(f"must be one of {', '.join(ENGINES)}", option="--engine")


def default_engine(which: Callable[[str], str | None] = shutil.which) -> tuple[str, str]:
    """(engine, why) for an ``up`` without ``--engine``: pulumi when its CLI is on PATH, else direct."""
    found = which("pulumi")
    if found:
        return "pulumi", f"the pulumi CLI is on PATH ({found}); --engine direct calls the adapters instead"
    return "direct", "no pulumi CLI on PATH; --engine pulumi needs it"


def _emitter(json_out: bool) -> Emit:
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
    """The cluster id TARGET names: a spec/plan file's cluster, else TARGET itself."""
    path = Path(target)
    if path.is_file():
        if path.suffix == ".json":
            from provisioner.plan import load_plan

            return load_plan(path).cluster_id
        from provisioner.loader import load_spec

        return load_spec(path).name
    return target


def _runtime(emit: Emit, *, interrupts: bool = True) -> Runtime:
    from provisioner.lifecycle.realize import Runtime
    from provisioner.realize.interrupts import Interrupts

    return Runtime(emit=emit, interrupts=Interrupts().install() if interrupts else None)


def up(target: Path, engine: str | None = None, backend: str | None = None, catalog: Path | None = None,
       ttl: str | None = None, max_tries: int = 3, json_out: bool = False, max_cost: str | None = None,
       on_budget: str = "warn", wait: bool = True, local: bool = False) -> None:
    """Buy and boot the cluster; block until its control plane lists every node ready (on either
    engine; ``wait=False``, pulumi only: return once the stack is up). ``local``: a dry run on this
    machine's nodes behind the provider's fake (provisioner.local.lab), on the direct engine."""
    why = "--engine " + engine if engine else ""
    if local:
        if engine not in (None, "direct"):
            raise UsageError("a local dry run runs the direct engine", option="--engine")
        engine, why = "direct", "--local"
    if engine is None:
        engine, why = default_engine()
    _check_engine(engine)
    if not wait and engine != "pulumi":
        raise UsageError("the direct engine always waits for the control plane", option="--no-wait")
    ttl_s = parse_duration(ttl) if ttl else None
    max_cost_usd = parse_money(max_cost) if max_cost else None
    emit = _emitter(json_out)
    if engine == "pulumi":
        from provisioner.lifecycle import pulumi_engine
        from provisioner.lifecycle.access import require_ssh_sources
        from provisioner.lifecycle.realize import expiry_for, utc_now

        pulumi_engine.require_pulumi()  # before planning: one line when the CLI is absent
        plan = ranked_plans(target, catalog, 1)[0]
        require_ssh_sources(plan, target)
        emit("engine", message=f"engine: pulumi ({why})", engine="pulumi")  # after the input is judged
        now = utc_now()
        from provisioner.lifecycle.spend import budget_expiry

        expires_at = budget_expiry(plan, now, expiry_for(plan, now, ttl_s), max_cost_usd, on_budget)
        from provisioner.lifecycle.lease import hold

        runtime = _runtime(emit)  # a Capacity Block plan's purchase holds Ctrl-C, as on the direct engine
        # Saved before the stack is touched: an interrupted or failed up leaves a record saying so. The
        # local lock is held throughout; machines sharing the backend are kept apart by its stack lock.
        try:
            with hold(plan.cluster_id, "up"):
                _save_pulumi_record(plan, now, expires_at, max_cost_usd, on_budget, status="creating")
                try:
                    outputs = pulumi_engine.up(plan, backend=backend, emit=emit, expires_at=expires_at,
                                               runtime=runtime)
                    if wait:
                        _await_stack(plan, runtime)
                except KeyboardInterrupt:
                    _mark(plan.cluster_id, "interrupted")
                    raise
                except ProvisionerError:
                    _mark(plan.cluster_id, "failed")
                    raise
                _save_pulumi_record(plan, now, expires_at, max_cost_usd, on_budget)
        finally:
            if runtime.interrupts is not None:
                runtime.interrupts.restore()
        emit("up", message=f"cluster {plan.cluster_id} is up (pulumi)", cluster=plan.cluster_id, outputs=outputs)
        return
    from provisioner.lifecycle.access import require_ssh_sources
    from provisioner.lifecycle.realize import bring_up_first

    if local:  # SSH comes from the lab's own address (provisioner.local.lab.fit_to_host)
        from provisioner.local import lab

        lab.require_host()
        plans = ranked_plans(target, catalog, lab.LOCAL_RANKED)
        lab.local_options(plans, max_tries)  # refused here, before the first progress line
    else:
        plans = ranked_plans(target, catalog, max_tries)
        require_ssh_sources(plans[0], target)
    emit("engine", message=f"engine: direct ({why})", engine="direct")  # a mistake stays a one-line error
    if local:
        plans = lab.local_plans(plans, emit, max_tries)
    runtime = _runtime(emit)
    try:
        bring_up_first(plans, runtime, max_tries=max_tries, ttl_s=ttl_s, max_cost_usd=max_cost_usd,
                       on_budget=on_budget)
    except KeyboardInterrupt:
        cluster_id = plans[0].cluster_id
        _mark(cluster_id, "interrupted")
        emit("error", message=f"interrupted: cluster {cluster_id} may have nodes; remove them with: "
             f"provisioner down {cluster_id} --engine direct", cluster=cluster_id)
        raise
    finally:
        if runtime.interrupts is not None:
            runtime.interrupts.restore()


def _await_stack(plan: Plan, runtime: Runtime) -> None:
    """The direct engine's last steps on the stack's nodes (run, SSH pass, control plane ready)."""
    from provisioner.lifecycle.realize import await_stack

    try:
        await_stack(plan, runtime)
    except StackError:
        raise
    except ProvisionerError as exc:  # the stack is up and billing: say what remains and how to remove it
        raise StackError(f"{exc}; the stack's nodes remain: provisioner down {plan.cluster_id}") from None


def _save_pulumi_record(plan: Plan, now: dt.datetime, expires_at: dt.datetime | None,
                        max_cost_usd: Decimal | None = None, on_budget: str = "warn", status: str = "up") -> None:
    from provisioner.lifecycle import state

    state.save_record(state.ClusterRecord(cluster_id=plan.cluster_id, provider=plan.option.provider,
                                          engine="pulumi", plan=plan, created_at=now, expires_at=expires_at,
                                          max_cost_usd=max_cost_usd, on_budget=on_budget,
                                          status=status))  # type: ignore[arg-type]


def _mark(cluster_id: str, status: str) -> None:
    """Set the local record's status (``interrupted``, ``failed``) if there is one; never raises."""
    from provisioner.lifecycle import state

    try:
        record = state.load_record(cluster_id)
        if record is not None:
            state.save_record(record.model_copy(update={"status": status}))
    except (ProvisionerError, OSError):
        pass


def down(target: str, engine: str | None = None, backend: str | None = None, provider: str | None = None,
         catalog: Path | None = None, json_out: bool = False, force_unowned: bool = False) -> None:
    """Delete every node of the cluster through the provider API (or destroy its stack). Idempotent."""
    from provisioner.lifecycle import state

    cluster_id = cluster_id_of(target, catalog)
    lab = _enter_lab(cluster_id)
    record = state.load_record(cluster_id)
    chosen = engine or (record.engine if record is not None else _unrecorded_engine(cluster_id))
    _check_engine(chosen)
    if chosen == "direct" and record is None and provider is None:
        # No record (an earlier down forgot it): the spec or plan file says where the cluster lives.
        planned = _plan_of_file(target, catalog)
        if planned is None:
            raise UsageError(f"no record of cluster {cluster_id} here: name its provider (--provider P) or give "
                             "its spec or plan file; provisioner gc lists what the tool left anywhere",
                             option="--provider")
        provider = planned.option.provider
    emit = _emitter(json_out)
    if chosen == "pulumi":
        from provisioner.lifecycle import pulumi_engine
        from provisioner.lifecycle.lease import hold
        from provisioner.lifecycle.spend import before_teardown, emit_settled

        runtime = _runtime(emit, interrupts=False)
        with hold(cluster_id, "down"):
            listed = before_teardown(runtime.provider, record)
            existed = pulumi_engine.down(cluster_id, backend=backend, emit=emit)
            if record is not None and listed is not None and listed[1]:  # planned vs actual, ledger, billing
                emit_settled(emit, listed[0], record, listed[1], runtime.now())
            state.remove_record(cluster_id)
        emit("down", message=f"cluster {cluster_id} is down (pulumi)" if existed or record is not None
             else f"nothing left of cluster {cluster_id} (no pulumi stack)", cluster=cluster_id)
        _reservations_left(cluster_id, record.plan if record is not None else pulumi_engine.kept_plan(cluster_id),
                           provider, emit)
        return
    from provisioner.lifecycle.realize import tear_down

    runtime = _runtime(emit, interrupts=False)
    with _shielded():
        tear_down(cluster_id, runtime, provider=provider, force_unowned=force_unowned)
    if lab:
        from provisioner.local.lab import stop

        stop(cluster_id)  # nothing of the cluster is left at its fake: the lab's nodes and namespace go
        emit("local", message=f"local: the lab of {cluster_id} is stopped", cluster=cluster_id)


def _enter_lab(cluster_id: str) -> bool:
    """Into the cluster's local lab (``up --local``) when one runs here; see provisioner.local.lab."""
    from provisioner.local.lab import enter

    return enter(cluster_id)


def _plan_of_file(target: str, catalog: Path | None) -> Plan | None:
    """The plan a spec or plan file TARGET names (a spec planned as ``up`` would); None for a cluster id."""
    path = Path(target)
    return ranked_plans(path, catalog, 1)[0] if path.is_file() else None


def _unrecorded_engine(cluster_id: str) -> str:
    """A cluster without a local record: pulumi when a pulumi ``up`` kept its plan here, else direct."""
    from provisioner.lifecycle import pulumi_engine

    return "pulumi" if pulumi_engine.plan_path(cluster_id).is_file() else "direct"


def _reservations_left(cluster_id: str, plan: Plan | None, provider: str | None, emit: Emit) -> None:
    """After a pulumi ``down``, what the direct engine's says of a paid reservation that outlives the
    cluster (an EC2 Capacity Block): asked of the provider of a Capacity Block plan, or of ``provider``."""
    from provisioner.lifecycle.reservations import report_left

    name = provider or (plan.option.provider if plan is not None and plan.option.offer.block_hours else None)
    if name is not None:
        runtime = _runtime(emit, interrupts=False)
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


def status(target: str | None = None, catalog: Path | None = None, json_out: bool = False) -> None:
    """The clusters brought up from here, or one cluster with what its provider lists now."""
    from provisioner.lifecycle import state

    if target is None:
        from provisioner.lifecycle import ledger

        records = state.list_records()
        metered = {row.cluster: str(usd_of_cents(row.metered_cents)) for row in ledger.rows(ledger.read())
                   if row.metered_cents is not None}  # the last status or down
        rows = [{**_summary(record), "metered_usd": metered.get(record.cluster_id)} for record in records]
        if json_out:
            sys.stdout.write(json.dumps(rows, indent=2) + "\n")
            return
        if not rows:
            print("no clusters (brought up from this machine)")
        for row in rows:
            print(printable(f"{row['cluster']}  {row['provider']}  {row['engine']}  {row['status']}  "
                            f"{row['nodes']} node(s)  ${row['hourly_usd']}/h  expires {row['expires_at'] or 'never'}"
                            f"  metered ${row['metered_usd'] or '-'} (last status)"))
        return
    from provisioner.lifecycle.realize import cluster_nodes
    from provisioner.lifecycle.spend import status_cost

    _enter_lab(cluster_id_of(target, catalog))
    runtime = _runtime(_emitter(True), interrupts=False)
    record, nodes = cluster_nodes(cluster_id_of(target, catalog), runtime)
    cost = status_cost(runtime.provider(record.provider), record, nodes, runtime.now())
    doc = {**_summary(record), "live": [{"name": n.name, "id": n.id, "status": n.status.value,
                                         "public_ip": n.public_ip, "private_ip": n.private_ip} for n in nodes],
           "cost": cost.as_json()}
    if json_out:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return
    print(printable(f"{doc['cluster']}: {doc['status']} on {doc['provider']} ({doc['engine']}), "
                    f"${doc['hourly_usd']}/h, expires {doc['expires_at'] or 'never'}"))
    for line in cost.lines():
        print(printable(f"  {line}"))
    for node in doc["live"]:
        print(printable(f"  {node['name']}  {node['status']}  {node['public_ip'] or '-'}  "
                        f"{node['private_ip'] or '-'}  {node['id']}"))


def _summary(record: Any) -> dict[str, Any]:
    return {"cluster": record.cluster_id, "provider": record.provider, "engine": record.engine,
            "status": record.status, "nodes": len(record.plan.nodes),
            "hourly_usd": str(record.plan.option.hourly_usd), "head_address": record.head_address,
            "expires_at": record.expires_at.isoformat() if record.expires_at else None,
            "max_cost_usd": str(record.max_cost_usd) if record.max_cost_usd is not None else None}


def outputs(target: str, backend: str | None = None, catalog: Path | None = None, json_out: bool = False) -> None:
    """The cluster's outputs: head address, SSH command, nodes, hourly cost, expiry."""
    from provisioner.lifecycle import state

    cluster_id = cluster_id_of(target, catalog)
    _enter_lab(cluster_id)
    record = state.load_record(cluster_id)
    if (record is not None and record.engine == "pulumi") or (record is None and backend):
        from provisioner.lifecycle import pulumi_engine

        doc = pulumi_engine.outputs(cluster_id, backend=backend)
    else:
        from provisioner.lifecycle.realize import cluster_nodes, node_address

        record, nodes = cluster_nodes(cluster_id, _runtime(_emitter(True), interrupts=False))
        endpoints = {n.name: n.ssh_endpoint() for n in nodes}
        doc = {**_summary(record), "ssh_command": f"provisioner ssh {cluster_id}",
               "nodes": {n.name: node_address(n) for n in nodes},
               "ssh_endpoints": {name: f"{e[0]}:{e[1]}" for name, e in endpoints.items() if e}}
    if json_out:
        sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
        return
    for key, value in doc.items():
        for line in _value_lines(key, value):
            print(printable(line))


def _value_lines(key: str, value: Any, indent: str = "") -> list[str]:
    """``key: value`` for people: nested mappings and lists as indented lines, never a Python repr."""
    if isinstance(value, dict):
        return [f"{indent}{key}:" + (" -" if not value else ""), *[
            line for k, v in value.items() for line in _value_lines(str(k), v, indent + "  ")]]
    if isinstance(value, list | tuple):
        lines = [f"{indent}{key}:" + (" -" if not value else "")]
        for item in value:
            if isinstance(item, dict):
                lines.append(f"{indent}  - " + ", ".join(f"{k}: {'-' if v in (None, '') else v}"
                                                         for k, v in item.items()))
            else:
                lines.append(f"{indent}  - {item}")
        return lines
    return [f"{indent}{key}: {'-' if value is None or value == '' else value}"]


def ssh(target: str, command: list[str] | None = None, node: str | None = None, print_only: bool = False,
        catalog: Path | None = None) -> None:
    """Open a shell (or run COMMAND) on the head node as the cluster user, with the cluster key."""
    import os
    import shlex

    from provisioner.lifecycle.realize import cluster_nodes, cluster_secrets, default_remote
    from provisioner.realize.bootstrap_ssh import SshTarget
    from provisioner.realize.remote import CLUSTER_USER, SshRemote, ssh_target

    cluster_id = cluster_id_of(target, catalog)
    _enter_lab(cluster_id)
    record, nodes = cluster_nodes(cluster_id, _runtime(_emitter(True), interrupts=False))
    name = node or record.plan.head.name
    found = next((t for n in nodes if n.name == name and (t := ssh_target(n, CLUSTER_USER))), None)
    if found is None and name == record.plan.head.name and record.head_address:  # no longer listed
        found = SshTarget(host=record.head_address, node_name=name, user=CLUSTER_USER)
    if found is None:
        from provisioner.errors import ProvisionerError

        raise ProvisionerError(f"cluster {cluster_id}: node {name} has no address "
                               f"(see provisioner status {cluster_id})")
    remote = default_remote(cluster_id, cluster_secrets(cluster_id))
    assert isinstance(remote, SshRemote)
    argv = remote.argv(found, command or [])
    if not command:
        argv = argv[:-1]  # no remote command: a login shell
    if print_only:
        print(printable(shlex.join(argv)))
        return
    sys.stdout.flush()
    os.execvp(argv[0], argv)


def burst(target: Path, command: list[str], ttl: str | None = None, max_cost: str | None = None,
          engine: str = "direct", skip_validation: bool = False, max_tries: int = 3, image: str = "ubuntu:24.04",
          catalog: Path | None = None, json_out: bool = False, on_budget: str = "stop",
          max_replacements: int = 3) -> int:
    """Plan, bring up, validate, run COMMAND, stream its output, tear down. Exits with the job's status."""
    if engine != "direct":
        raise UsageError("burst runs on the direct engine only", option="--engine")
    if not command:
        raise UsageError("give the job after --, e.g. provisioner burst spec.yaml -- srun -N2 hostname",
                         option="COMMAND")
    from provisioner.lifecycle.burst import BurstOptions, run_burst

    options = BurstOptions(ttl_s=parse_duration(ttl) if ttl else None,
                           max_cost_usd=parse_money(max_cost) if max_cost else None, on_budget=on_budget,
                           skip_validation=skip_validation, max_tries=max_tries, image=image,
                           max_replacements=max_replacements)
    from provisioner.lifecycle.access import require_ssh_sources

    plans = ranked_plans(target, catalog, max_tries)
    require_ssh_sources(plans[0], target)
    runtime = _runtime(_emitter(json_out))
    try:
        code = run_burst(plans, command, options, runtime)
    finally:
        if runtime.interrupts is not None:
            runtime.interrupts.restore()
    return code


def add_commands(group: cliargs.Commands) -> None:
    """Add up, down, status, outputs, ssh, burst and costs to the top-level command group."""
    def target_file(cmd: Any) -> None:
        cmd.add_argument("target", type=Path, metavar="SPEC_OR_PLAN", help="A spec (YAML) or a saved plan (JSON).")

    def cluster(cmd: Any, nargs: str | None = None) -> None:
        cmd.add_argument("target", nargs=nargs, metavar="CLUSTER_OR_FILE", help="Cluster id, spec or plan.")

    def common(cmd: Any, *, backend: bool = False, json_out: bool = True) -> None:
        if backend:
            cmd.add_argument("--backend", help=BACKEND_HELP)
        cmd.add_argument("--catalog", type=Path, help="Catalog used when the target is a spec.")
        if json_out:
            cliargs.flag(cmd, "--json", "One JSON event per line on stdout.", negatable=False, dest="json_out")

    cmd = cliargs.command(group, "up", up)
    target_file(cmd)
    cmd.add_argument("--engine", help=ENGINE_HELP + " Default: pulumi when its CLI is on PATH, else direct.")
    cliargs.flag(cmd, "--wait", "Return only when the control plane lists every node ready (default); "
                 "--no-wait (pulumi engine): once pulumi up is done.", default=True)
    common(cmd, backend=True)
    cmd.add_argument("--ttl", help="Expire after this long (30m, 4h, 2d); default: the spec's.")
    cmd.add_argument("--max-tries", type=cliargs.int_range(1, 3), default=3,
                     help="Options tried on capacity errors (direct; 1-3, default 3).")
    cmd.add_argument("--max-cost", help="Budget in USD: status warns at 50/80/100 %%.")
    cmd.add_argument("--on-budget", choices=ON_BUDGET, default="warn",
                     help="At 100 %% of --max-cost: stop (the budget becomes the expiry) or warn (default).")
    cliargs.flag(cmd, "--local", "Dry run on this machine (root, Linux, systemd-nspawn): the plan's nodes boot "
                 "as local containers behind the provider's fake; down removes them.", negatable=False)

    cmd = cliargs.command(group, "down", down)
    cluster(cmd)
    cmd.add_argument("--engine", help="pulumi | direct (default: how it was brought up, as the local record "
                     "says; without one, pulumi if a pulumi up kept its plan here, else direct).")
    cmd.add_argument("--provider", help="Where the cluster lives when there is no local record (direct); with "
                     "pulumi, the provider asked which paid reservations (Capacity Blocks) remain.")
    cliargs.flag(cmd, "--force-unowned", "Also delete the cluster's nodes that carry no owner mark (direct; never "
                 "another owner's).", negatable=False)
    common(cmd, backend=True)

    cmd = cliargs.command(group, "status", status)
    cluster(cmd, "?")
    common(cmd)

    cmd = cliargs.command(group, "outputs", outputs)
    cluster(cmd)
    common(cmd, backend=True)

    cmd = cliargs.command(group, "ssh", ssh)
    cluster(cmd)
    cmd.add_argument("command", nargs="*", metavar="COMMAND", help="Run this instead of a login shell (after --).")
    cmd.add_argument("--node", help="Node name (default: the head).")
    cliargs.flag(cmd, "--print", "Print the ssh command instead of running it.", negatable=False, dest="print_only")
    common(cmd, json_out=False)

    cmd = cliargs.command(group, "burst", burst)
    target_file(cmd)
    cmd.add_argument("command", nargs="*", metavar="COMMAND", help="The job, after --.")
    cmd.add_argument("--ttl", help="Tear down after this long (30m, 4h); default: the spec's.")
    cmd.add_argument("--max-cost", help="Tear down once hourly cost x elapsed reaches this USD.")
    cmd.add_argument("--on-budget", choices=ON_BUDGET, default="stop",
                     help="At 100 %% of --max-cost: stop (default: tear down) or warn (the job goes on).")
    cmd.add_argument("--engine", default="direct", help="direct (a burst cluster lives as long as this command).")
    cliargs.flag(cmd, "--skip-validation", "Start the job even if node validation failed.")
    cmd.add_argument("--max-tries", type=cliargs.int_range(1, 3), default=3,
                     help="Options tried on capacity errors (1-3, default 3).")
    cmd.add_argument("--image", default="ubuntu:24.04", help="Container image of the Kubernetes Job.")
    cmd.add_argument("--max-replacements", type=cliargs.int_range(0, 100), default=3,
                     help="Nodes replaced at most while the job runs (drained, preempted, lost; 0: none).")
    common(cmd)

    from provisioner.lifecycle.costs_report import add_command

    add_command(group)

    from provisioner.lifecycle.watch import add_watch

    add_watch(group, common)


__all__ = ["add_commands", "burst", "down", "outputs", "parse_duration", "parse_money", "ranked_plans", "ssh",
           "status", "up"]
