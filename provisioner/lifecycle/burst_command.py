"""``provisioner burst``: a job cluster brought up, the job run, everything torn down (registered by
lifecycle/cli.py; the run itself is ``lifecycle.burst.run_burst``).

``--local`` runs it on nodes booted on this machine behind the chosen provider's fake (a lab,
provisioner.local.lab); with ``--recover anywhere`` the lab serves every node-backed fake and a move
is re-planned over them only (``burst_recover.local_planner``), so a move can be rehearsed here.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from provisioner.errors import UsageError
from provisioner.lifecycle import command_support


def burst(
    target: Path,
    command: list[str],
    ttl: str | None = None,
    max_cost: str | None = None,
    engine: str = "direct",
    skip_validation: bool = False,
    max_tries: int = 3,
    image: str = "ubuntu:24.04",
    catalog: Path | None = None,
    json_out: bool = False,
    on_budget: str = "stop",
    max_replacements: int = 3,
    local: bool = False,
    ssh_from: list[str] | None = None,
    recover: str = "same",
    max_moves: int | None = None,
) -> int:
    """Plan, bring up, validate, run COMMAND, stream its output, tear down. Exits with the job's status.
    --local: on the plan's nodes booted on this machine behind the provider's fake, as up --local
    (with --recover anywhere: behind every node-backed fake, so the run can move between them)."""
    if engine != "direct":
        raise UsageError("burst runs on the direct engine only", option="--engine")
    if not command:
        raise UsageError(
            "give the job after --, e.g. provisioner burst spec.yaml -- srun -N2 hostname", option="COMMAND"
        )
    from provisioner.lifecycle.burst import BurstOptions, run_burst

    options = BurstOptions(
        ttl_s=command_support.parse_duration(ttl) if ttl else None,
        max_cost_usd=command_support.parse_money(max_cost) if max_cost else None,
        on_budget=on_budget,
        skip_validation=skip_validation,
        max_tries=max_tries,
        image=image,
        max_replacements=max_replacements,
        local=local,
        recover=recover,
        max_moves=max_moves,
    )
    anywhere = recover == "anywhere"
    if anywhere and catalog is not None and not local:
        from provisioner.lifecycle.burst_recover import catalog_planner

        options = dataclasses.replace(options, planner=catalog_planner(catalog))
    from provisioner.lifecycle.access import say_exposure

    emit = command_support.emitter(json_out)
    plans = command_support.plans_to_try(target, catalog, max_tries, ssh_from, local)  # nothing started yet
    if local:  # the job runs on the lab's nodes; SSH comes from the lab's own address (lab.fit_to_host)
        from provisioner.local import lab

        if anywhere:
            from provisioner.lifecycle.burst_recover import local_planner, require_remote_checkpoint

            require_remote_checkpoint(plans[0])  # as run_burst would, before the lab starts
            served = sorted(lab.backed_fakes())
            options = dataclasses.replace(options, planner=local_planner(plans[0].cluster_id, served, catalog))
        plans = lab.local_plans(plans, emit, max_tries, every=anywhere)
    else:
        say_exposure(plans, emit)
    runtime = command_support.runtime(emit)
    try:
        code = run_burst(plans, command, options, runtime)
    finally:
        if runtime.interrupts is not None:
            runtime.interrupts.restore()
        if local:
            lab.stop(plans[0].cluster_id)  # the job's nodes are gone; its namespace and fakes go too
    return code


__all__ = ["burst"]
