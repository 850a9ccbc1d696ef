"""The rendered Slurm config runs a real slurmctld + slurmd on this machine.

We take slurm.conf / gres.conf / topology.conf / cgroup.conf exactly as rendered for a
1-node 8 x H100 plan with a two-level switch tree, and change only what cannot be the same
on a 2-core test box (``localize`` below, each rewrite listed there): host names, ports,
paths, the CPUs/RealMemory numbers, and the user slurmctld runs as. Then munged, slurmctld
and slurmd run in the foreground as our children; a batch job asks for GPUs and we check
what Slurm handed it, and ``scontrol show topology`` must show the rendered tree.
Every daemon is killed by PID in a ``finally``.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.render import render_cluster
from tests.conftest import need_tool
from tests.test_render_slurm import CANARY, make_plan

pytestmark = [pytest.mark.system, pytest.mark.slow]

NODE = "llm-pretrain-0"
TOPOLOGY = {NODE: ["spine0", "leaf0"]}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _host_resources() -> tuple[int, int]:
    """CPUs and RealMemory (MiB) this machine really has, as slurmd itself measures them."""
    line = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, timeout=30, check=True).stdout
    cpus = int(re.search(r"CPUs=(\d+)", line).group(1))  # type: ignore[union-attr]
    memory = int(re.search(r"RealMemory=(\d+)", line).group(1))  # type: ignore[union-attr]
    return cpus, memory


def localize(files: dict[str, str], root: Path, host: str) -> dict[str, str]:
    """Rewrite rendered Slurm files to run on this host under ``root``. Only these changes:

    * node name ``llm-pretrain-0`` -> this host's short name, with NodeAddr=127.0.0.1;
      SlurmctldHost gets ``(127.0.0.1)``;
    * SlurmctldPort/SlurmdPort -> free ports; state, spool, pid and log paths -> ``root``;
      Epilog -> the rendered epilog written under ``root``; munge socket via AuthInfo;
    * gres File=/dev/nvidia[..] -> fake device files under ``root/dev`` (same count);
    * CPUs/RealMemory -> what ``slurmd -C`` reports here (the offer has 192 CPUs / 2 TiB);
    * SlurmUser=slurm -> root, because pytest's tmp dirs are private to root.
    Everything else (select, gres types and counts, topology plugin and tree, cgroup
    settings, partitions) is left exactly as rendered.
    """
    cpus, memory = _host_resources()
    ports = {"SlurmctldPort": _free_port(), "SlurmdPort": _free_port()}
    paths = {
        "StateSaveLocation": root / "state",
        "SlurmdSpoolDir": root / "spool",
        "SlurmctldPidFile": root / "slurmctld.pid",
        "SlurmdPidFile": root / "slurmd.pid",
        "SlurmctldLogFile": root / "log" / "slurmctld.log",
        "SlurmdLogFile": root / "log" / "slurmd.log",
        "Epilog": root / "epilog.sh",
    }
    lines = []
    for line in files["slurm.conf"].splitlines():
        key = line.split("=", 1)[0]
        if key in ports:
            line = f"{key}={ports[key]}"
        elif key in paths:
            line = f"{key}={paths[key]}"
        elif key == "SlurmctldHost":
            line = f"SlurmctldHost={host}(127.0.0.1)"
        elif key == "SlurmUser":
            line = "SlurmUser=root"
        elif key == "AuthType":
            line += f"\nAuthInfo=socket={root / 'munge' / 'munge.socket'}"
        elif key == "NodeName":
            line = line.replace(f"NodeName={NODE} ", f"NodeName={host} NodeAddr=127.0.0.1 ")
            line = re.sub(r"CPUs=\d+", f"CPUs={cpus}", line)
            line = re.sub(r"RealMemory=\d+", f"RealMemory={memory}", line)
        lines.append(line)
    gres = files["gres.conf"].replace(f"NodeName={NODE} ", f"NodeName={host} ")
    gres = gres.replace("File=/dev/nvidia", f"File={root / 'dev'}/nvidia")
    return {
        "slurm.conf": "\n".join(lines) + "\n",
        "gres.conf": gres,
        "topology.conf": re.sub(rf"\b{NODE}\b", host, files["topology.conf"]),
        "cgroup.conf": files["cgroup.conf"],
        "epilog.sh": files["epilog.sh"],
    }


def _wait(check, what: str, timeout_s: float = 30.0) -> str:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        ok, last = check()
        if ok:
            return last
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}; last: {last}")


@pytest.fixture(scope="module")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, str], str]]:
    tmp_path = tmp_path_factory.mktemp("slurm")
    need_tool("slurmctld", "slurmd", "sbatch", "scontrol", "munged", "mungekey")
    if os.geteuid() != 0:
        pytest.skip("slurmd must run as root to launch jobs")
    host = socket.gethostname().split(".")[0]
    rendered = render_cluster(make_plan(nodes=1), CANARY, topology=TOPOLOGY)
    files = {path.removeprefix("slurm/"): text for path, text in rendered.items() if path.startswith("slurm/")}
    local = localize(files, tmp_path, host)
    for sub in ("state", "spool", "log", "dev", "munge"):
        (tmp_path / sub).mkdir()
    (tmp_path / "munge").chmod(0o700)
    # slurmd insists on character devices. NVIDIA's real numbers (major 195, minor = index), so
    # ConstrainDevices fences off only these, never a device the job needs such as /dev/null.
    for i in range(8):
        os.mknod(tmp_path / "dev" / f"nvidia{i}", stat.S_IFCHR | 0o666, os.makedev(195, i))
    for name, text in local.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "epilog.sh").chmod(0o755)
    env = dict(os.environ, SLURM_CONF=str(tmp_path / "slurm.conf"))
    key = tmp_path / "munge" / "munge.key"
    subprocess.run(["mungekey", "-c", "-k", str(key)], check=True, timeout=30)
    key.chmod(0o600)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        procs.append(subprocess.Popen(
            ["munged", "-F", "--force", "-S", str(tmp_path / "munge" / "munge.socket"), f"--key-file={key}",
             f"--pid-file={tmp_path / 'munge' / 'munged.pid'}", f"--log-file={tmp_path / 'munge' / 'munged.log'}",
             f"--seed-file={tmp_path / 'munge' / 'munged.seed'}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        _wait(lambda: ((tmp_path / "munge" / "munge.socket").exists(), ""), "munged socket")
        procs.append(subprocess.Popen(["slurmctld", "-D", "-i", "-f", env["SLURM_CONF"]], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        procs.append(subprocess.Popen(["slurmd", "-D", "-f", env["SLURM_CONF"]], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

        def node_idle() -> tuple[bool, str]:
            for proc in procs:
                if proc.poll() is not None:
                    logs = "\n".join(p.read_text()[-2000:] for p in (tmp_path / "log").glob("*.log"))
                    raise AssertionError(f"{proc.args[0]} exited {proc.returncode}:\n{logs}")
            out = subprocess.run(["scontrol", "show", "node", host], env=env, capture_output=True,
                                 text=True, timeout=10).stdout
            return "State=IDLE" in out, out

        _wait(node_idle, "node IDLE")
        yield tmp_path, env, host
    finally:
        for proc in reversed(procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in reversed(procs):
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


def test_rendered_config_runs_a_gpu_job(slurm_cluster: tuple[Path, dict[str, str], str]) -> None:
    root, env, host = slurm_cluster
    node = subprocess.run(["scontrol", "show", "node", host], env=env, capture_output=True, text=True,
                          timeout=10).stdout
    assert "Gres=gpu:h100:8" in node
    job = root / "job.sh"
    job.write_text("#!/bin/bash\necho \"cvd=$CUDA_VISIBLE_DEVICES gpus=$SLURM_JOB_GPUS\"\n")
    out = root / "job.out"
    submitted = subprocess.run(
        ["sbatch", "--parsable", "--gres=gpu:h100:4", f"--output={out}", str(job)],
        env=env, capture_output=True, text=True, timeout=30, check=True,
    )
    job_id = submitted.stdout.strip().split(";")[0]

    def completed() -> tuple[bool, str]:
        state = subprocess.run(["scontrol", "show", "job", job_id], env=env, capture_output=True, text=True,
                               timeout=10).stdout
        if re.search(r"JobState=(FAILED|CANCELLED|NODE_FAIL|TIMEOUT)", state):
            raise AssertionError(state)
        return "JobState=COMPLETED" in state, state

    _wait(completed, f"job {job_id} COMPLETED", timeout_s=60)
    assert out.read_text().strip() == "cvd=0,1,2,3 gpus=0,1,2,3"


def _parse_topology(text: str) -> dict[str, dict[str, str]]:
    switches = {}
    for line in text.splitlines():
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        if "SwitchName" in fields:
            switches[fields.pop("SwitchName")] = fields
    return switches


def test_scontrol_topology_matches_rendered_tree(slurm_cluster: tuple[Path, dict[str, str], str]) -> None:
    _, env, host = slurm_cluster
    shown = subprocess.run(["scontrol", "show", "topology"], env=env, capture_output=True, text=True,
                           timeout=10, check=True).stdout
    switches = _parse_topology(shown)
    assert set(switches) == {"spine0", "leaf0"}
    assert switches["leaf0"]["Level"] == "0" and switches["leaf0"]["Nodes"] == host
    assert switches["spine0"]["Level"] == "1" and switches["spine0"]["Switches"] == "leaf0"
