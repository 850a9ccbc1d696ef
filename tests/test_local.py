"""``provisioner up SPEC --local`` without booting anything: who is refused (one line, exit 2) and
what plan a local dry run builds. The boot itself: tests/boot/test_boot_local.py."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from provisioner.cli import main
from provisioner.errors import UsageError
from provisioner.local.lab import fit_to_host, local_options, require_host
from tests.conftest import need_tool
from tests.test_lifecycle_support import LAMBDA_SPEC, plans_for

SPEC = LAMBDA_SPEC.replace("lc-lambda", "lc-local")


def test_up_local_as_a_user_is_one_line_and_exit_2() -> None:
    folder = Path(tempfile.mkdtemp(prefix="provisioner-local-", dir="/var/tmp"))
    try:
        folder.chmod(0o777)
        (folder / "spec.yaml").write_text(SPEC)
        (folder / "spec.yaml").chmod(0o644)
        cli = [str(Path(sys.executable).parent / "provisioner"), "up", "spec.yaml", "--local"]
        if os.geteuid() == 0:  # as a user would run it: nobody, with no privileges but one
            need_tool("setpriv")  # util-linux
            # CAP_DAC_READ_SEARCH lets nobody read the interpreter and this clone wherever they are (a
            # clone under a 0700 home is no one else's to read); it grants no write and is not root.
            reads = ["--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"]
            cli = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *reads, *cli]
        env = {
            "PATH": os.environ["PATH"],
            "HOME": str(folder),
            "PROVISIONER_STATE_DIR": str(folder / "state"),
            "PROVISIONER_CACHE_DIR": str(folder / "cache"),
        }
        done = subprocess.run(cli, cwd=folder, env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
        assert "--local" in done.stderr and "needs: " in done.stderr and "root" in done.stderr, done.stderr
        assert not (folder / "state" / "local").exists()  # no lab was started
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_each_missing_piece_is_named_on_the_one_line() -> None:
    with pytest.raises(UsageError) as caught:
        require_host(euid=1000, platform="darwin", which=lambda tool: None)
    line = str(caught.value)
    assert "\n" not in line
    for missing in ("Linux (this is darwin)", "root", "systemd-nspawn", "mmdebstrap", "nsenter"):
        assert missing in line, line
    require_host(euid=0, platform="linux", which="/usr/bin/{}".format)  # nothing missing: no error


def test_the_options_a_lab_boots_are_the_best_provider_with_a_node_backed_fake(tmp_path: Path) -> None:
    # The pretraining example ranks RunPod's Instant Cluster first, then AWS and GCP: the lab boots
    # the Instant Cluster's member pods (the node-backed RunPod fake sells and boots them).
    example = Path(__file__).resolve().parents[1] / "examples" / "pretrain-h100-slurm.yaml"
    ranked = plans_for(example.read_text(), tmp_path, count=20)
    chosen = local_options(ranked, 3)
    assert [(p.option.provider, p.option.purchase.value) for p in chosen] == [("runpod", "cluster")] * len(chosen)
    assert chosen[0] is ranked[0] and 1 <= len(chosen) <= 3
    # Only AWS and GCP allowed: nothing a lab boots; one line naming what it boots and the spec's options.
    clouds = example.read_text().replace("control_plane: slurm", "control_plane: slurm\nproviders: {allow: [aws, gcp]}")
    with pytest.raises(UsageError) as caught:
        local_options(plans_for(clouds, tmp_path, count=20), 3)
    line = str(caught.value)
    assert "\n" not in line and "this spec's options are aws (instance), gcp (instance)" in line, line
    assert "fluence (instance), lambda (instance), runpod (cluster/pod)" in line, line
    assert "allow one of fluence, lambda, runpod in providers.allow" in line, line
    # Lambda behind AWS in the ranking (AWS allowed, not cheaper here or not): Lambda's options are the ones.
    mixed = SPEC.replace("allow: [lambda]", "allow: [aws, lambda]")
    ranked = plans_for(mixed, tmp_path, count=20)
    chosen = local_options(ranked, 3)
    assert chosen and {p.option.provider for p in chosen} == {"lambda"} and len(chosen) <= 3
    assert chosen[0] is next(p for p in ranked if p.option.provider == "lambda")


def test_local_on_the_pulumi_engine_is_refused_in_one_line_before_any_lab(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # up --local --engine pulumi boots on the real engine (tests/boot/test_boot_pulumi_local.py); what
    # it cannot do is said first: a team backend (the dry run's stack stays in this machine's state
    # dir), a pulumi CLI that is not installed.
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    assert main(["up", str(spec), "--local", "--engine", "pulumi", "--backend", "s3://team-state"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--backend" in err and "a local dry run keeps its stack" in err, err
    monkeypatch.setenv("PATH", str(tmp_path))  # no pulumi
    assert main(["up", str(spec), "--local", "--engine", "pulumi"]) == 5
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the pulumi CLI is not installed" in err, err
    assert not (tmp_path / "state" / "local").exists()  # no lab was started


def test_a_local_plan_is_the_plan_sized_to_this_machine(tmp_path: Path) -> None:
    plan = plans_for(SPEC, tmp_path, count=1)[0]
    local = fit_to_host(plan)
    mem_kib = int(
        next(line for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal:")).split()[1]
    )
    offer = local.option.offer
    assert offer.vcpus == os.cpu_count()
    assert offer.memory_gib == mem_kib // 1048576 and offer.local_nvme_gib == 0
    assert local.spec.access.allowed_cidrs == ["10.80.0.254/32"]
    # What is not about this machine stays the plan's.
    assert [n.name for n in local.nodes] == [n.name for n in plan.nodes] == ["lc-local-0", "lc-local-1"]
    assert (offer.provider, offer.instance_type, offer.gpus) == (
        plan.option.offer.provider,
        plan.option.offer.instance_type,
        4,
    )
    assert local.spec.control_plane == plan.spec.control_plane and local.cluster_id == "lc-local"
