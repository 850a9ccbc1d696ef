"""``provisioner up|down|status|outputs|ssh|burst``: the lifecycle commands (registered by provisioner/cli.py).

TARGET is a spec (YAML), a saved plan (JSON) or, for the commands that act on an existing
cluster, its id. ``--engine pulumi`` (the default of up/down) drives the ``stacks/`` program
through the Automation API; ``--engine direct`` calls the adapters itself
(``lifecycle.realize``). Progress goes to stderr through rich; ``--json`` prints one JSON
event per line on stdout instead. Errors are one line and the error tree's exit code
(5: a stack failure, naming what remains and the command that removes it); ``burst`` exits
with the job's status (124 when its TTL or cost cap stopped it, 130 on Ctrl-C).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import sys
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from provisioner.lifecycle.events import Emit
    from provisioner.lifecycle.realize import Runtime
    from provisioner.plan import Plan

ENGINES = ("pulumi", "direct")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "": 3600}

Engine = Annotated[str, typer.Option(help="pulumi (drive the stacks/ program) | direct (call the adapters).")]
Backend = Annotated[str | None, typer.Option(
    help="Pulumi state backend URL (s3://..., gs://..., https://api.pulumi.com); default: a file backend "
         "under the state dir.")]
JsonOut = Annotated[bool, typer.Option("--json", help="One JSON event per line on stdout.")]
Catalog = Annotated[Path | None, typer.Option(help="Catalog used when TARGET is a spec.")]


def parse_duration(text: str) -> float:
    """``90s``, ``30m``, ``4h``, ``2d`` (a bare number is hours) -> seconds. BadParameter otherwise."""
    found = _DURATION.match(text)
    if not found or float(found.group(1)) <= 0:
        raise typer.BadParameter(f"{text!r} is not a duration like 30m, 4h or 2d", param_hint="--ttl")
    return float(found.group(1)) * _UNIT_S[found.group(2)]


def parse_money(text: str) -> Decimal:
    try:
        value = Decimal(text)
    except InvalidOperation:
        value = Decimal("NaN")
    if not value.is_finite() or value <= 0:
        raise typer.BadParameter(f"{text!r} is not a positive amount of USD", param_hint="--max-cost")
    return value


def _check_engine(engine: str) -> None:
    if engine not in ENGINES:
        raise typer.BadParameter(f"must be one of {', '.join(ENGINES)}", param_hint="--engine")


def _emitter(json_out: bool) -> Emit:
    from provisioner.lifecycle.events import JsonLines, RichLines

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
    from provisioner.lifecycle.interrupts import Interrupts
    from provisioner.lifecycle.realize import Runtime

    return Runtime(emit=emit, interrupts=Interrupts().install() if interrupts else None)


def up(
    target: Annotated[Path, typer.Argument(metavar="SPEC_OR_PLAN", help="A spec (YAML) or a saved plan (JSON).")],
    engine: Engine = "pulumi",
    backend: Backend = None,
    catalog: Catalog = None,
    ttl: Annotated[str | None, typer.Option(help="Expire after this long (30m, 4h, 2d); default: the spec's.")] = None,
    max_tries: Annotated[int, typer.Option(min=1, max=3, help="Options tried on capacity errors (direct).")] = 3,
    json_out: JsonOut = False,
) -> None:
    """Buy and boot the cluster; block until its control plane lists every node ready."""
    _check_engine(engine)
    ttl_s = parse_duration(ttl) if ttl else None
    emit = _emitter(json_out)
    if engine == "pulumi":
        from provisioner.lifecycle import pulumi_engine
        from provisioner.lifecycle.realize import expiry_for, utc_now

        pulumi_engine.require_pulumi()  # before planning: one line when the CLI is absent
        plan = ranked_plans(target, catalog, 1)[0]
        now = utc_now()
        expires_at = expiry_for(plan, now, ttl_s)
        outputs = pulumi_engine.up(plan, backend=backend, emit=emit, expires_at=expires_at)
        _save_pulumi_record(plan, now, expires_at)
        emit("up", message=f"cluster {plan.cluster_id} is up (pulumi)", cluster=plan.cluster_id, outputs=outputs)
        return
    from provisioner.lifecycle.realize import bring_up_first

    plans = ranked_plans(target, catalog, max_tries)
    runtime = _runtime(emit)
    try:
        bring_up_first(plans, runtime, max_tries=max_tries, ttl_s=ttl_s)
    except KeyboardInterrupt:
        cluster_id = plans[0].cluster_id
        emit("error", message=f"interrupted: cluster {cluster_id} may have nodes; remove them with: "
             f"provisioner down {cluster_id} --engine direct", cluster=cluster_id)
        raise
    finally:
        if runtime.interrupts is not None:
            runtime.interrupts.restore()


def _save_pulumi_record(plan: Plan, now: dt.datetime, expires_at: dt.datetime | None) -> None:
    from provisioner.lifecycle import state

    state.save_record(state.ClusterRecord(cluster_id=plan.cluster_id, provider=plan.option.provider,
                                          engine="pulumi", plan=plan, created_at=now, expires_at=expires_at,
                                          status="up"))


def down(
    target: Annotated[str, typer.Argument(metavar="CLUSTER_OR_FILE", help="Cluster id, spec or plan.")],
    engine: Annotated[str | None, typer.Option(help="pulumi | direct (default: how it was brought up, "
                                                    "else pulumi).")] = None,
    backend: Backend = None,
    provider: Annotated[str | None, typer.Option(help="Where the cluster lives when there is no local "
                                                      "record (direct).")] = None,
    catalog: Catalog = None,
    json_out: JsonOut = False,
) -> None:
    """Delete every node of the cluster through the provider API (or destroy its stack). Idempotent."""
    from provisioner.lifecycle import state

    cluster_id = cluster_id_of(target, catalog)
    record = state.load_record(cluster_id)
    chosen = engine or (record.engine if record is not None else "pulumi")
    _check_engine(chosen)
    emit = _emitter(json_out)
    if chosen == "pulumi":
        from provisioner.lifecycle import pulumi_engine

        pulumi_engine.down(cluster_id, backend=backend, emit=emit)
        state.remove_record(cluster_id)
        emit("down", message=f"cluster {cluster_id} is down (pulumi)", cluster=cluster_id)
        return
    from provisioner.lifecycle.realize import tear_down

    runtime = _runtime(emit, interrupts=False)
    with _shielded():
        tear_down(cluster_id, runtime, provider=provider)


class _shielded:
    """Ctrl-C during ``down`` is ignored once (the delete must finish); a second one stops it."""

    def __enter__(self) -> None:
        from provisioner.lifecycle.interrupts import Interrupts

        self._interrupts = Interrupts().install()
        self._cm = self._interrupts.shielded()
        self._cm.__enter__()

    def __exit__(self, *exc: object) -> None:
        self._cm.__exit__(None, None, None)
        self._interrupts.restore()


def status(
    target: Annotated[str | None, typer.Argument(metavar="[CLUSTER_OR_FILE]", help="One cluster (default: all).")]
    = None,
    catalog: Catalog = None,
    json_out: JsonOut = False,
) -> None:
    """The clusters brought up from here, or one cluster with what its provider lists now."""
    from provisioner.lifecycle import state

    if target is None:
        records = state.list_records()
        rows = [_summary(record) for record in records]
        if json_out:
            sys.stdout.write(json.dumps(rows, indent=2) + "\n")
            return
        if not rows:
            typer.echo("no clusters (brought up from this machine)")
        for row in rows:
            typer.echo(f"{row['cluster']}  {row['provider']}  {row['engine']}  {row['status']}  "
                       f"{row['nodes']} node(s)  ${row['hourly_usd']}/h  expires {row['expires_at'] or 'never'}")
        return
    from provisioner.lifecycle.realize import cluster_nodes

    record, nodes = cluster_nodes(cluster_id_of(target, catalog), _runtime(_emitter(True), interrupts=False))
    doc = {**_summary(record), "live": [{"name": n.name, "id": n.id, "status": n.status.value,
                                         "public_ip": n.public_ip, "private_ip": n.private_ip} for n in nodes]}
    if json_out:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        return
    typer.echo(f"{doc['cluster']}: {doc['status']} on {doc['provider']} ({doc['engine']}), ${doc['hourly_usd']}/h, "
               f"expires {doc['expires_at'] or 'never'}")
    for node in doc["live"]:
        typer.echo(f"  {node['name']}  {node['status']}  {node['public_ip'] or '-'}  {node['private_ip'] or '-'}  "
                   f"{node['id']}")


def _summary(record: Any) -> dict[str, Any]:
    return {"cluster": record.cluster_id, "provider": record.provider, "engine": record.engine,
            "status": record.status, "nodes": len(record.plan.nodes),
            "hourly_usd": str(record.plan.option.hourly_usd), "head_address": record.head_address,
            "expires_at": record.expires_at.isoformat() if record.expires_at else None,
            "max_cost_usd": str(record.max_cost_usd) if record.max_cost_usd is not None else None}


def outputs(
    target: Annotated[str, typer.Argument(metavar="CLUSTER_OR_FILE")],
    backend: Backend = None,
    catalog: Catalog = None,
    json_out: JsonOut = False,
) -> None:
    """The cluster's outputs: head address, SSH command, nodes, hourly cost, expiry."""
    from provisioner.lifecycle import state

    cluster_id = cluster_id_of(target, catalog)
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
        typer.echo(f"{key}: {value}")


def ssh(
    target: Annotated[str, typer.Argument(metavar="CLUSTER_OR_FILE")],
    command: Annotated[list[str] | None, typer.Argument(help="Run this instead of a login shell.")] = None,
    node: Annotated[str | None, typer.Option(help="Node name (default: the head).")] = None,
    print_only: Annotated[bool, typer.Option("--print", help="Print the ssh command instead of running it.")]
    = False,
    catalog: Catalog = None,
) -> None:
    """Open a shell (or run COMMAND) on the head node as the cluster user, with the cluster key."""
    import os
    import shlex

    from provisioner.lifecycle.bootstrap_ssh import SshTarget
    from provisioner.lifecycle.realize import cluster_nodes, cluster_secrets, default_remote
    from provisioner.lifecycle.remote import CLUSTER_USER, SshRemote, ssh_target

    cluster_id = cluster_id_of(target, catalog)
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
        typer.echo(shlex.join(argv))
        return
    sys.stdout.flush()
    os.execvp(argv[0], argv)


def burst(
    target: Annotated[Path, typer.Argument(metavar="SPEC_OR_PLAN")],
    command: Annotated[list[str], typer.Argument(metavar="-- COMMAND...", help="The job.")],
    ttl: Annotated[str | None, typer.Option(help="Tear down after this long (30m, 4h); default: the spec's.")]
    = None,
    max_cost: Annotated[str | None, typer.Option(help="Tear down once hourly cost x elapsed reaches this USD.")]
    = None,
    engine: Annotated[str, typer.Option(help="direct (a burst cluster lives as long as this command).")] = "direct",
    skip_validation: Annotated[bool, typer.Option(help="Start the job even if node validation failed.")] = False,
    max_tries: Annotated[int, typer.Option(min=1, max=3, help="Options tried on capacity errors.")] = 3,
    image: Annotated[str, typer.Option(help="Container image of the Kubernetes Job.")] = "ubuntu:24.04",
    catalog: Catalog = None,
    json_out: JsonOut = False,
) -> None:
    """Plan, bring up, validate, run COMMAND, stream its output, tear down. Exits with the job's status."""
    if engine != "direct":
        raise typer.BadParameter("burst runs on the direct engine only", param_hint="--engine")
    from provisioner.lifecycle.burst import BurstOptions, run_burst

    options = BurstOptions(ttl_s=parse_duration(ttl) if ttl else None,
                           max_cost_usd=parse_money(max_cost) if max_cost else None,
                           skip_validation=skip_validation, max_tries=max_tries, image=image)
    plans = ranked_plans(target, catalog, max_tries)
    runtime = _runtime(_emitter(json_out))
    try:
        code = run_burst(plans, command, options, runtime)
    finally:
        if runtime.interrupts is not None:
            runtime.interrupts.restore()
    if code:
        raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    """Add the lifecycle commands to the top-level app."""
    app.command("up")(up)
    app.command("down")(down)
    app.command("status")(status)
    app.command("outputs")(outputs)
    app.command("ssh")(ssh)
    app.command("burst")(burst)


__all__ = ["burst", "down", "outputs", "parse_duration", "parse_money", "ranked_plans", "register", "ssh",
           "status", "up"]
