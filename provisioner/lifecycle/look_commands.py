"""``provisioner status``, ``outputs`` and ``ssh``: look at a cluster (registered by lifecycle/cli.py).

``status`` lists the local records (or one cluster with what its provider lists now and its cost),
``outputs`` prints the cluster's outputs as plain values (never Python reprs), ``ssh`` opens a
shell or runs a command on a node as the cluster user with the cluster key.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from provisioner.lifecycle import command_support
from provisioner.money import usd_of_cents, usd_text
from provisioner.termtext import printable, say, when_text


def _look_runtime() -> Any:
    """The runtime status, outputs and ssh look through: no progress lines, no Ctrl-C handler."""
    return command_support.runtime(command_support.emitter(True), interrupts=False)


def status(
    target: str | None = None, catalog: Path | None = None, json_out: bool = False, backend: str | None = None
) -> None:
    """The clusters brought up from here, or one cluster with what its provider lists now (with
    --backend and no record here: the stack another machine brought up, from its outputs)."""
    from provisioner.lifecycle import state

    if target is None:
        from provisioner.lifecycle import ledger

        records = state.list_records()
        metered: dict[tuple[str, str | None], int | None] = {}
        for entry in ledger.rows(ledger.read()):  # the last status or down of each run (a run's own only)
            metered[(entry.cluster, entry.run)] = entry.metered_cents
        rows: list[dict[str, Any]] = []
        for record in records:
            cents = metered.get((record.cluster_id, record.run_id))
            rows.append({**_summary(record), "metered_usd": None if cents is None else str(usd_of_cents(cents))})
        if json_out:
            say(json.dumps(rows, indent=2))
            return
        if not rows:
            say("no clusters (brought up from this machine)")
        for row in rows:
            say(
                printable(
                    f"{row['cluster']}  run {row['run'] or 'n/a'}{'  local' if row['local'] else ''}  "
                    f"{row['provider']}  {row['engine']}  {row['status']}  "
                    f"{row['nodes']} node(s)  {usd_text(row['hourly_usd'])}/h  "
                    f"expires {when_text(row['expires_at'], 'never')}  "
                    f"metered {usd_text(row['metered_usd'])} (last status)"
                    + (f"  ({row['dead_why']})" if row.get("dead_why") else "")
                )
            )
        return
    from provisioner.lifecycle.realize import cluster_nodes
    from provisioner.lifecycle.spend import of_run, status_cost

    cluster_id = command_support.cluster_id_of(target, catalog)
    if not command_support.enter_lab(cluster_id) and command_support.is_local(cluster_id):
        _gone_local_status(cluster_id, json_out)
        return
    runtime = _look_runtime()
    if backend and state.load_record(cluster_id) is None:
        _stack_status(cluster_id, backend, runtime, json_out)
        return
    record, nodes = cluster_nodes(cluster_id, runtime)
    cost = status_cost(runtime.provider(record.provider), record, nodes, runtime.now())
    mine = of_run(record, nodes)  # a node of another run of this name is listed apart, never as this run's
    doc = {**_summary(record), "live": _live(mine), "other_runs": _others(nodes, mine), "cost": cost.as_json()}
    if json_out:
        say(json.dumps(doc, indent=2))
        return
    say(
        printable(
            f"{doc['cluster']} (run {doc['run'] or 'n/a'}{', local dry run' if doc['local'] else ''}): "
            f"{doc['status']} on {doc['provider']} ({doc['engine']}), "
            f"{usd_text(doc['hourly_usd'])}/h, expires {when_text(doc['expires_at'], 'never')}"
        )
    )
    for line in cost.lines():
        say(printable(f"  {line}"))
    for node in doc["live"]:
        say(
            printable(
                f"  {node['name']}  {node['status']}  {node['public_ip'] or '-'}  "
                f"{node['private_ip'] or '-'}  {node['id']}"
            )
        )
    for node in doc["other_runs"]:
        say(
            printable(
                f"  not this run's: {node['name']}  {node['status']}  {node['id']}  (run {node['run'] or 'n/a'}; "
                f"provisioner gc lists it)"
            )
        )


def _lab_prefix(cluster_id: str, in_lab: bool) -> list[str]:
    """What runs a printed ``ssh`` from the host into a local dry run's lab: its nodes' addresses
    are on a bridge inside the lab's network namespace, which this process entered and a shell
    has not (``ip netns exec``; root, as ``up --local`` is). Empty for any other cluster."""
    if not in_lab:
        return []
    from provisioner.local.lab import lab_for

    found = lab_for(cluster_id)
    return ["ip", "netns", "exec", str(found["netns"])] if found is not None else []


def _gone_local_status(cluster_id: str, json_out: bool) -> None:
    """``status`` of a local dry run whose lab is not running: its record, and that nothing of it
    exists (its nodes were this machine's containers); no provider is asked."""
    from provisioner.lifecycle import state

    record = state.load_record(cluster_id)
    if record is None:
        from provisioner.errors import UsageError

        raise UsageError(f"no record of cluster {cluster_id} here (see provisioner status)")
    doc = {**_summary(record), "live": [], "cost": None, "lab": "not running"}
    if json_out:
        say(json.dumps(doc, indent=2))
        return
    say(
        printable(
            f"{cluster_id} (run {record.run}, local dry run): {record.status}; its lab is not running here, "
            f"so none of its nodes exist (provisioner down {cluster_id} forgets it)"
        )
    )


def _liveness(record: Any) -> dict[str, Any]:
    """``status``: the record's, except a ``creating`` whose ``up`` is gone (killed before it bought,
    or mid-create), which is ``dead`` with the reason (it was shown as if the up were still at work);
    ``provisioner gc`` lists it and its nodes."""
    import datetime as dt

    from provisioner.lifecycle.gc_verdict import abandoned

    why = abandoned(record, dt.datetime.now(dt.UTC)) if record.status == "creating" else None
    return {"status": "dead", "dead_why": f"{why}; provisioner gc lists it"} if why else {"status": record.status}


def _live(nodes: Any) -> list[dict[str, Any]]:
    return [
        {"name": n.name, "id": n.id, "status": n.status.value, "public_ip": n.public_ip, "private_ip": n.private_ip}
        for n in nodes
    ]


def _others(nodes: Any, mine: Any) -> list[dict[str, Any]]:
    """The listed nodes of the cluster's name that are not this run's and may still bill, with their run."""
    from provisioner.providers.ownership import LIVE

    ids = {n.id for n in mine}
    return [{**_live([n])[0], "run": n.run} for n in nodes if n.id not in ids and n.status in LIVE]


def _stack_status(cluster_id: str, backend: str, runtime: Any, json_out: bool) -> None:
    """``status`` of a stack with no record here (a teammate's ``up`` on a shared backend): its
    outputs say the provider and the plan's nodes; the provider says what runs now."""
    from provisioner.lifecycle import pulumi_engine

    outs = pulumi_engine.outputs(cluster_id, backend=backend)
    provider = str(outs.get("provider", ""))
    live = _live(runtime.provider(provider).get_nodes(cluster_id))
    doc: dict[str, Any] = {
        "cluster": cluster_id,
        "provider": provider,
        "engine": "pulumi",
        "status": "up",
        "nodes": len(outs.get("nodes") or []),
        "hourly_usd": outs.get("hourly_usd"),
        "expires_at": outs.get("expires_at") or None,
        "backend": backend,
        "live": live,
    }
    if json_out:
        say(json.dumps(doc, indent=2))
        return
    say(printable(f"{cluster_id}: stack in {backend} on {provider} (pulumi), ${doc['hourly_usd']}/h"))
    for node in live:
        say(printable(f"  {node['name']}  {node['status']}  {node['public_ip'] or '-'}  {node['id']}"))


def _summary(record: Any) -> dict[str, Any]:
    return {
        "cluster": record.cluster_id,
        "run": record.run_id,
        "local": record.local,
        "provider": record.provider,
        "engine": record.engine,
        **_liveness(record),
        "nodes": len(record.plan.nodes),
        "hourly_usd": str(record.plan.option.hourly_usd),
        "head_address": record.head_address,
        "expires_at": record.expires_at.isoformat() if record.expires_at else None,
        "max_cost_usd": str(record.max_cost_usd) if record.max_cost_usd is not None else None,
    }


def outputs(target: str, backend: str | None = None, catalog: Path | None = None, json_out: bool = False) -> None:
    """The cluster's outputs: head address, SSH command, nodes, hourly cost, expiry."""
    from provisioner.lifecycle import state

    cluster_id = command_support.cluster_id_of(target, catalog)
    command_support.require_lab(cluster_id, command_support.enter_lab(cluster_id))
    record = state.load_record(cluster_id)
    if (record is not None and record.engine == "pulumi") or (record is None and backend):
        from provisioner.lifecycle import pulumi_engine

        doc = pulumi_engine.outputs(cluster_id, backend=backend)
    else:
        from provisioner.lifecycle.realize import cluster_nodes, node_address

        record, nodes = cluster_nodes(cluster_id, _look_runtime(), this_run=True)
        endpoints = {n.name: n.ssh_endpoint() for n in nodes}
        doc = {
            **_summary(record),
            "ssh_command": f"provisioner ssh {cluster_id}",
            "nodes": {n.name: node_address(n) for n in nodes},
            "ssh_endpoints": {name: f"{e[0]}:{e[1]}" for name, e in endpoints.items() if e},
        }
    if json_out:
        say(json.dumps(doc, indent=2, default=str))
        return
    for key, value in doc.items():
        for line in _value_lines(key, value):
            say(printable(line))


def _value_lines(key: str, value: Any, indent: str = "") -> list[str]:
    """``key: value`` for people: nested mappings and lists as indented lines, never a Python repr."""
    if isinstance(value, dict):
        return [
            f"{indent}{key}:" + (" -" if not value else ""),
            *[line for k, v in value.items() for line in _value_lines(str(k), v, indent + "  ")],
        ]
    if isinstance(value, list | tuple):
        lines = [f"{indent}{key}:" + (" -" if not value else "")]
        for item in value:
            if isinstance(item, dict):
                lines.append(
                    f"{indent}  - " + ", ".join(f"{k}: {'-' if v in (None, '') else v}" for k, v in item.items())
                )
            else:
                lines.append(f"{indent}  - {item}")
        return lines
    return [f"{indent}{key}: {'-' if value is None or value == '' else value}"]


def ssh(
    target: str,
    command: list[str] | None = None,
    node: str | None = None,
    print_only: bool = False,
    catalog: Path | None = None,
) -> None:
    """Open a shell (or run COMMAND) on the head node as the cluster user, with the cluster key.

    COMMAND is read as ssh reads it: its words joined by spaces, then run by the node's shell."""
    import os
    import shlex

    from provisioner.lifecycle.realize import cluster_nodes, cluster_secrets, default_remote
    from provisioner.realize.bootstrap_ssh import SshTarget
    from provisioner.realize.remote import CLUSTER_USER, SshRemote, ssh_target

    cluster_id = command_support.cluster_id_of(target, catalog)
    in_lab = command_support.enter_lab(cluster_id)
    command_support.require_lab(cluster_id, in_lab)
    record, nodes = cluster_nodes(cluster_id, _look_runtime(), this_run=True)
    name = node or record.plan.head.name
    found = next((t for n in nodes if n.name == name and (t := ssh_target(n, CLUSTER_USER))), None)
    if found is None and name == record.plan.head.name and record.head_address:  # no longer listed
        found = SshTarget(host=record.head_address, node_name=name, user=CLUSTER_USER)
    if found is None:
        from provisioner.errors import ProvisionerError

        raise ProvisionerError(
            f"cluster {cluster_id}: node {name} has no address (see provisioner status {cluster_id})"
        )
    remote = default_remote(record.plan, cluster_secrets(cluster_id))
    assert isinstance(remote, SshRemote)
    if not print_only:  # the key the command checks strictly (a no-op once up's SSH pass pinned it)
        remote.pin(found)
    argv = remote.shell_argv(found, command or [])  # words joined as ssh joins them
    if not command:
        argv = argv[:-1]  # no remote command: a login shell
    if print_only:
        say(printable(shlex.join([*_lab_prefix(cluster_id, in_lab), *argv])))
        return
    sys.stdout.flush()
    os.execvp(argv[0], argv)
