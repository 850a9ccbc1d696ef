"""``provisioner up SPEC --local`` as a user runs it (the installed CLI, root, a HOME of its own,
the bundled catalog): the plan's two Lambda nodes boot as systemd-nspawn machines behind the
Lambda fake in the cluster's lab (provisioner.local.lab), Slurm forms, ``ssh -- srun -N2``
prints both names, and ``down`` leaves no node, lab process or network namespace."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.boot, pytest.mark.system, pytest.mark.slow, pytest.mark.timeout(1200)]

CLUSTER = "local-dry"
SPEC = f"""\
name: {CLUSTER}
gpus: {{model: [H100], count: 8}}
nodes: {{count: 2}}
control_plane: slurm
providers: {{allow: [lambda]}}
workload: {{hours: 1}}
storage: {{checkpoint_nvme_gib_per_node: 0, shared: {{kind: none}}}}
"""


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def test_up_local_boots_the_plan_runs_srun_and_down_leaves_nothing(node_image: Path) -> None:
    home = Path(tempfile.mkdtemp(prefix="provisioner-local-", dir="/var/tmp"))
    (home / "spec.yaml").write_text(SPEC)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8",
           "XDG_STATE_HOME": str(home / ".local" / "state"), "XDG_CACHE_HOME": str(home / ".cache"),
           "XDG_CONFIG_HOME": str(home / ".config"), "PROVISIONER_BOOT_IMAGE_CACHE": str(node_image.parent),
           "AWS_EC2_METADATA_DISABLED": "true", "NO_GCE_CHECK": "True", "GCE_METADATA_HOST": "127.0.0.1"}
    cli = str(Path(sys.executable).parent / "provisioner")
    labs = home / ".local" / "state" / "gpu-provisioner" / "local"

    def run(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        return subprocess.run([cli, *args], env=env, cwd=home, capture_output=True, text=True, timeout=timeout)

    lab: dict = {}  # type: ignore[type-arg]
    try:
        started = time.monotonic()
        up = run("up", "spec.yaml", "--local")
        up_s = time.monotonic() - started
        record = labs / f"{CLUSTER}.json"
        lab = json.loads(record.read_text()) if record.exists() else {}
        log = (labs / f"{CLUSTER}.log").read_text() if (labs / f"{CLUSTER}.log").exists() else ""
        assert up.returncode == 0, up.stdout + up.stderr + log[-3000:]
        assert up.stderr.splitlines()[0] == "engine: direct (--local)", up.stderr
        assert lab["provider"] == "lambda" and _alive(lab["pid"])

        status = run("status", CLUSTER, timeout=120)
        assert status.returncode == 0 and f"{CLUSTER}-0" in status.stdout and f"{CLUSTER}-1" in status.stdout, (
            status.stdout + status.stderr)

        srun = run("ssh", CLUSTER, "--", "srun", "-N2", "--immediate=60", "hostname", timeout=180)
        assert srun.returncode == 0, srun.stdout + srun.stderr
        assert sorted(srun.stdout.split()) == [f"{CLUSTER}-0", f"{CLUSTER}-1"], srun.stdout + srun.stderr

        started = time.monotonic()
        down = run("down", CLUSTER, timeout=300)
        down_s = time.monotonic() - started
        assert down.returncode == 0, down.stdout + down.stderr
        assert not record.exists() and not _alive(lab["pid"])
        assert "stopped; left running: nothing" in (labs / f"{CLUSTER}.log").read_text()
        netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30).stdout
        assert lab["netns"] not in netns
        print(f"up --local: up {up_s:.0f} s (lab start and Slurm ready), down {down_s:.0f} s (lab stopped)")
    finally:
        if lab and _alive(lab["pid"]):  # the lab this test's `up` started: stopped by its pid
            os.kill(lab["pid"], signal.SIGTERM)
        shutil.rmtree(home, ignore_errors=True)
