"""The rendered Slurm config runs a real slurmctld + slurmd on this machine.

A 2-node 8 x H100 plan with a two-leaf switch tree is rendered from an offer whose vCPUs and
memory are this machine's (``slurmd -C``), so the NodeName line stays exactly as rendered.
``localize`` then changes only host addresses, ports and paths (each rewrite listed there).
munged, slurmctld (as the ``slurm`` user, as rendered) and one slurmd, started for node 0
with ``slurmd -N``, run in the foreground as our children. Node 1 is a placeholder at an
address nothing answers on, which Slurm leaves unscheduled; it makes the topology a real tree.
Batch jobs ask for GPUs and we check what Slurm handed them; the rendered ``train.sbatch``
runs unchanged with a stand-in ``torchrun``; ``scontrol show topology`` must show the tree.
Every daemon is killed by PID in a ``finally``.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.plan import Plan
from provisioner.render import render_cluster
from tests.conftest import need_tool, require_system
from tests.test_render_slurm import CANARY, make_plan

pytestmark = [pytest.mark.system, pytest.mark.slow]

NODES = ("llm-pretrain-0", "llm-pretrain-1")
ADDRS = {"llm-pretrain-0": "127.0.0.1", "llm-pretrain-1": "127.0.0.2"}  # .2: nobody listens
TOPOLOGY = {"llm-pretrain-0": ["spine0", "leaf0"], "llm-pretrain-1": ["spine0", "leaf1"]}


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


def host_plan(nodes: int) -> Plan:
    """An 8 x H100 plan whose offer has this machine's vCPUs and memory (so slurmd accepts it)."""
    cpus, memory_mib = _host_resources()
    return make_plan(nodes=nodes, vcpus=cpus, memory_gib=memory_mib / 1024)


def localize(files: dict[str, str], root: Path, host: str) -> dict[str, str]:
    """Rewrite rendered Slurm files to run on this host under ``root``. Only these changes:

    * SlurmctldHost ``llm-pretrain-0`` -> this host's short name ``(127.0.0.1)`` (slurmctld
      only starts on the host named there); the NodeName line gains ``NodeAddr=`` loopback
      addresses, because the node names do not resolve here;
    * SlurmctldPort/SlurmdPort -> free ports; state, spool, pid and log paths -> ``root``;
      Epilog -> the rendered epilog written under ``root``; munge socket via AuthInfo;
    * gres File=/dev/nvidia[..] -> fake device files under ``root/dev`` (same count).
    Everything else (node names, CPUs, RealMemory, select, gres types and counts, topology
    plugin and tree, cgroup settings, partitions, SlurmUser) is left exactly as rendered.
    """
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
    addrs = ",".join(ADDRS[name] for name in NODES)
    lines = []
    for line in files["slurm.conf"].splitlines():
        key = line.split("=", 1)[0]
        if key in ports:
            line = f"{key}={ports[key]}"
        elif key in paths:
            line = f"{key}={paths[key]}"
        elif key == "SlurmctldHost":
            line = f"SlurmctldHost={host}(127.0.0.1)"
        elif key == "AuthType":
            line += f"\nAuthInfo=socket={root / 'munge' / 'munge.socket'}"
        elif key == "NodeName":
            name, rest = line.split(" ", 1)
            line = f"{name} NodeAddr={addrs} {rest}"
        lines.append(line)
    return {
        "slurm.conf": "\n".join(lines) + "\n",
        "gres.conf": files["gres.conf"].replace("File=/dev/nvidia", f"File={root / 'dev'}/nvidia"),
        "topology.conf": files["topology.conf"],
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


def _start(procs: list[subprocess.Popen[bytes]], args: list[str], env: dict[str, str]) -> None:
    procs.append(subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))


@pytest.fixture(scope="module")
def slurm_cluster() -> Iterator[tuple[Path, dict[str, str]]]:
    need_tool("slurmctld", "slurmd", "sbatch", "scontrol", "munged", "mungekey")
    if os.geteuid() != 0:
        (pytest.fail if require_system() else pytest.skip)("slurmd must run as root to launch jobs")
    slurm_user = pwd.getpwnam("slurm")  # created by Debian's slurm packages
    host = socket.gethostname().split(".")[0]
    rendered = render_cluster(host_plan(2), CANARY, topology=TOPOLOGY)
    files = {path.removeprefix("slurm/"): text for path, text in rendered.items() if path.startswith("slurm/")}
    # Not pytest's tmp_path: that lives in a root-only directory the slurm user cannot enter.
    tmp_path = Path(tempfile.mkdtemp(prefix="provisioner-slurm-"))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        tmp_path.chmod(0o755)
        local = localize(files, tmp_path, host)
        for sub in ("state", "spool", "log", "dev", "munge", "bin"):
            (tmp_path / sub).mkdir()
        for sub in ("state", "log"):
            os.chown(tmp_path / sub, slurm_user.pw_uid, slurm_user.pw_gid)
        (tmp_path / "log").chmod(0o777)  # slurmd (root) and slurmctld (slurm) log side by side
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
        _start(
            procs,
            [
                "munged",
                "-F",
                "--force",
                "-S",
                str(tmp_path / "munge" / "munge.socket"),
                f"--key-file={key}",
                f"--pid-file={tmp_path / 'munge' / 'munged.pid'}",
                f"--log-file={tmp_path / 'munge' / 'munged.log'}",
                f"--seed-file={tmp_path / 'munge' / 'munged.seed'}",
            ],
            env,
        )
        _wait(lambda: ((tmp_path / "munge" / "munge.socket").exists(), ""), "munged socket")
        _start(procs, ["slurmctld", "-D", "-i", "-f", env["SLURM_CONF"]], env)
        _start(procs, ["slurmd", "-D", "-N", NODES[0], "-f", env["SLURM_CONF"]], env)

        def node_idle() -> tuple[bool, str]:
            for proc in procs:
                if proc.poll() is not None:
                    logs = "\n".join(p.read_text()[-2000:] for p in (tmp_path / "log").glob("*.log"))
                    raise AssertionError(f"{proc.args!r} exited {proc.returncode}:\n{logs}")
            out = subprocess.run(
                ["scontrol", "show", "node", NODES[0]], env=env, capture_output=True, text=True, timeout=10
            ).stdout
            return "State=IDLE" in out, out

        _wait(node_idle, "node IDLE")
        yield tmp_path, env
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
        shutil.rmtree(tmp_path, ignore_errors=True)


def _run_job(root: Path, env: dict[str, str], args: list[str], timeout_s: float = 60) -> str:
    """Submit with sbatch from ``root``, wait for COMPLETED (fail fast on a failed state); the job id."""
    submitted = subprocess.run(
        ["sbatch", "--parsable", *args], env=env, cwd=root, capture_output=True, text=True, timeout=30
    )
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip().split(";")[0]

    def completed() -> tuple[bool, str]:
        state = subprocess.run(
            ["scontrol", "show", "job", job_id], env=env, capture_output=True, text=True, timeout=10
        ).stdout
        if re.search(r"JobState=(FAILED|CANCELLED|NODE_FAIL|TIMEOUT|OUT_OF_MEMORY)", state):
            raise AssertionError(state)
        return "JobState=COMPLETED" in state, state

    _wait(completed, f"job {job_id} COMPLETED", timeout_s=timeout_s)
    return job_id


def test_node_registers_with_the_rendered_shape(slurm_cluster: tuple[Path, dict[str, str]]) -> None:
    _, env = slurm_cluster
    cpus, memory_mib = _host_resources()
    shown = subprocess.run(
        ["scontrol", "show", "node", NODES[0]], env=env, capture_output=True, text=True, timeout=10, check=True
    ).stdout
    assert "Gres=gpu:h100:8" in shown
    assert f"CPUTot={cpus} " in shown
    rendered_mem = int(re.search(r"RealMemory=(\d+)", shown).group(1))  # type: ignore[union-attr]
    assert 0 < rendered_mem < memory_mib  # headroom kept back from what the machine has
    parts = subprocess.run(
        ["sinfo", "-h", "-o", "%P %D"], env=env, capture_output=True, text=True, timeout=10, check=True
    ).stdout.split()
    assert parts == ["gpu*", "2"]


def test_rendered_config_runs_a_gpu_job(slurm_cluster: tuple[Path, dict[str, str]]) -> None:
    root, env = slurm_cluster
    job = root / "job.sh"
    job.write_text('#!/bin/bash\necho "cvd=$CUDA_VISIBLE_DEVICES gpus=$SLURM_JOB_GPUS node=$SLURMD_NODENAME"\n')
    out = root / "job.out"
    _run_job(root, env, ["--gres=gpu:4", f"--output={out}", str(job)])
    assert out.read_text().strip() == f"cvd=0,1,2,3 gpus=0,1,2,3 node={NODES[0]}"


def test_rendered_launcher_runs_torchrun_on_the_allocation(slurm_cluster: tuple[Path, dict[str, str]]) -> None:
    """The 1-node plan's train.sbatch, unchanged, under real sbatch/srun; torchrun is a stand-in."""
    root, env = slurm_cluster
    launcher = render_cluster(host_plan(1), CANARY)["launch/train.sbatch"]
    (root / "train.sbatch").write_text(launcher)
    record = root / "torchrun.txt"
    fake = root / "bin" / "torchrun"
    fake.write_text(
        f'#!/bin/bash\n{{ echo "args=$*"; echo "master=$MASTER_ADDR:$MASTER_PORT"; '
        f'echo "cvd=$CUDA_VISIBLE_DEVICES"; env | grep -E "^(FI_|NCCL_)" | sort; }} > {record}\n'
    )
    fake.chmod(0o755)
    job_env = dict(env, PATH=f"{root / 'bin'}:{env['PATH']}")
    job_id = _run_job(root, job_env, [str(root / "train.sbatch"), "train.py", "--lr", "3e-4"])
    lines = record.read_text().splitlines()
    assert lines[0] == (
        f"args=--nnodes=1 --nproc_per_node=8 --rdzv_id={job_id} --rdzv_backend=c10d "
        f"--rdzv_endpoint={NODES[0]}:29500 train.py --lr 3e-4"
    )
    assert lines[1] == f"master={NODES[0]}:29500"
    assert lines[2] == "cvd=0,1,2,3,4,5,6,7"
    assert "FI_PROVIDER=efa" in lines and "NCCL_NET_PLUGIN=ofi" in lines


def _parse_topology(text: str) -> dict[str, dict[str, str]]:
    switches = {}
    for line in text.splitlines():
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        if "SwitchName" in fields:
            switches[fields.pop("SwitchName")] = fields
    return switches


def test_scontrol_topology_matches_rendered_tree(slurm_cluster: tuple[Path, dict[str, str]]) -> None:
    _, env = slurm_cluster
    shown = subprocess.run(
        ["scontrol", "show", "topology"], env=env, capture_output=True, text=True, timeout=10, check=True
    ).stdout
    switches = _parse_topology(shown)
    assert set(switches) == {"spine0", "leaf0", "leaf1"}
    assert switches["leaf0"]["Level"] == "0" and switches["leaf0"]["Nodes"] == NODES[0]
    assert switches["leaf1"]["Level"] == "0" and switches["leaf1"]["Nodes"] == NODES[1]
    assert switches["spine0"]["Level"] == "1" and switches["spine0"]["Switches"] == "leaf0,leaf1"
