"""``provisioner node watch``: the health watch every node runs while the cluster lives.

Every ``interval_s`` (default 30) it runs ``check_node`` with what ``node check --no-burnin``
reads minus DCGM (a diag is minutes of GPU time, not a 30 s probe): the same checks, codes and
severities, because it is the same function. The kernel log is trimmed to the lines after the
last look (``KernelCursor``), so an XID is judged once, when it appears.

On a ``failed`` finding it takes the node out of service through the scheduler with the
finding's code in the reason (``scontrol update NodeName=N State=DRAIN Reason="provisioner-watch
xid.79: ..."``; Kubernetes: cordon + taint + annotation), by the same rule as ``validate``
(``plan_drains``): never the last node still in service. Such a refusal is not silent: it is in
the report, on stderr (the journal) and in the exit code of ``--once``.

Where the provider announces a spot reclaim (AWS: ``spot/instance-action`` in the instance
metadata, about 2 minutes ahead; GCP: ``instance/preempted``, about 30 s), the watch polls it
every ``spot_poll_s`` and, on a notice, tells the jobs on this node to checkpoint now (Slurm:
``scancel --signal=USR1`` to each job step on the node; every control plane: the file
``CHECKPOINT_NOW`` with the notice) and drains the node before the provider takes it; the last
node is drained too (it goes anyway), with a loud message.

Each look writes ``<report_dir>/<node>.json`` (the node report, the status, what was done), which
the controller (``provisioner watch``) and people read. Everything reaches the outside through
``Host`` (commands, clock, sleep) and an injectable metadata fetch, so tests need no node.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from provisioner.providers.descriptor import InstanceMetadata
from provisioner.providers.registry import facts
from provisioner.termtext import say
from provisioner.untrusted import loads_bounded
from provisioner.validation.actions import (
    Candidate,
    k8s_cordon_commands,
    k8s_out_of_service,
    plan_drains,
    slurm_drain_commands,
    slurm_drained,
    slurm_node_states,
    slurm_out_of_service,
)
from provisioner.validation.model import Action, Finding, NodeReport, Severity
from provisioner.validation.node import KERNEL_LOG_COMMANDS, CheckOptions, check_node
from provisioner.validation.runner import CommandResult, Host, Runner

REASON_PREFIX = "provisioner-watch"
"""Drain reasons the watch sets start with this, then the finding's code (what the controller reads)."""
CHECKPOINT_NOW = "/run/provisioner/checkpoint-now"
STATE_FILE = "watch-state.json"
SPOT_CODE = "spot.interruption"


def spot_providers() -> dict[str, InstanceMetadata]:
    """The providers whose spot VMs can hear of a reclaim, and where (each package's ``FACTS.metadata``)."""
    return {name: found.metadata for name, found in facts().items() if found.metadata}


Fetch = Callable[[str, str, dict[str, str]], tuple[int, str]]
"""(method, url, headers) -> (HTTP status, body); status 0 when nothing answered."""


@dataclass(frozen=True)
class WatchConfig:
    node: str
    via: str = "slurm"  # slurm | k8s | none
    expect_gpus: int | None = None
    expect_model: str | None = None
    spot: str | None = None  # a provider of spot_providers(), or None
    metadata_url: str | None = None  # None: the provider's own metadata service
    report_dir: Path = Path("/var/lib/provisioner/health")
    interval_s: float = 30.0
    spot_poll_s: float = 5.0
    checkpoint_file: Path = Path(CHECKPOINT_NOW)


@dataclass
class WatchState:
    """What earlier looks saw; kept in ``<report_dir>/watch-state.json`` across restarts."""

    kernel_last_line: str | None = None
    drained: bool = False
    reported: list[str] = field(default_factory=list)
    spot_noticed: bool = False

    @classmethod
    def load(cls, path: Path) -> WatchState:
        try:
            data = loads_bounded(path.read_text(encoding="utf-8"))
            return cls(
                **{key: data[key] for key in ("kernel_last_line", "drained", "reported", "spot_noticed") if key in data}
            )
        except (OSError, ValueError, TypeError):
            return cls()

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.__dict__, sort_keys=True), encoding="utf-8")
        os.replace(tmp, path)


@dataclass(frozen=True)
class Look:
    """What one look found and did."""

    report: NodeReport
    new_failed: tuple[Finding, ...] = ()
    drained: bool = False
    refused: str | None = None
    commands: tuple[tuple[tuple[str, ...], int], ...] = ()

    @property
    def exit_code(self) -> int:
        return self.report.status.exit_code


def since_last_look(host: Host, state: WatchState) -> Host:
    """``host`` whose kernel-log reads answer only the lines after ``state.kernel_last_line``
    (all of them when that line is gone, e.g. the ring buffer wrapped), and move the cursor."""

    def run(args: Sequence[str], *, timeout_s: float = 60.0) -> CommandResult:
        result = host.run(args, timeout_s=timeout_s)
        if tuple(args) not in KERNEL_LOG_COMMANDS or not result.ok:
            return result
        lines = result.stdout.splitlines()
        start = 0
        if state.kernel_last_line is not None:
            for index in range(len(lines) - 1, -1, -1):
                if lines[index] == state.kernel_last_line:
                    start = index + 1
                    break
        if lines:
            state.kernel_last_line = lines[-1]
        return replace(result, stdout="\n".join(lines[start:]) + ("\n" if lines[start:] else ""))

    return replace(host, run=run)


def reason_for(finding: Finding) -> str:
    """The scheduler's drain reason: prefix, code, message (one line, 200 characters at most)."""
    text = f"{REASON_PREFIX} {finding.code}: {finding.message}"
    return " ".join(text.split())[:200]


def code_of_reason(reason: str) -> str | None:
    """The finding code in a drain reason the watch set, else None (drained by someone else)."""
    words = reason.split()
    if len(words) >= 2 and words[0] == REASON_PREFIX:
        return words[1].rstrip(":")
    return None


Ran = list[tuple[tuple[str, ...], int]]
"""Commands run, each with its exit status."""


def _drain(
    host: Host, config: WatchConfig, finding: Finding, *, force: bool
) -> tuple[bool, str | None, list[tuple[tuple[str, ...], int]]]:
    """Drain this node unless it is the last in service (and not ``force``). (drained, refusal, commands)."""
    run: Runner = host.run
    if config.via == "slurm":
        states = slurm_node_states(run)
        names, out, drained = list(states), slurm_out_of_service(states), slurm_drained(states)
        build = slurm_drain_commands
    elif config.via == "k8s":
        listing = run(("kubectl", "get", "nodes", "-o", "name"), timeout_s=30)
        names = [line.split("/", 1)[-1].strip() for line in listing.stdout.splitlines() if line.strip()]
        out = drained = k8s_out_of_service(run)
        build = k8s_cordon_commands
    else:
        return False, "no scheduler on this node (control plane none): nothing to drain through", []
    plan = plan_drains(
        [Candidate(config.node, finding.code, int(finding.severity))],
        names or [config.node],
        out,
        already_drained=drained,
        force=force,
    )
    if plan.refused:
        return False, plan.refusal_message(), []
    done: Ran = []
    for command in build(config.node, reason_for(finding)) if plan.drain else []:
        done.append((command, run(command, timeout_s=30).returncode))
    return bool(plan.drain) or config.node in drained, None, done


def watch_once(
    host: Host, config: WatchConfig, state: WatchState, now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)
) -> Look:
    """One look: check, act on new failed findings, write the report. Never raises for what it finds."""
    options = CheckOptions(
        node=config.node,
        expect_gpus=config.expect_gpus,
        expect_model=config.expect_model,
        dcgm_level=None,
        burnin=False,
    )
    report = check_node(since_last_look(host, state), options)
    failed = [f for f in report.findings if f.severity is Severity.FAILED]
    new = tuple(f for f in failed if f.code not in state.reported)
    look = Look(report, new)
    if new and not state.drained:
        drained, refused, commands = _drain(host, config, new[0], force=False)
        state.drained = drained
        look = replace(look, drained=drained, refused=refused, commands=tuple((tuple(c), code) for c, code in commands))
    state.reported = sorted({*state.reported, *(f.code for f in failed)})
    write_report(config, look, now())
    return look


def write_report(config: WatchConfig, look: Look, when: dt.datetime) -> Path:
    data = json.loads(look.report.to_json())
    data.update(
        {
            "checked_at": when.isoformat(),
            "drained": look.drained,
            "refused": look.refused,
            "new_failed": [f.code for f in look.new_failed],
        }
    )
    path = config.report_dir / f"{config.node}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def http_fetch(method: str, url: str, headers: dict[str, str]) -> tuple[int, str]:
    """The metadata service, one short request; (0, "") when nothing answers."""
    import httpx

    try:
        response = httpx.request(method, url, headers=headers, timeout=2.0, trust_env=False)
    except httpx.HTTPError:
        return 0, ""
    return response.status_code, response.text


def spot_notice(provider: str, fetch: Fetch, base_url: str | None = None) -> str | None:
    """The provider's reclaim notice as one line, or None. AWS IMDSv2 (a token, then
    ``spot/instance-action``: 404 until a reclaim is scheduled); GCP ``instance/preempted``."""
    notice = spot_providers()[provider]
    base = (base_url or notice.url).rstrip("/")
    if notice.protocol == "imds":
        status, token = fetch("PUT", f"{base}/latest/api/token", {"X-aws-ec2-metadata-token-ttl-seconds": "60"})
        headers = {"X-aws-ec2-metadata-token": token.strip()} if status == 200 else {}
        status, body = fetch("GET", f"{base}/latest/meta-data/spot/instance-action", headers)
        if status != 200:
            return None
        with contextlib.suppress(ValueError, AttributeError):
            action = loads_bounded(body)
            return f"AWS spot {action.get('action', 'interruption')} at {action.get('time', '?')}"
        return "AWS spot interruption notice"
    status, body = fetch("GET", f"{base}/computeMetadata/v1/instance/preempted", {"Metadata-Flavor": "Google"})
    return "GCP preemption (about 30 s left)" if status == 200 and body.strip().upper() == "TRUE" else None


def on_spot_notice(host: Host, config: WatchConfig, state: WatchState, notice: str) -> Look:
    """Tell the jobs to checkpoint (file + SIGUSR1 to Slurm job steps on this node), then drain."""
    checkpoint_file = config.checkpoint_file
    checkpoint_file.parent.mkdir(parents=True, exist_ok=True)
    checkpoint_file.write_text(json.dumps({"node": config.node, "notice": notice}) + "\n", encoding="utf-8")
    commands: list[tuple[tuple[str, ...], int]] = []
    if config.via == "slurm":
        jobs = host.run(("squeue", "-h", "-w", config.node, "-o", "%A"), timeout_s=30)
        for job in sorted({word for word in jobs.stdout.split() if word.isdigit()}) if jobs.ok else []:
            command = ("scancel", "--signal=USR1", job)
            commands.append((command, host.run(command, timeout_s=30).returncode))
    finding = Finding(
        code=SPOT_CODE, severity=Severity.FAILED, action=Action.REPLACE_NODE, message=f"{notice}; checkpoint now"
    )
    drained, refused, drains = _drain(host, config, finding, force=True)
    state.drained = state.drained or drained
    state.spot_noticed = True
    state.reported = sorted({*state.reported, SPOT_CODE})
    report = NodeReport(node=config.node, findings=[finding])
    look = Look(report, (finding,), drained, refused, (*commands, *((tuple(c), r) for c, r in drains)))
    say(
        f"node watch: {config.node}: {notice}; jobs told to checkpoint; "
        f"{'drained' if drained else 'not drained: ' + str(refused)}",
        err=True,
        flush=True,
    )
    return look


def run_watch(
    host: Host,
    config: WatchConfig,
    *,
    fetch: Fetch = http_fetch,
    once: bool = False,
    stop: Callable[[], bool] = lambda: False,
) -> int:
    """The watch loop (``once``: one look, its exit code). Spot notices are polled between looks."""
    state_path = config.report_dir / STATE_FILE
    state = WatchState.load(state_path)
    code = 0
    while True:
        look = watch_once(host, config, state)
        _say(config, look)
        code = look.exit_code
        state.save(state_path)
        if once or stop():
            return code
        deadline = host.clock() + config.interval_s
        while host.clock() < deadline and not stop():
            if config.spot and not state.spot_noticed:
                notice = spot_notice(config.spot, fetch, config.metadata_url)
                if notice:
                    write_report(config, on_spot_notice(host, config, state, notice), dt.datetime.now(dt.UTC))
                    state.save(state_path)
            host.sleep(min(config.spot_poll_s if config.spot else config.interval_s, max(deadline - host.clock(), 0.0)))


def _say(config: WatchConfig, look: Look) -> None:
    for finding in look.new_failed:
        say(f"node watch: {config.node}: FAILED {finding.code}: {finding.message}", err=True, flush=True)
    if look.refused:
        say(f"node watch: {config.node}: NOT drained: {look.refused}", err=True, flush=True)
    elif look.drained and look.commands:
        say(f"node watch: {config.node}: drained ({look.new_failed[0].code})", err=True, flush=True)


__all__ = [
    "CHECKPOINT_NOW",
    "REASON_PREFIX",
    "SPOT_CODE",
    "Look",
    "WatchConfig",
    "WatchState",
    "code_of_reason",
    "http_fetch",
    "on_spot_notice",
    "reason_for",
    "run_watch",
    "since_last_look",
    "spot_notice",
    "spot_providers",
    "watch_once",
]
