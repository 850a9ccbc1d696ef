"""``provisioner node check``: gather everything on one node and judge it.

Order: nvidia-smi (XML and query CSV) -> kernel-log XIDs -> NVLink -> IB/EFA -> DCGM ->
burn-in (sampling nvidia-smi under load) -> verdicts. Every command goes through
``host.run``; a missing ``nvidia-smi`` is a failed node (``gpu.smi``), not a traceback.
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Callable
from dataclasses import dataclass, field

from provisioner.validation.burnin import BurnInConfig, run_burnin
from provisioner.validation.checks import canonical_model, check_gpus
from provisioner.validation.fabric import (
    NVLINK_ARGS,
    check_dcgm,
    check_fabric,
    check_nvlink,
    dcgm_args,
    nvlink_expected,
)
from provisioner.validation.model import Action, BurnInResult, Finding, NodeReport, Severity
from provisioner.validation.nvsmi import (
    QUERY_ARGS,
    XML_ARGS,
    GpuState,
    ParseError,
    merge,
    parse_query_csv,
    parse_smi_xml,
)
from provisioner.validation.reference import judge_burnin
from provisioner.validation.runner import Host
from provisioner.validation.xid import parse_kernel_log, xid_findings

KERNEL_LOG_COMMANDS = (("dmesg", "--notime"), ("journalctl", "-k", "-b", "--no-pager", "-o", "cat"))


@dataclass(frozen=True)
class CheckOptions:
    """What to expect and what to run. ``None`` expectations are not checked."""

    node: str | None = None
    expect_gpus: int | None = None
    expect_model: str | None = None
    expect_fabric: str | None = None  # infiniband | roce | efa | ethernet
    expect_nvlink: bool | None = None  # None: auto (multi-GPU SXM parts)
    dcgm_level: int | None = 1  # None: do not run DCGM
    burnin: bool = True
    allow_unjudged: bool = False  # a model with no reference or datasheet: info instead of degraded
    burnin_config: BurnInConfig = field(default_factory=BurnInConfig)


def _read_smi(host: Host) -> tuple[list[GpuState], list[Finding]]:
    xml = host.run(XML_ARGS, timeout_s=60)
    if xml.returncode == 127:
        return [], [
            Finding(
                code="gpu.smi",
                severity=Severity.FAILED,
                action=Action.REPLACE_NODE,
                message="nvidia-smi is not installed (no NVIDIA driver)",
            )
        ]
    if not xml.ok:
        return [], [
            Finding(
                code="gpu.smi",
                severity=Severity.FAILED,
                action=Action.REBOOT,
                message=f"nvidia-smi failed: {xml.brief()}",
            )
        ]
    try:
        states = parse_smi_xml(xml.stdout)
    except ParseError as exc:
        return [], [Finding(code="gpu.smi", severity=Severity.FAILED, action=Action.REBOOT, message=str(exc))]
    query = host.run(QUERY_ARGS, timeout_s=60)
    if query.ok:
        with contextlib.suppress(ParseError):  # the XML view already has everything the checks need
            states = merge(states, parse_query_csv(query.stdout))
    return states, []


def _kernel_log(host: Host) -> tuple[str, list[Finding]]:
    for args in KERNEL_LOG_COMMANDS:
        result = host.run(args, timeout_s=30)
        if result.ok:
            return result.stdout, []
    return "", [
        Finding(
            code="xid.unreadable",
            severity=Severity.WARN,
            message="kernel log unreadable (dmesg and journalctl refused); XIDs not checked",
        )
    ]


def _sampler(host: Host) -> tuple[Callable[[], None], list[list[GpuState]]]:
    samples: list[list[GpuState]] = []

    def probe() -> None:
        result = host.run(QUERY_ARGS, timeout_s=10)
        if result.ok:
            with contextlib.suppress(ParseError):
                samples.append(parse_query_csv(result.stdout))

    return probe, samples


def check_node(host: Host, options: CheckOptions, burnin: Callable[..., BurnInResult] = run_burnin) -> NodeReport:
    """Run every check on this node. Blocks (about 70 s with the default burn-in). Never raises
    for what it finds: tool failures become findings in the report."""
    started = host.clock()
    states, findings = _read_smi(host)
    log_text, log_findings = _kernel_log(host)
    findings += log_findings
    bus_to_index = {state.bus_id: state.index for state in states if state.bus_id}
    findings += xid_findings(parse_kernel_log(log_text), bus_to_index)
    names = [state.name or "" for state in states]
    expect_nvlink = options.expect_nvlink if options.expect_nvlink is not None else nvlink_expected(names)
    if expect_nvlink:
        findings += check_nvlink(host.run(NVLINK_ARGS, timeout_s=30), len(states), True)
    findings += check_fabric(host, options.expect_fabric)
    if options.dcgm_level is not None and states:
        findings += check_dcgm(host.run(dcgm_args(options.dcgm_level), timeout_s=600), options.dcgm_level)
    result: BurnInResult | None = None
    under_load: list[GpuState] = []
    if options.burnin and states and not any(f.code == "gpu.smi" for f in findings):
        probe, samples = _sampler(host)
        result = burnin(options.burnin_config, clock=host.clock, probe=probe)
        under_load = samples[-1] if samples else []
        findings += judge_burnin(result, names[0] if names else None, allow_unjudged=options.allow_unjudged)
    elif not options.burnin:
        result = BurnInResult(skipped="disabled (--no-burnin)")
        findings += judge_burnin(result, None)
    findings += check_gpus(
        states, expect_gpus=options.expect_gpus, expect_model=options.expect_model, under_load=under_load
    )
    return NodeReport(
        node=options.node or socket.gethostname().split(".")[0],
        gpu_model=canonical_model(names[0]) if names and names[0] else None,
        gpu_name=names[0] if names and names[0] else None,
        gpu_count=len(states),
        findings=findings,
        burnin=result,
        duration_s=round(host.clock() - started, 2),
    )


__all__ = ["KERNEL_LOG_COMMANDS", "CheckOptions", "check_node"]
