"""``provisioner node check`` and ``provisioner validate`` through the real CLI entry point.

The node's tools are fakes on PATH (shell scripts that print the real H100 captures from
tests/fixtures/gpu), so the production subprocess runner is what runs them. Remote runs go
through a fake ``ssh``/``srun``/``scontrol`` on PATH that answers with canned node reports.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from provisioner.cli import main
from provisioner.validation.model import EXIT_DEGRADED, EXIT_FAILED, Finding, NodeReport, Severity
from tests.conftest import EXAMPLES

FIXTURES = Path(__file__).parent / "fixtures" / "gpu"
DEGRADED = FIXTURES / "degraded"


def _script(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


@pytest.fixture
def fake_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A PATH with only fake nvidia-smi and dmesg (no dcgmi, no torch-visible GPU)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    cat = shutil.which("cat")
    query = tmp_path / "query.csv"
    query.write_text(
        "\n".join(
            line
            for line in (FIXTURES / "h100-sxm-80gb" / "nvidia-smi-query.csv").read_text().splitlines()
            if not line.startswith(("$ ", "[exit "))
        )
        + "\n"
    )
    _script(
        bin_dir,
        "nvidia-smi",
        f"""case "$*" in
  "-q -x") {cat} "$FAKE_SMI_XML" ;;
  --query-gpu*) {cat} "{query}" ;;
  *) exit 0 ;;
esac
""",
    )
    _script(bin_dir, "dmesg", f'{cat} "$FAKE_DMESG"\n')
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("FAKE_SMI_XML", str(FIXTURES / "h100-sxm-80gb" / "nvidia-smi-q.xml"))
    monkeypatch.setenv("FAKE_DMESG", str(DEGRADED / "dmesg-clean.txt"))
    return bin_dir


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_node_check_healthy_json(fake_node: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(
        ["node", "check", "--json", "--no-burnin", "--expect-gpus", "1", "--expect-model", "H100", "--node", "gpu-0"],
        capsys,
    )
    assert code == 0, out + err
    report = json.loads(out)
    assert report["status"] == "healthy" and report["node"] == "gpu-0" and report["gpu_count"] == 1


@pytest.mark.parametrize(
    ("xml", "dmesg", "code", "problem"),
    [
        ("ecc-error.xml", "dmesg-clean.txt", EXIT_FAILED, "ecc.volatile_uncorrectable"),
        ("remap-failure.xml", "dmesg-clean.txt", EXIT_FAILED, "remap.failure"),
        ("pcie-gen3.xml", "dmesg-clean.txt", EXIT_DEGRADED, "pcie.gen_below_max"),
        ("../h100-sxm-80gb/nvidia-smi-q.xml", "dmesg-xid79.txt", EXIT_FAILED, "xid.79"),
    ],
)
def test_node_check_exit_codes(
    fake_node: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    xml: str,
    dmesg: str,
    code: int,
    problem: str,
) -> None:
    monkeypatch.setenv("FAKE_SMI_XML", str(DEGRADED / xml))
    monkeypatch.setenv("FAKE_DMESG", str(DEGRADED / dmesg))
    exit_code, out, _ = run_cli(["node", "check", "--no-burnin"], capsys)
    assert exit_code == code
    first = out.splitlines()[0]
    # The elapsed seconds vary with the machine's load; the verdict and the GPU count do not.
    assert re.search(r"(failed|degraded) \(1 x H100, \d+ s\)$", first), first
    assert problem in out


def test_node_check_without_a_driver_fails_with_a_report(fake_node: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (fake_node / "nvidia-smi").unlink()
    code, out, err = run_cli(["node", "check", "--json", "--expect-gpus", "8"], capsys)
    assert code == EXIT_FAILED and "Traceback" not in err
    assert {f["code"] for f in json.loads(out)["findings"]} >= {"gpu.smi", "gpu.count"}


def test_node_check_writes_the_report_file(fake_node: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "report.json"
    code, _, err = run_cli(["node", "check", "--json", "--no-burnin", "-o", str(target)], capsys)
    assert code == 0 and f"wrote {target}" in err
    assert NodeReport.from_json(target.read_text()).gpu_model == "H100"


@pytest.mark.parametrize(
    "args",
    [
        ["node", "check", "--expect-fabric", "carrier-pigeon"],
        ["node", "check", "--dcgm-level", "9"],
        ["validate"],
        ["validate", "--nodes", "a,b"],
        ["validate", "--nodes", "a", "--via", "telnet"],
        ["validate", "no-such-plan.json"],
    ],
)
def test_bad_input_is_one_line_exit_2(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(args, capsys)
    assert code in (2, 3), (code, err)
    assert len(err.strip().splitlines()) == 1 and err.startswith("error:"), err
    assert "Traceback" not in err + out


def test_bad_input_in_a_subprocess_has_no_traceback() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "provisioner.cli", "validate", "--nodes", "a"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and done.stderr.startswith("error:") and "Traceback" not in done.stderr


# --- validate: a fake ssh/srun/scontrol on PATH --------------------------------------------------------


def _report(node: str, sustained: float = 669.9, fail: str | None = None) -> str:
    from tests.test_validation import _reference_run

    findings = [Finding(code=fail, severity=Severity.FAILED, message=fail)] if fail else []
    return NodeReport(
        node=node,
        gpu_model="H100",
        gpu_count=8,
        findings=findings,
        burnin=_reference_run(8, matmul_sustained_tflops=sustained),
    ).to_json()


@pytest.fixture
def fake_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """ssh/srun answer with reports/<node>.json and log argv to calls.log; scontrol lists those nodes
    and logs the rest."""
    bin_dir, reports = tmp_path / "bin", tmp_path / "reports"
    bin_dir.mkdir()
    reports.mkdir()
    log = tmp_path / "calls.log"
    _script(bin_dir, "ssh", f'echo "ssh $*" >> {log}\ncat "{reports}/$5.json"\n')
    _script(bin_dir, "srun", f'echo "srun $*" >> {log}\nnode="${{3#--nodelist=}}"\ncat "{reports}/$node.json"\n')
    # scontrol lists the nodes with a report (this machine is their cluster's head) and logs the rest.
    _script(
        bin_dir,
        "scontrol",
        f'if [ "$1" = show ]; then for f in "{reports}"/*.json; do [ -e "$f" ] && '
        f'echo "NodeName=$(basename "$f" .json) State=IDLE"; done; exit 0; fi\necho "scontrol $*" >> {log}\n',
    )
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return tmp_path


def test_validate_nodes_over_ssh(fake_cluster: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for i, sustained in enumerate([669.9, 671.0, 668.5, 560.0]):
        (fake_cluster / "reports" / f"g{i}.json").write_text(_report(f"g{i}", sustained))
    code, out, err = run_cli(["validate", "--nodes", "g0,g1,g2,g3", "--via", "ssh", "--no-burnin", "--json"], capsys)
    assert code == EXIT_DEGRADED, err
    report = json.loads(out)
    status = {n["node"]: n["status"] for n in report["nodes"]}
    assert status == {"g0": "healthy", "g1": "healthy", "g2": "healthy", "g3": "degraded"}
    assert "no scheduler to drain through over ssh" in err
    calls = (fake_cluster / "calls.log").read_text().splitlines()
    assert len(calls) == 4 and all("node check --json" in c and "--no-burnin" in c for c in calls)


def test_node_check_takes_allow_unjudged(fake_node: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["node", "check", "--json", "--no-burnin", "--allow-unjudged"], capsys)
    assert code == 0 and json.loads(out)["status"] == "healthy", err


def test_validate_passes_allow_unjudged_to_each_node(fake_cluster: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (fake_cluster / "reports" / "g0.json").write_text(_report("g0"))
    code, _, err = run_cli(["validate", "--nodes", "g0", "--via", "ssh", "--allow-unjudged", "--json"], capsys)
    assert code == 0, err
    (call,) = (fake_cluster / "calls.log").read_text().splitlines()
    assert "node check --json" in call and call.endswith("--allow-unjudged")


def test_validate_a_plan_through_slurm_drains_the_failed_node(
    fake_cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = fake_cluster / "plan.json"
    assert main(["plan", str(EXAMPLES / "pretrain-h100-slurm.yaml"), "--save-plan", str(plan)]) == 0
    capsys.readouterr()
    (fake_cluster / "reports" / "llm-pretrain-0.json").write_text(_report("llm-pretrain-0"))
    (fake_cluster / "reports" / "llm-pretrain-1.json").write_text(_report("llm-pretrain-1", fail="xid.79"))
    code, out, _ = run_cli(["validate", str(plan), "--no-burnin"], capsys)
    assert code == EXIT_FAILED
    row = next(line for line in out.splitlines() if line.startswith("llm-pretrain-1"))
    assert "drained" in row and "xid.79" in row
    calls = (fake_cluster / "calls.log").read_text().splitlines()
    sruns = [c for c in calls if c.startswith("srun")]
    assert len(sruns) == 2 and all("--gres=gpu:8" in c and "--expect-model H100" in c for c in sruns)
    assert all("--expect-gpus 8" in c for c in sruns)
    assert ("scontrol update NodeName=llm-pretrain-1 State=DRAIN Reason=provisioner validate: failed: xid.79") in calls
    assert not any("NodeName=llm-pretrain-0" in c for c in calls)


def test_validate_no_drain_takes_no_action(fake_cluster: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (fake_cluster / "reports" / "a.json").write_text(_report("a", fail="remap.failure"))
    code, _, _ = run_cli(["validate", "--nodes", "a", "--via", "slurm", "--no-drain", "--no-burnin"], capsys)
    assert code == EXIT_FAILED
    assert not any(c.startswith("scontrol") for c in (fake_cluster / "calls.log").read_text().splitlines())


# --- the rendered boot check runs node check before the scheduler starts --------------------------------


@pytest.mark.parametrize(
    ("node_check_rc", "status", "line"),
    [
        (0, 0, "gpu-check: ok node check healthy"),
        (10, 0, "gpu-check: WARN node check degraded (/var/log/provisioner/node-check.json)"),
        (11, 1, "gpu-check: FAIL node check failed (/var/log/provisioner/node-check.json)"),
    ],
)
def test_rendered_gpu_check_runs_node_check(tmp_path: Path, node_check_rc: int, status: int, line: str) -> None:
    import yaml

    from provisioner.render import render_cluster
    from tests.test_render_slurm import CANARY, make_plan

    document = yaml.safe_load(render_cluster(make_plan(), CANARY)["cloud-init/head.yaml"])
    (script,) = [f["content"] for f in document["write_files"] if f["path"] == "/usr/local/sbin/provisioner-gpu-check"]
    script = script.replace("/var/log/provisioner", str(tmp_path / "log"))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "args.txt"
    _script(bin_dir, "nvidia-smi", 'for i in 0 1 2 3 4 5 6 7; do echo "GPU $i: NVIDIA H100 80GB HBM3"; done\n')
    _script(bin_dir, "systemctl", "exit 0\n")
    _script(bin_dir, "provisioner", f'echo "$*" > {record}\nexit {node_check_rc}\n')
    done = subprocess.run(
        ["bash", "-c", script],
        env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == status, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == line.replace("/var/log/provisioner", str(tmp_path / "log"))
    assert record.read_text().split() == [
        "node",
        "check",
        "--expect-gpus",
        "8",
        "--expect-model",
        "H100",
        "--json",
        "-o",
        str(tmp_path / "log" / "node-check.json"),
    ]


def test_validate_through_slurm_off_the_head_refuses_in_one_line(
    fake_cluster: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Off the head, with no record of the cluster: the local Slurm (another cluster's, or none) was asked
    to run the checks; every node came back unreachable (exit 11) and the last one was nearly drained."""
    plan = fake_cluster / "plan.json"
    assert main(["plan", str(EXAMPLES / "pretrain-h100-slurm.yaml"), "--save-plan", str(plan)]) == 0
    capsys.readouterr()
    (fake_cluster / "reports" / "other-0.json").write_text(_report("other-0"))  # this Slurm's own node
    code, out, err = run_cli(["validate", str(plan), "--no-burnin"], capsys)
    assert (code, out) == (2, "") and len(err.splitlines()) == 1, err
    assert err.startswith(
        "error: this machine is not the head of cluster llm-pretrain (its Slurm does not list "
        "llm-pretrain-0, llm-pretrain-1) and has no record of it: run 'provisioner validate "
    )
    assert not (fake_cluster / "calls.log").exists()  # no srun, no drain
    (fake_cluster / "reports" / "other-0.json").unlink()
    code, _, err = run_cli(["validate", "--nodes", "a,b", "--via", "slurm"], capsys)
    assert (
        code == 2
        and err.startswith("error: this machine is not the head of their cluster (no Slurm answers here)")
        and "--nodes a,b --via slurm' on the head" in err
    )
    _script(fake_cluster / "bin", "kubectl", 'echo "other-0"\n')  # another Kubernetes cluster's
    code, _, err = run_cli(["validate", "--nodes", "a", "--via", "k8s"], capsys)
    assert (
        code == 2
        and err.startswith(
            "error: this machine is not the head of their cluster (its Kubernetes (kubectl) does not list a)"
        )
        and "--nodes a --via k8s' on the head" in err
    )


def test_validate_through_slurm_from_the_machine_that_brought_it_up_runs_on_the_head(
    fake_cluster: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """This machine's record of the cluster: the checks and drains run on the head over SSH, as burst's do."""
    import datetime as dt

    from provisioner.lifecycle import command_support, state
    from tests.test_lifecycle_support import LAMBDA_SPEC, StandInRemote, instant_runtime, plans_for, served_fake

    plan = plans_for(LAMBDA_SPEC, fake_cluster)[0]
    saved = fake_cluster / "lc-plan.json"
    saved.write_text(plan.dumps(), encoding="utf-8")
    state.save_record(
        state.ClusterRecord(
            cluster_id=plan.cluster_id,
            provider=plan.option.provider,
            engine="direct",
            plan=plan,
            status="up",
            head_address="198.51.100.7",
            created_at=dt.datetime(2026, 11, 26, tzinfo=dt.UTC),
        )
    )
    remote = StandInRemote(nodes=[node.name for node in plan.nodes], healthy=True)
    monkeypatch.setattr(command_support, "runtime", lambda emit, interrupts=True: instant_runtime(remote, emit=emit))
    with served_fake("lambda", monkeypatch):
        code, _, err = run_cli(["validate", str(saved), "--no-burnin", "--json"], capsys)
    assert "note: this machine is not the head of lc-lambda: running the checks there (lc-lambda-0, " in err
    sruns = sorted(argv[3] for host, argv in remote.calls if argv[0] == "srun")
    assert sruns == ["--nodelist=lc-lambda-0", "--nodelist=lc-lambda-1"], remote.calls
    assert {host for host, _ in remote.calls} == {"lc-lambda-0"}  # all through the head
    assert ("lc-lambda-0", ("scontrol", "show", "node", "-o")) in remote.calls  # the drain plan reads the head's
    assert not (fake_cluster / "calls.log").exists() and code in (0, 10, 11)


def test_validate_off_the_head_of_a_fakes_cluster_says_so_at_once(
    fake_cluster: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """This machine's record of a cluster on a fake provider (TEST-NET head, as up and watch refuse): the
    SSH to the head waited minutes on an address no machine answers; now one line, exit 5, no ssh run."""
    from provisioner.lifecycle import command_support
    from provisioner.lifecycle.realize import bring_up
    from tests.test_lifecycle_support import LAMBDA_SPEC, StandInRemote, instant_runtime, plans_for, served_fake

    plan = plans_for(LAMBDA_SPEC, fake_cluster)[0]
    saved = fake_cluster / "lc-plan.json"
    saved.write_text(plan.dumps(), encoding="utf-8")
    with served_fake("lambda", monkeypatch):
        bring_up(plan, instant_runtime(StandInRemote(nodes=[n.name for n in plan.nodes])))
        capsys.readouterr()
        monkeypatch.setattr(command_support, "runtime", lambda emit, interrupts=True: instant_runtime(None, emit=emit))
        code, out, err = run_cli(["validate", str(saved), "--no-burnin", "--timeout-s", "1"], capsys)
        assert (code, out) == (5, ""), err
        assert (
            err.splitlines()[-1].startswith("error: node(s) lc-lambda-0 (198.51.100.")
            and "is PROVISIONER_LAMBDA_API_URL a fake provider without nodes?" in err
        )
        assert not (fake_cluster / "calls.log").exists()  # no ssh, no srun, no drain
        # the cluster's name does as its plan does (watch, ssh and down take either): its record's plan
        code, out, err = run_cli(["validate", "lc-lambda", "--no-burnin", "--timeout-s", "1"], capsys)
        assert (code, out) == (5, ""), err
        assert err.splitlines()[-1].startswith("error: node(s) lc-lambda-0 (198.51.100."), err
        assert main(["down", "lc-lambda"]) == 0
    capsys.readouterr()
    code, out, err = run_cli(["validate", "lc-lambda", "--no-burnin"], capsys)
    assert (code, out, err) == (2, "", "error: no record of cluster lc-lambda here (see provisioner status)\n")
