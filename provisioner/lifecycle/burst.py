"""``provisioner burst``: a cluster that exists for one job and always ends.

``run_burst(plans, command, options, runtime)`` brings the first plan with capacity up
(failover over at most ``max_tries`` options), validates the nodes (a failed validation
refuses the job unless ``skip_validation``), runs COMMAND on the head and streams its output,
then tears everything down: on success, failure, TTL, budget, Ctrl-C/SIGTERM (the caller
installs ``runtime.interrupts``) or any error. Returns the job's exit status.

How COMMAND runs (lifecycle/resume.py: jobs that resume): on Slurm, a command starting with
``srun``/``salloc`` runs as given; ``sbatch`` gets ``--wait --requeue`` and the checkpoint
environment; anything else, with a shared filesystem, becomes a requeueable ``sbatch --wait
--requeue`` job running ``srun --kill-on-bad-exit=1 -- COMMAND`` whose output the head follows,
and without one runs as ``srun --nodes=N --ntasks-per-node=1 --kill-on-bad-exit=1 -- COMMAND``.
On Kubernetes it becomes a Job (``k8s_job``: a pod of ``image`` with the node's GPUs and the
checkpoint directory; a pod lost with its node is replaced), applied with ``kubectl``, each pod
followed with ``kubectl logs -f``, and the last pod's exit status returned. With no control plane
it runs on the head over SSH.

The watchdog is client-side and exact: it fires when ``now >= expires_at`` (TTL) or when
``hourly_usd x elapsed >= max_cost_usd`` (Decimal, no rounding; compared as
``hourly x seconds >= max_cost x 3600``). It is checked at every ``runtime.sleep`` (so every
wait of the bring-up is covered) and while the job runs, on the injectable clock ``runtime.now``.
A fired watchdog tears down and raises ``BurstStopped`` (exit 124).

What a client killed outright (SIGKILL, power loss) leaves: the nodes carry the expiry tag and
the local record holds a lease on this process (``ClusterRecord.lease_pid``); the record counts
as expired once the process is gone, so ``provisioner gc --yes`` collects the nodes at once, and
after the expiry on any machine (by the tag).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import TYPE_CHECKING

from provisioner.errors import ProvisionerError, StackError
from provisioner.lifecycle import lease as cluster_lease
from provisioner.lifecycle import resume, state
from provisioner.lifecycle.burst_validate import validate as _validate
from provisioner.lifecycle.realize import (
    Runtime,
    bring_up_first,
    cluster_secrets,
    default_remote,
    head_target,
    live,
    tear_down,
)
from provisioner.lifecycle.runs import healed_by_run, of_run
from provisioner.lifecycle.watchdog import BurstStopped, Watchdog
from provisioner.money import cents_text, round_cents
from provisioner.plan import Plan
from provisioner.providers.base import Node
from provisioner.realize.remote import Remote

if TYPE_CHECKING:
    from provisioner.lifecycle.heal import Healer
    from provisioner.lifecycle.recover import Mover
    from provisioner.spec import ClusterSpec

JOB_NAME = re.compile(r"[^a-z0-9-]+")
SLURM_LAUNCHERS = ("srun", "salloc")
DEFAULT_TTL_S = 24 * 3600
"""A burst always has an expiry: ``--ttl``, else the spec's ``lifetime.ttl_hours``, else 24 h."""


@dataclass(frozen=True)
class BurstOptions:
    ttl_s: float | None = None
    """TTL from the start of the burst; None: the spec's ``lifetime.ttl_hours``, else 24 h."""
    max_cost_usd: Decimal | None = None
    on_budget: str = "stop"
    """At ``max_cost_usd``: ``stop`` (the watchdog tears down) or ``warn`` (the job goes on)."""
    skip_validation: bool = False
    max_tries: int = 3
    image: str = "ubuntu:24.04"
    """The Kubernetes Job's container image."""
    poll_s: float = 1.0
    """How often the watchdog looks while the job runs."""
    validation_args: tuple[str, ...] = ("--sustained-s", "10")
    max_replacements: int = 3
    """Nodes the heal loop (lifecycle/heal.py) may replace while the job runs (0: none)."""
    heal_poll_s: float = 30.0
    local: bool = False
    """A dry run on the lab's nodes (``burst --local``): its record and ledger entries say so."""
    recover: str = "same"
    """``same``: heal in place only; ``anywhere``: move the run when that fails (lifecycle/recover.py)."""
    max_moves: int | None = None
    """Moves at most with ``recover="anywhere"``; None: the spec's ``checkpoint.max_moves``."""
    planner: Callable[[ClusterSpec], Sequence[Plan]] | None = None
    """Ranked plans for a move's re-planned spec; None: the bundled catalog (``workflow.resolve``)."""


def job_argv(plan: Plan, command: Sequence[str], image: str) -> tuple[str, ...]:
    """What the head runs for COMMAND (see the module docstring and lifecycle/resume.py). Pure."""
    if not command:
        raise ProvisionerError("burst needs a COMMAND after --")
    control_plane = plan.spec.control_plane.value
    if control_plane == "slurm":
        if command[0] in SLURM_LAUNCHERS:
            return tuple(command)
        if command[0] == "sbatch":
            extra = [word for word in ("--wait", "--requeue") if word not in command]
            if not any(word.startswith("--export") for word in command):
                extra.append("--export=ALL," + ",".join(f"{k}={v}" for k, v in resume.checkpoint_env(plan).items()))
            return ("sbatch", *extra, *command[1:])
        if resume.shared_fs(plan):
            return resume.slurm_requeue_argv(plan, command, k8s_job_name(plan))
        return ("srun", f"--nodes={len(plan.nodes)}", "--ntasks-per-node=1", "--kill-on-bad-exit=1", "--", *command)
    if control_plane == "kubernetes":
        return ("bash", "-c", resume.k8s_follow_script(k8s_job_name(plan), k8s_job(plan, command, image)))
    return tuple(command)


def k8s_job(plan: Plan, command: Sequence[str], image: str) -> dict[str, object]:
    """The burst's Kubernetes Job: the node's GPUs, the checkpoint directory mounted at its own path,
    a new pod when one is lost with its node (not counted) or fails (up to K8S_BACKOFF_LIMIT times)."""
    gpus = str(plan.option.gpus_per_node)
    ckpt = resume.checkpoint_dir(plan)
    env = [{"name": key, "value": value} for key, value in resume.checkpoint_env(plan).items()]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": k8s_job_name(plan), "labels": {"app.kubernetes.io/managed-by": "provisioner"}},
        "spec": {
            "backoffLimit": resume.K8S_BACKOFF_LIMIT,
            "ttlSecondsAfterFinished": 3600,
            "podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]},
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "volumes": [{"name": "checkpoints", "hostPath": {"path": ckpt, "type": "DirectoryOrCreate"}}],
                    "containers": [
                        {
                            "name": "job",
                            "image": image,
                            "command": list(command),
                            "env": env,
                            "volumeMounts": [{"name": "checkpoints", "mountPath": ckpt}],
                            "resources": {"limits": {"nvidia.com/gpu": gpus}},
                        }
                    ],
                }
            },
        },
    }


def k8s_job_name(plan: Plan) -> str:
    return JOB_NAME.sub("-", f"burst-{plan.cluster_id}")[:63].strip("-")


def run_burst(
    plans: Sequence[Plan], command: Sequence[str], options: BurstOptions | None = None, runtime: Runtime | None = None
) -> int:
    """Bring up, validate, run ``command``, tear down (always). Returns the job's exit status.

    Raises BurstStopped (TTL/budget), ValidationFailedError (exit 11), the bring-up's errors,
    or Interrupted on Ctrl-C/SIGTERM; in every case after the teardown. A teardown that fails
    raises StackError naming what remains and ``provisioner gc``.
    """
    opts = options or BurstOptions()
    rt = runtime or Runtime()
    if not plans:
        raise ProvisionerError("no option to burst on")
    job = job_argv(plans[0], command, opts.image)  # refuse a bad COMMAND before buying anything
    started = rt.now()
    first = plans[0]
    if opts.recover == "anywhere":
        from provisioner.lifecycle.burst_recover import require_remote_checkpoint

        require_remote_checkpoint(first)
    ttl_s = opts.ttl_s
    if ttl_s is None and first.spec.lifetime.ttl_hours is not None:
        ttl_s = first.spec.lifetime.ttl_hours * 3600
    expires_at = started + dt.timedelta(seconds=DEFAULT_TTL_S if ttl_s is None else ttl_s)
    watchdog = Watchdog(
        started,
        hourly_usd=first.option.hourly_usd,
        expires_at=expires_at,
        max_cost_usd=opts.max_cost_usd if opts.on_budget == "stop" else None,
        warn_cost_usd=opts.max_cost_usd if opts.on_budget == "warn" else None,
    )
    watched = replace(rt, sleep=_watched_sleep(rt, watchdog))
    cluster_id = first.cluster_id
    remote: Remote | None = rt.remote
    clusters = [cluster_id]
    # Held across the job (reentrant for bring-up and teardown): the lease on its nodes is renewed
    # until the teardown (lifecycle.lease_renewal), so another machine's gc never takes a running burst;
    # a moved run's new clusters are held the same way (``holds``) from their bring-up on.
    mover: Mover | None = None
    with cluster_lease.hold(cluster_id, "burst"), contextlib.ExitStack() as holds:
        try:
            record = bring_up_first(
                plans,
                watched,
                max_tries=opts.max_tries,
                expires_at=expires_at,
                max_cost_usd=opts.max_cost_usd,
                on_budget=opts.on_budget,
                destroy_on_failure=True,
                lease=True,
                local=opts.local,
            )
            watchdog.hourly_usd = record.plan.option.hourly_usd  # the option that found capacity
            nodes = healed_by_run(record, watched.provider(record.provider).get_nodes(cluster_id))  # this run's
            if remote is None:
                remote = default_remote(record.plan, cluster_secrets(cluster_id))
            if opts.skip_validation:
                rt.emit("validate", message="node validation skipped (--skip-validation)", cluster=cluster_id)
            else:
                _validate(watched, record, remote, nodes, opts)
            job = job_argv(record.plan, command, opts.image)
            healer = None
            if opts.max_replacements:
                from provisioner.lifecycle.heal import Healer, HealOptions, same_layout

                healer = Healer(
                    watched,
                    record,
                    remote,
                    same_layout(record.plan, plans),
                    HealOptions(max_replacements=opts.max_replacements),
                )
                watchdog.metered = healer.spent_cents
            if opts.recover == "anywhere" and healer is not None:
                from provisioner.lifecycle.burst_recover import burst_mover

                mover = burst_mover(watched, record, remote, watchdog, opts, started, expires_at)
                mover.hold_cluster = lambda new_id: holds.enter_context(cluster_lease.hold(new_id, "burst"))
                clusters = mover.run.clusters
            relaunch = _Relaunch(command, opts, remote, mover)
            return _run_job(watched, record, remote, nodes, job, watchdog, opts, healer, relaunch)
        finally:
            for used in (remote, mover.remote if mover is not None else None):  # a moved run's too
                stop = getattr(used, "stop", None)
                if stop is not None:
                    stop()  # a job still streaming: end the local ssh before the nodes go
            _teardown_run(rt, clusters)


def _watched_sleep(rt: Runtime, watchdog: Watchdog) -> Callable[[float], None]:
    def sleep(seconds: float) -> None:
        _check(rt, watchdog)
        rt.sleep(seconds)
        _check(rt, watchdog)

    return sleep


def _check(rt: Runtime, watchdog: Watchdog) -> None:
    if rt.interrupts is not None:
        rt.interrupts.check()
    note = watchdog.warning(rt.now())
    if note:
        rt.emit("budget", message=note)
    why = watchdog.reason(rt.now())
    if why:
        spent = watchdog.spent_usd(rt.now())
        rt.emit(
            "watchdog",
            message=f"stopping: {why}; spent about {cents_text(round_cents(spent))}",
            reason=why,
            spent_usd=spent,
        )
        raise BurstStopped(f"burst stopped: {why}; the cluster was torn down")


def _run_job(
    rt: Runtime,
    record: state.ClusterRecord,
    remote: Remote,
    nodes: list[Node],
    job: tuple[str, ...],
    watchdog: Watchdog,
    opts: BurstOptions,
    healer: Healer | None = None,
    relaunch: _Relaunch | None = None,
) -> int:
    """Stream the job on a worker thread; the main thread keeps the watchdog and signals. With a mover
    (``--recover anywhere``) a move starts the job again on the new cluster (its checkpoint restored)."""
    while True:
        outcome = _run_job_once(rt, record, remote, nodes, job, opts, healer, relaunch)
        if not isinstance(outcome, tuple):
            return outcome
        assert relaunch is not None
        healer = outcome[0]
        record, remote = healer.record, healer.remote  # the new cluster's own key (recover.Mover)
        nodes = healed_by_run(record, rt.provider(record.provider).get_nodes(record.cluster_id))
        if not opts.skip_validation:
            _validate(rt, record, remote, nodes, opts)
        job = job_argv(record.plan, relaunch.command, opts.image)


@dataclass
class _Relaunch:
    command: Sequence[str]
    opts: BurstOptions
    remote: Remote
    mover: Mover | None


def _run_job_once(
    rt: Runtime,
    record: state.ClusterRecord,
    remote: Remote,
    nodes: list[Node],
    job: tuple[str, ...],
    opts: BurstOptions,
    healer: Healer | None,
    relaunch: _Relaunch | None,
) -> int | tuple[Healer]:
    """One launch of the job; its exit status, or ``(new_healer,)`` when the run moved (start it again)."""
    mover = relaunch.mover if relaunch is not None else None
    head = head_target(record, nodes)
    outcome: dict[str, object] = {}
    done = threading.Event()

    def on_line(line: str) -> None:
        rt.emit("job-output", message=line, line=line)

    def work() -> None:
        try:
            outcome["code"] = remote.stream(head, job, on_line)
        except BaseException as exc:  # reported on the main thread
            outcome["error"] = exc
        finally:
            done.set()

    rt.emit(
        "job", message=f"running on {record.plan.head.name}: {' '.join(job)}", cluster=record.cluster_id, argv=list(job)
    )
    worker = threading.Thread(target=work, name="burst-job", daemon=True)
    worker.start()
    next_look = rt.clock() + opts.heal_poll_s
    while not done.wait(0):
        rt.sleep(opts.poll_s)  # watched: raises on TTL, budget or a signal
        if healer is not None and rt.clock() >= next_look:
            if mover is not None:
                moved = mover.step(healer)  # heals in place, or moves the run (raises when it cannot)
                if moved is not healer:
                    return (moved,)
            else:
                healer.step()  # replaces drained, preempted or lost nodes under their names (job requeued)
            next_look = rt.clock() + opts.heal_poll_s
        done.wait(0.05)
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    code: int = int(outcome.get("code", 1))  # type: ignore[call-overload]
    if code != 0 and mover is not None and healer is not None:
        moved = mover.step(healer)  # the job failed with its cluster (srun without requeue): move, run again
        if moved is not healer:
            return (moved,)
    rt.emit("job-done", message=f"job exited {code}", cluster=record.cluster_id, exit_code=code)
    return code


def _teardown_run(rt: Runtime, clusters: Sequence[str]) -> None:
    """``_teardown_all`` for every cluster of the run (a moved run has several), the latest first."""
    failed: list[StackError] = []
    for cluster_id in reversed(list(clusters)):
        try:
            _teardown_all(rt, cluster_id)
        except StackError as exc:
            failed.append(exc)
    if failed:
        raise failed[0]


def _teardown_all(rt: Runtime, cluster_id: str) -> None:
    """Delete the run's nodes of the cluster on each provider a purchase was tried on; never interrupted."""
    shield = rt.interrupts.shielded() if rt.interrupts is not None else None
    if shield is not None:
        shield.__enter__()
    try:
        record = state.load_record(cluster_id)
        # The record's provider first: tear_down follows the record while there is one.
        providers = [record.provider] if record is not None else []
        providers += sorted(rt.touched - set(providers))
        left: list[str] = []
        for name in providers:
            try:
                # Without a record (a failed bring-up already tore down) a provider that lists nothing
                # live is skipped: a second "deleting 0 node(s)" after the teardown only confused.
                if (record is not None and name == record.provider) or live(rt.provider(name).get_nodes(cluster_id)):
                    tear_down(cluster_id, rt, provider=name)
                remaining = live(rt.provider(name).get_nodes(cluster_id))
                if record is not None:  # another run's node of the name is not this run's to delete (down names it)
                    remaining = of_run(record, remaining)
                left += [f"{node.name} ({node.id}) on {name}" for node in remaining]
            except ProvisionerError as exc:
                left.append(f"{name}: {exc}")
        if left:
            raise StackError(
                f"teardown of {cluster_id} incomplete: {'; '.join(left)}; remove with: "
                f"provisioner down {cluster_id} or provisioner gc --yes"
            )
    finally:
        if shield is not None:
            shield.__exit__(None, None, None)


__all__ = ["BurstOptions", "BurstStopped", "Watchdog", "job_argv", "k8s_job", "run_burst"]
