"""Node validation on the real H100 captures (tests/fixtures/gpu) and their degraded copies.

The healthy captures must classify healthy; each degraded copy must classify as exactly the
fault it carries. Checks, straggler detection, burn-in verdicts, drain planning and the
cluster aggregation are run through fakes (a FakeRunner answering with the captures, a fake
clock), never a GPU.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from provisioner.errors import ProvisionerError, ValidationFailedError
from provisioner.validation.actions import (
    Candidate,
    apply_drains,
    plan_drains,
    slurm_drained,
    slurm_node_states,
    slurm_out_of_service,
)
from provisioner.validation.burnin import BurnInConfig, busbw_gbps, run_burnin
from provisioner.validation.checks import canonical_model, check_clock_events, check_gpus
from provisioner.validation.cluster import (
    ClusterReport,
    Target,
    mark_stragglers,
    plan_cluster_drains,
    require_healthy,
    validate_cluster,
    with_actions,
)
from provisioner.validation.fabric import check_dcgm, check_fabric, check_nvlink
from provisioner.validation.model import (
    EXIT_DEGRADED,
    EXIT_FAILED,
    BurnInResult,
    Finding,
    GpuMetrics,
    NodeReport,
    Severity,
    Status,
)
from provisioner.validation.node import CheckOptions, check_node
from provisioner.validation.nvsmi import (
    QUERY_ARGS,
    XML_ARGS,
    ParseError,
    decode_clock_events,
    parse_query_csv,
    parse_smi_xml,
)
from provisioner.validation.reference import judge_burnin
from provisioner.validation.runner import CommandResult, FakeClock, FakeRunner, Host
from provisioner.validation.straggler import find_stragglers
from provisioner.validation.xid import XID_TABLE, parse_kernel_log, xid_findings

FIXTURES = Path(__file__).parent / "fixtures" / "gpu"
IDLE = FIXTURES / "h100-sxm-80gb"
LOAD = FIXTURES / "h100-sxm-80gb-under-load"
DEGRADED = FIXTURES / "degraded"
BUS = {"00000000:00:06.0": 0}


def capture(path: Path) -> str:
    """A capture's tool output, without the ``$ command`` and ``[exit 0]`` lines the capture added."""
    lines = path.read_text().splitlines()
    return "\n".join(line for line in lines if not line.startswith(("$ ", "[exit "))) + "\n"


def problems(findings: Sequence[Finding]) -> set[str]:
    return {f.code for f in findings if f.severity >= Severity.DEGRADED}


# --- parsers on the real captures --------------------------------------------------------------


def test_xml_capture_parses_to_the_values_nvidia_smi_printed() -> None:
    (gpu,) = parse_smi_xml((IDLE / "nvidia-smi-q.xml").read_text())
    assert gpu.name == "NVIDIA H100 80GB HBM3"
    assert gpu.bus_id == "00000000:00:06.0"
    assert (gpu.pcie_gen_current, gpu.pcie_gen_max, gpu.pcie_width_current, gpu.pcie_width_max) == (5, 5, 16, 16)
    assert gpu.ecc_enabled is True and gpu.persistence_mode is True
    assert (gpu.ecc_volatile_uncorrectable, gpu.remap_pending, gpu.remap_failure) == (0, False, False)
    assert gpu.retired_pages_pending is None  # "N/A" on Hopper: not a guess
    assert gpu.clock_event_mask == 0x1  # idle
    assert (gpu.power_limit_w, gpu.sm_clock_max_mhz) == (700.0, 1980.0)


def test_query_csv_capture_parses_and_agrees_with_the_xml() -> None:
    (row,) = parse_query_csv(capture(IDLE / "nvidia-smi-query.csv"))
    (xml,) = parse_smi_xml((IDLE / "nvidia-smi-q.xml").read_text())
    assert row.uuid == xml.uuid and row.bus_id == xml.bus_id
    assert row.clock_event_mask == 0x1
    assert (row.pcie_gen_current, row.pcie_width_current) == (5, 16)
    assert (row.ecc_volatile_uncorrectable, row.remap_pending, row.remap_failure) == (0, False, False)


def test_under_load_captures_show_the_sw_power_cap_only() -> None:
    (gpu,) = parse_smi_xml((LOAD / "nvidia-smi-q-under-load.xml").read_text())
    assert gpu.clock_event_mask == 0x4 and decode_clock_events(0x4) == ["sw_power_cap"]
    assert gpu.power_draw_w is not None and gpu.power_draw_w > 690
    rows = parse_query_csv((LOAD / "query-under-load.csv").read_text())
    masks = {row.clock_event_mask for row in rows}
    assert masks == {0x1, 0x4}
    assert len(rows) == 83


def test_truncated_xml_and_headerless_csv_are_parse_errors() -> None:
    text = (IDLE / "nvidia-smi-q.xml").read_text()
    with pytest.raises(ParseError):
        parse_smi_xml(text[: len(text) // 2])
    with pytest.raises(ParseError):
        parse_query_csv("0, GPU-x, NVIDIA H100\n")


# --- checks: healthy captures healthy, each degraded copy exactly its fault --------------------


@pytest.mark.parametrize("xml", [IDLE / "nvidia-smi-q.xml", LOAD / "nvidia-smi-q-under-load.xml"], ids=["idle", "load"])
def test_real_captures_classify_healthy(xml: Path) -> None:
    findings = check_gpus(parse_smi_xml(xml.read_text()), expect_gpus=1, expect_model="H100")
    assert findings == []


def test_the_sustained_load_readings_are_all_healthy() -> None:
    rows = parse_query_csv((LOAD / "query-under-load.csv").read_text())
    assert [f for row in rows for f in check_clock_events(row, under_load=True)] == []


@pytest.mark.parametrize(
    ("name", "code", "status"),
    [
        ("ecc-error.xml", "ecc.volatile_uncorrectable", Status.FAILED),
        ("remap-failure.xml", "remap.failure", Status.FAILED),
        ("pcie-gen3.xml", "pcie.gen_below_max", Status.DEGRADED),
        ("thermal-throttle-under-load.xml", "clock_event.hw_thermal_slowdown", Status.FAILED),
    ],
)
def test_each_degraded_copy_classifies_as_its_fault(name: str, code: str, status: Status) -> None:
    findings = check_gpus(parse_smi_xml((DEGRADED / name).read_text()), expect_gpus=1, expect_model="H100")
    assert problems(findings) == {code}
    report = NodeReport(node="n", findings=findings)
    assert report.status is status
    assert all(f.gpu == 0 for f in findings if f.code == code)


def test_thermal_csv_sampled_under_load_is_found_and_the_power_cap_is_not() -> None:
    rows = parse_query_csv((DEGRADED / "query-under-load-thermal.csv").read_text())
    idle = parse_smi_xml((IDLE / "nvidia-smi-q.xml").read_text())
    findings = check_gpus(idle, expect_gpus=1, under_load=rows[-1:])
    assert problems(findings) == {"clock_event.hw_thermal_slowdown"}
    assert "under load" in findings[0].message and "0x44" in findings[0].message


def test_inventory_mismatch_is_failed() -> None:
    states = parse_smi_xml((IDLE / "nvidia-smi-q.xml").read_text())
    assert problems(check_gpus(states, expect_gpus=8)) == {"gpu.count"}
    assert problems(check_gpus(states, expect_model="A100")) == {"gpu.model"}
    assert problems(check_gpus(states, expect_model="H100")) == set()


def test_persistence_off_and_sw_thermal_are_degraded_not_failed() -> None:
    text = (
        (IDLE / "nvidia-smi-q.xml")
        .read_text()
        .replace("<persistence_mode>Enabled</persistence_mode>", "<persistence_mode>Disabled</persistence_mode>")
    )
    text = text.replace(
        "<clocks_event_reason_sw_thermal_slowdown>Not Active<", "<clocks_event_reason_sw_thermal_slowdown>Active<"
    )
    findings = check_gpus(parse_smi_xml(text))
    assert problems(findings) == {"persistence.off", "clock_event.sw_thermal_slowdown"}
    assert NodeReport(node="n", findings=findings).status is Status.DEGRADED


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("NVIDIA H100 80GB HBM3", "H100"),
        ("NVIDIA H100 PCIe", "H100"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA GeForce RTX 4090", "RTX4090"),
        ("NVIDIA L40S", "L40S"),
        ("NVIDIA H200", "H200"),
    ],
)
def test_canonical_model(name: str, model: str) -> None:
    assert canonical_model(name) == model


# --- XIDs ----------------------------------------------------------------------------------------


def test_xid79_in_the_kernel_log_fails_the_gpu_on_that_bus() -> None:
    events = parse_kernel_log((DEGRADED / "dmesg-xid79.txt").read_text())
    assert [(e.xid, e.bus_id) for e in events] == [(79, "0000:00:06")]
    findings = xid_findings(events, BUS)
    assert problems(findings) == {"xid.79"}
    assert findings[0].gpu == 0 and findings[0].action.value == "replace_node"


def test_application_xids_warn_and_a_clean_log_finds_nothing() -> None:
    app = xid_findings(parse_kernel_log((DEGRADED / "dmesg-app-xid13.txt").read_text()), BUS)
    assert {(f.code, f.severity, f.value) for f in app} == {("xid.13", Severity.WARN, 2), ("xid.43", Severity.WARN, 1)}
    assert xid_findings(parse_kernel_log((DEGRADED / "dmesg-clean.txt").read_text()), BUS) == []


def test_xid_table_covers_the_issue_list_with_an_action_each() -> None:
    required = {13, 31, 43, 45, 48, 61, 62, 63, 64, 74, 79, 92, 94, 95, 119, 120}
    assert required <= set(XID_TABLE)
    failed = {x for x, rule in XID_TABLE.items() if rule.severity is Severity.FAILED}
    assert {48, 64, 74, 79, 95, 119, 120} <= failed
    assert {13, 31, 43, 45}.isdisjoint(failed) and {63, 94}.isdisjoint(failed)


def test_unknown_xid_is_a_warning_not_ignored() -> None:
    log = "[ 1.0] NVRM: Xid (PCI:0000:00:06): 999, pid=1, something new\n"
    (finding,) = xid_findings(parse_kernel_log(log), BUS)
    assert (finding.code, finding.severity) == ("xid.999", Severity.WARN)


# --- NVLink, fabric, DCGM ------------------------------------------------------------------------


NVLINK_OK = (
    "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-a)\n\t Link 0: 26.562 GB/s\n\t Link 1: 26.562 GB/s\n"
    "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-b)\n\t Link 0: 26.562 GB/s\n\t Link 1: <inactive>\n"
)


def test_nvlink_inactive_link_is_degraded_and_missing_gpu_links_failed() -> None:
    findings = check_nvlink(CommandResult(0, NVLINK_OK), gpu_count=3, expected=True)
    assert {(f.code, f.gpu, f.severity) for f in findings} == {
        ("nvlink.inactive_links", 1, Severity.DEGRADED),
        ("nvlink.missing", 2, Severity.FAILED),
    }
    assert check_nvlink(CommandResult(0, NVLINK_OK), gpu_count=2, expected=False) == []


def _sysfs(root: Path, devices: dict[str, list[str]]) -> Host:
    for device, states in devices.items():
        for port, state in enumerate(states, start=1):
            path = root / "sys/class/infiniband" / device / "ports" / str(port)
            path.mkdir(parents=True)
            (path / "state").write_text(f"{4 if state == 'ACTIVE' else 1}: {state}\n")
    return Host(run=FakeRunner(), root=root)


def test_fabric_presence(tmp_path: Path) -> None:
    host = _sysfs(tmp_path, {"mlx5_0": ["ACTIVE"], "mlx5_1": ["DOWN"], "efa_0": ["ACTIVE"]})
    infiniband = check_fabric(host, "infiniband")
    assert {(f.code, f.severity) for f in infiniband} == {("fabric.ports_down", Severity.DEGRADED)}
    assert {(f.code, f.severity) for f in check_fabric(host, "efa")} == {("fabric.ok", Severity.INFO)}
    empty = Host(run=FakeRunner(), root=tmp_path / "nothing")
    assert problems(check_fabric(empty, "efa")) == {"fabric.missing"}
    assert check_fabric(empty, "ethernet") == [] and check_fabric(empty, None) == []


def test_dcgm_results() -> None:
    document = {
        "DCGM GPU Diagnostic": {
            "test_categories": [
                {
                    "category": "Hardware",
                    "tests": [
                        {
                            "name": "GPU Memory",
                            "results": [
                                {"gpu_id": "0", "status": "Pass"},
                                {"gpu_id": "3", "status": "Fail", "warnings": "DBE detected"},
                            ],
                        },
                        {"name": "Diagnostic", "results": [{"gpu_id": "1", "status": "Warn"}]},
                    ],
                }
            ]
        }
    }
    findings = check_dcgm(CommandResult(0, json.dumps(document)), level=1)
    assert {(f.code, f.gpu, f.severity) for f in findings} == {
        ("dcgm.gpu_memory", 3, Severity.FAILED),
        ("dcgm.diagnostic", 1, Severity.WARN),
    }
    assert "DBE detected" in findings[0].message
    (skipped,) = check_dcgm(CommandResult(127, "", "dcgmi: command not found"), level=1)
    assert (skipped.code, skipped.severity) == ("dcgm.skipped", Severity.INFO)
    (broken,) = check_dcgm(CommandResult(255, "Error: unable to connect to host engine"), level=1)
    assert broken.severity is Severity.WARN


# --- references and burn-in verdicts ---------------------------------------------------------------


def _reference_run(gpus: int = 1, **override: float) -> BurnInResult:
    """What the check itself measured on a healthy H100 SXM (node-check-reports/h100-healthy-60s.json),
    on ``gpus`` identical GPUs; ``override`` changes the last GPU's figures."""
    report = json.loads((FIXTURES / "node-check-reports" / "h100-healthy-60s.json").read_text())
    figures = {k: v for k, v in report["burnin"]["gpus"][0].items() if k != "index"}
    metrics = [GpuMetrics(index=i, **figures) for i in range(gpus)]
    for key, value in override.items():
        metrics[-1] = metrics[-1].model_copy(update={key: value})
    return BurnInResult(gpus=metrics, sustained_windows_tflops=report["burnin"]["sustained_windows_tflops"])


def test_the_reference_run_itself_passes() -> None:
    assert judge_burnin(_reference_run(8), "NVIDIA H100 80GB HBM3") == []


def test_sustained_is_compared_with_sustained_not_with_burst() -> None:
    # 670 TFLOP/s sustained is judged against the sustained reference (669.9), not a burst figure.
    run = _reference_run(1, matmul_sustained_tflops=670.0)
    assert judge_burnin(run, "NVIDIA H100 80GB HBM3") == []
    slow = judge_burnin(_reference_run(1, matmul_sustained_tflops=580.0), "NVIDIA H100 80GB HBM3")
    assert {(f.code, f.severity) for f in slow} == {("burnin.matmul_sustained", Severity.DEGRADED)}
    assert slow[0].threshold == pytest.approx(0.90 * 669.9, abs=0.01)


@pytest.mark.parametrize(
    ("metric", "value", "code", "severity"),
    [
        ("matmul_burst_tflops", 600.0, "burnin.matmul_burst", Severity.DEGRADED),
        ("matmul_burst_tflops", 500.0, "burnin.matmul_burst", Severity.FAILED),
        ("hbm_copy_tbps", 2.7, "burnin.hbm_copy", Severity.DEGRADED),
        ("hbm_copy_tbps", 2.4, "burnin.hbm_copy", Severity.FAILED),
        ("h2d_gbps", 12.0, "burnin.h2d", Severity.FAILED),
    ],
)
def test_bands(metric: str, value: float, code: str, severity: Severity) -> None:
    findings = judge_burnin(_reference_run(1, **{metric: value}), "NVIDIA H100 80GB HBM3")
    assert {(f.code, f.severity) for f in findings} == {(code, severity)}


def test_one_slow_gpu_among_eight_is_a_straggler_even_above_the_band() -> None:
    # 94 % of reference passes the band, but it is 6 % under seven identical peers.
    findings = judge_burnin(_reference_run(8, matmul_sustained_tflops=0.94 * 669.9), "NVIDIA H100 80GB HBM3")
    assert {(f.code, f.gpu, f.severity) for f in findings} == {("straggler.gpu.matmul_sustained", 7, Severity.DEGRADED)}


def test_nccl_band_applies_to_eight_gpus() -> None:
    run = _reference_run(8).model_copy(update={"nccl_busbw_gbps": 250.0, "nccl_gpus": 8})
    assert problems(judge_burnin(run, "NVIDIA H100 80GB HBM3")) == {"burnin.nccl_busbw"}
    ok = run.model_copy(update={"nccl_busbw_gbps": 365.0})
    assert judge_burnin(ok, "NVIDIA H100 80GB HBM3") == []


def test_unknown_model_is_unjudged_and_compared_with_peers() -> None:
    findings = judge_burnin(_reference_run(4, matmul_sustained_tflops=1.0), "NVIDIA Tesla T4")
    assert problems(findings) == {"burnin.unjudged", "straggler.gpu.matmul_sustained"}


def test_skipped_burnin_is_info() -> None:
    (finding,) = judge_burnin(BurnInResult(skipped="torch is not installed"), "NVIDIA H100 80GB HBM3")
    assert (finding.code, finding.severity) == ("burnin.skipped", Severity.INFO)


def test_busbw_formula() -> None:
    assert busbw_gbps(8 * 10**9, 1.0, 8) == pytest.approx(14.0)
    assert busbw_gbps(10**9, 1.0, 1) == 0.0


def test_burnin_without_cuda_is_skipped() -> None:
    class NoCuda:
        class cuda:  # torch's module name
            @staticmethod
            def is_available() -> bool:
                return False

    assert run_burnin(torch_module=NoCuda()).skipped == "no CUDA device visible to torch"
    assert BurnInConfig().sustained_s >= 60


# --- straggler detection -----------------------------------------------------------------------------


def test_straggler_is_relative_to_the_median() -> None:
    values = {f"n{i}": v for i, v in enumerate([671, 668, 673, 669, 670, 672, 598, 667])}
    (straggler,) = find_stragglers(values)
    assert straggler.name == "n6" and straggler.shortfall == pytest.approx(1 - 598 / 669.5, abs=1e-3)


def test_straggler_needs_both_shortfall_and_outlier() -> None:
    # Noisy but uniform: 4 % spread is not a straggler.
    assert find_stragglers({"a": 100, "b": 96, "c": 98, "d": 97, "e": 99}) == []
    # Widely spread peers: 8 % under the median is within the noise (robust z above -3.5).
    assert find_stragglers({"a": 100, "b": 80, "c": 120, "d": 92, "e": 110}) == []
    # Identical peers (MAD 0): the shortfall rule decides alone.
    assert [s.name for s in find_stragglers({"a": 100, "b": 100, "c": 100, "d": 90})] == ["d"]
    # Two values: no robust median, nothing flagged.
    assert find_stragglers({"a": 100, "b": 10}) == []


def test_one_bad_node_does_not_drag_the_baseline() -> None:
    # A mean would sit near 600 and hide n1; the median stays at the healthy value.
    values = {"n0": 670, "n1": 610, "n2": 668, "n3": 100, "n4": 671}
    assert [s.name for s in find_stragglers(values)] == ["n3", "n1"]


# --- node check end to end through a fake runner -------------------------------------------------------


def fake_node(
    xml: Path = IDLE / "nvidia-smi-q.xml", dmesg: Path = DEGRADED / "dmesg-clean.txt", under_load: Path | None = None
) -> FakeRunner:
    answers: dict[tuple[str, ...], CommandResult] = {
        XML_ARGS: CommandResult(0, xml.read_text()),
        QUERY_ARGS: CommandResult(0, capture(under_load or IDLE / "nvidia-smi-query.csv")),
        ("dmesg",): CommandResult(0, dmesg.read_text()),
    }
    return FakeRunner(answers)


def fake_burnin(result: BurnInResult):  # type: ignore[no-untyped-def]
    def burnin(config: BurnInConfig, *, clock, probe):  # type: ignore[no-untyped-def]
        for _ in range(3):
            probe()
        return result

    return burnin


def test_node_check_healthy_capture() -> None:
    run = fake_node()
    host = Host(run=run, clock=FakeClock(), sleep=FakeClock().sleep)
    report = check_node(
        host, CheckOptions(node="gpu-0", expect_gpus=1, expect_model="H100"), burnin=fake_burnin(_reference_run(1))
    )
    assert report.status is Status.HEALTHY, report.problems()
    assert (report.gpu_count, report.gpu_model, report.node) == (1, "H100", "gpu-0")
    assert report.gpu_name == "NVIDIA H100 80GB HBM3"
    assert ("dcgmi", "diag", "-r", "1", "-j") in run.calls  # asked, answered "not installed"
    assert "dcgm.skipped" in {f.code for f in report.findings}
    assert run.calls.count(QUERY_ARGS) == 4  # once up front, three times under load


def test_node_check_finds_xid79_and_thermal_under_load() -> None:
    run = fake_node(dmesg=DEGRADED / "dmesg-xid79.txt", under_load=DEGRADED / "query-under-load-thermal.csv")
    report = check_node(
        Host(run=run, clock=FakeClock()), CheckOptions(node="n", dcgm_level=None), burnin=fake_burnin(_reference_run(1))
    )
    # The first query (before the burn-in) reads 0x1 at idle; the samples under load read 0x44.
    assert report.problem_codes() == {"xid.79", "clock_event.hw_thermal_slowdown"}
    assert report.status.exit_code == EXIT_FAILED


def test_node_check_without_driver_is_failed_not_a_crash() -> None:
    report = check_node(Host(run=FakeRunner(), clock=FakeClock()), CheckOptions(node="n", expect_gpus=8))
    assert report.problem_codes() == {"gpu.smi", "gpu.count"}
    assert report.burnin is None


def test_node_check_without_burnin_says_so() -> None:
    report = check_node(Host(run=fake_node(), clock=FakeClock()), CheckOptions(node="n", burnin=False))
    assert report.status is Status.HEALTHY
    assert report.burnin is not None and report.burnin.skipped
    assert "burnin.skipped" in {f.code for f in report.findings}


def test_node_report_json_round_trip() -> None:
    report = check_node(
        Host(run=fake_node(xml=DEGRADED / "pcie-gen3.xml"), clock=FakeClock()),
        CheckOptions(node="n"),
        burnin=fake_burnin(_reference_run(1)),
    )
    data = json.loads(report.to_json())
    assert data["status"] == "degraded" and data["kind"] == "provisioner.node-report"
    assert NodeReport.from_json(report.to_json()) == report
    assert report.status.exit_code == EXIT_DEGRADED


# --- the cluster: remote runs, stragglers, drain planning, the gate ----------------------------------


def _node_json(name: str, sustained: float = 669.9, codes: Sequence[tuple[str, Severity]] = ()) -> str:
    findings = [Finding(code=c, severity=s, message=c) for c, s in codes]
    return NodeReport(
        node=name,
        gpu_model="H100",
        gpu_count=8,
        findings=findings,
        burnin=_reference_run(8, matmul_sustained_tflops=sustained),
    ).to_json()


def test_validate_over_ssh_aggregates_and_marks_the_straggler_node() -> None:
    replies = {
        "n0": _node_json("n0"),
        "n1": _node_json("n1", 671.0),
        "n2": _node_json("n2", 590.0),
        "n3": _node_json("n3", 668.0),
        "n4": "garbage",
    }

    def ssh(argv: Sequence[str]) -> CommandResult:
        node = argv[5]
        assert list(argv[6:9]) == ["provisioner", "node", "check"] and "--json" in argv
        return CommandResult(EXIT_FAILED if node == "n4" else 0, replies[node], "ssh: connect refused" * (node == "n4"))

    run = FakeRunner({("ssh",): ssh})
    report = validate_cluster(Target(nodes=("n0", "n1", "n2", "n3", "n4"), via="ssh", expect_gpus=8), run)
    by_node = {n.node: n for n in report.nodes}
    assert by_node["n2"].problem_codes() == {"straggler.node.matmul_sustained"}
    assert by_node["n4"].problem_codes() == {"node.unreachable"}
    assert {n for n, r in by_node.items() if r.status is Status.HEALTHY} == {"n0", "n1", "n3"}
    assert report.status is Status.FAILED
    assert all("--expect-gpus" in call for call in run.calls)


def test_slurm_and_k8s_remote_commands() -> None:
    calls: list[tuple[str, ...]] = []

    def answer(argv: Sequence[str]) -> CommandResult:
        calls.append(tuple(argv))
        return CommandResult(0, _node_json("x"))

    pods = CommandResult(0, "gpu-check node-check-abc12")
    run = FakeRunner({("srun",): answer, ("kubectl", "exec"): answer, ("kubectl", "get", "pods"): pods})
    validate_cluster(Target(nodes=("a",), via="slurm", expect_gpus=8), run)
    validate_cluster(Target(nodes=("b",), via="k8s"), run)
    assert calls[0][:6] == ("srun", "--nodes=1", "--ntasks=1", "--nodelist=a", "--exclusive", "--job-name=node-check")
    assert "--gres=gpu:8" in calls[0]
    assert calls[1][:6] == ("kubectl", "exec", "-n", "gpu-check", "node-check-abc12", "--")
    with pytest.raises(ProvisionerError, match="unknown --via"):
        validate_cluster(Target(nodes=("a",), via="telnet"), run)


def test_drain_plan_never_takes_the_last_node_silently() -> None:
    bad = [Candidate("a", "failed: xid.79", 3), Candidate("b", "degraded: straggler", 2)]
    plan = plan_drains(bad, ["a", "b", "c"])
    assert [c.node for c in plan.drain] == ["a", "b"] and not plan.refused
    # c is down: a and b are all that is left in service, so the least bad one stays, and we say so.
    plan = plan_drains(bad, ["a", "b", "c"], out_of_service=["c"])
    assert [c.node for c in plan.drain] == ["a"] and [c.node for c in plan.refused] == ["b"]
    assert "last node in service" in (plan.refusal_message() or "")
    forced = plan_drains(bad, ["a", "b", "c"], out_of_service=["c"], force=True)
    assert [c.node for c in forced.drain] == ["a", "b"]
    single = plan_drains([Candidate("a", "failed", 3)], ["a"])
    assert not single.drain and [c.node for c in single.refused] == ["a"]
    # A flagged node that is down is still drained (it must not come back into service), and
    # one already drained is not drained again.
    down = plan_drains([Candidate("b", "failed", 3)], ["a", "b"], out_of_service=["b"])
    assert [c.node for c in down.drain] == ["b"]
    again = plan_drains([Candidate("b", "failed", 3)], ["a", "b"], out_of_service=["b"], already_drained=["b"])
    assert not again.drain and not again.refused


def test_apply_drains_k8s_cordons_and_taints() -> None:
    run = FakeRunner({("kubectl",): CommandResult(0, "")})
    outcomes = apply_drains(plan_drains([Candidate("gpu-3", "failed: xid.79", 3)], ["gpu-1", "gpu-3"]), run, "k8s")
    assert [o.command[:3] for o in outcomes] == [
        ("kubectl", "cordon", "gpu-3"),
        ("kubectl", "taint", "nodes"),
        ("kubectl", "annotate", "node"),
    ]
    assert "provisioner.io/node-check=failed:NoSchedule" in outcomes[1].command


def test_slurm_out_of_service_reads_scontrol() -> None:
    text = (
        "NodeName=a Arch=x86_64 State=IDLE ThreadsPerCore=1\n"
        "NodeName=b Arch=x86_64 State=IDLE+DRAIN ThreadsPerCore=1\n"
        "NodeName=c Arch=x86_64 State=DOWN* ThreadsPerCore=1\n"
    )
    states = slurm_node_states(FakeRunner({("scontrol", "show", "node"): CommandResult(0, text)}))
    assert states == {"a": "IDLE", "b": "IDLE+DRAIN", "c": "DOWN*"}
    assert slurm_out_of_service(states) == ["b", "c"] and slurm_drained(states) == ["b"]


def test_failed_drain_command_is_reported() -> None:
    report = ClusterReport(
        nodes=[
            NodeReport(node="a"),
            NodeReport(node="b", findings=[Finding(code="xid.79", severity=Severity.FAILED, message="x")]),
        ]
    )
    plan = plan_cluster_drains(report, [], force=False)
    outcomes = apply_drains(
        plan, FakeRunner({("scontrol",): CommandResult(1, "", "Invalid node name specified")}), "slurm"
    )
    final = with_actions(report, plan, outcomes)
    assert final.drained == [] and "Invalid node name specified" in final.messages[0]


def test_require_healthy_gate() -> None:
    healthy = ClusterReport(nodes=[NodeReport(node="a")])
    degraded = ClusterReport(
        nodes=[
            NodeReport(node="a", findings=[Finding(code="pcie.gen_below_max", severity=Severity.DEGRADED, message="x")])
        ]
    )
    failed = ClusterReport(
        nodes=[
            NodeReport(node="a"),
            NodeReport(node="b", findings=[Finding(code="xid.79", severity=Severity.FAILED, message="x")]),
        ]
    )
    require_healthy(healthy)
    require_healthy(degraded)
    with pytest.raises(ValidationFailedError) as info:
        require_healthy(failed)
    assert info.value.exit_code == 11 and "b (xid.79)" in str(info.value) and "\n" not in str(info.value)
    require_healthy(failed, force=True)
    with pytest.raises(ValidationFailedError):
        require_healthy(degraded, allow_degraded=False)


def test_mark_stragglers_compares_one_model_with_itself() -> None:
    reports = [NodeReport.from_json(_node_json(f"h{i}", 669.9)) for i in range(3)]
    l40s = [NodeReport.from_json(_node_json(f"l{i}", 180.0)).model_copy(update={"gpu_model": "L40S"}) for i in range(3)]
    marked = mark_stragglers([*reports, *l40s])
    assert all(r.status is Status.HEALTHY for r in marked)
