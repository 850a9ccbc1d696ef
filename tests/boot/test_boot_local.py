"""``provisioner up SPEC --local`` as a user runs it (the installed CLI, root, a HOME of its own,
the bundled catalog): the plan's nodes boot as systemd-nspawn machines behind the provider's fake
in the cluster's lab (provisioner.local.lab), Slurm forms, ``ssh -- srun -N2`` prints both names,
and ``down`` leaves no node, lab process or network namespace.

Two plans:

- Two Lambda VMs (systemd, cloud-init) with an NFS shared path, NVMe checkpoints and a 4-minute
  TTL and 1-minute idle timeout. On them, through the CLI only (``ssh [--node N] --``): a file
  written under /shared on the head is read on the worker and back; the NVMe service formatted and
  mounted a stand-in disk; both lifetime timers are listed; then the worker powers itself off when
  its TTL is up (deadman timer) and the head when it has been idle a minute (idle timer), each
  through the rendered provisioner-teardown (Lambda: power off), read back from their journals.
- examples/pretrain-h100-slurm.yaml as it is: a RunPod Instant Cluster's two member pods (no
  systemd: the bootstrap runs the timers as loops and starts the daemons), with its NFS path.

What this machine's kernel cannot give a node, and what stands in (provisioner.local.image):

- NFS: the kernel has no NFS client or server (CONFIG_NFS_FS and CONFIG_NFSD unset, no modules;
  /proc/filesystems lists neither nfs4 nor nfsd), so the head's nfs-server cannot run and nothing
  can mount nfs4. Everything rendered runs as it is (the head's bind of its checkpoint disk's
  .shared, the export list, the worker's fstab line and automount); the image's nfs-server
  stand-in succeeds and its mount.nfs carries HEAD:/shared over SFTP (sshfs) instead. The test
  asserts both the rendered pieces and that /shared on the worker is that mount.
- NVMe RAID0: the kernel has no md driver (CONFIG_MD unset: no /proc/mdstat), so ``mdadm --create``
  cannot assemble an array. Each node gets three loop devices over sparse files as /dev/nvme0n1..2
  (the image names them to the rendered script through its PROVISIONER_NVME_DEVICES: lsblk reads
  /sys/block, where they are loopN). The rendered unit, at boot, is given the first: the script's
  one-disk path formats and mounts it at the checkpoint path. The RAID0 path runs by hand (the same
  installed script over the other two) up to mdadm, which fails opening the array: asserted.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = [pytest.mark.boot, pytest.mark.system, pytest.mark.slow, pytest.mark.timeout(1200)]

CLUSTER = "local-dry"
HEAD, WORKER = f"{CLUSTER}-0", f"{CLUSTER}-1"
# ttl_hours 0.065 is 4 minutes once rounded up to whole minutes (render/views.py); the workload
# must fit in it. The first test's checks must end before it does (under the load of CI's two cores
# and the other boot groups they took over the 2 minutes this once was: the head went first).
SPEC = f"""\
name: {CLUSTER}
gpus: {{model: [H100], count: 8}}
nodes: {{count: 2}}
control_plane: slurm
providers: {{allow: [lambda]}}
workload: {{hours: 0.03}}
storage: {{checkpoint_nvme_gib_per_node: 100, shared: {{kind: nfs, size_gib: 10}}}}
lifetime: {{ttl_hours: 0.065, idle_timeout_minutes: 1}}
"""
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pretrain-h100-slurm.yaml"
# A stand-in nvidia-smi for the worker: its eight GPUs at 0 % (the image has none, and the idle
# check counts a GPU it cannot ask as busy).
IDLE_GPUS = "#!/bin/sh\nfor gpu in 0 1 2 3 4 5 6 7; do echo 0; done\n"


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


class User:
    """A user's machine: the installed CLI, a HOME of their own, the bundled catalog."""

    def __init__(self, home: Path, node_image: Path) -> None:
        self.home = home
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),
            "LANG": "C.UTF-8",
            "XDG_STATE_HOME": str(home / ".local" / "state"),
            "XDG_CACHE_HOME": str(home / ".cache"),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "PROVISIONER_BOOT_IMAGE_CACHE": str(node_image.parent),
            "AWS_EC2_METADATA_DISABLED": "true",
            "NO_GCE_CHECK": "True",
            "GCE_METADATA_HOST": "127.0.0.1",
        }
        self.labs = home / ".local" / "state" / "gpu-provisioner" / "local"

    def run(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        cli = str(Path(sys.executable).parent / "provisioner")
        return subprocess.run(
            [cli, *args], env=self.env, cwd=self.home, capture_output=True, text=True, timeout=timeout
        )

    def on(self, cluster: str, node: str, *command: str) -> str:
        """``command`` on ``node`` as the cluster user (``provisioner ssh --node``); its stdout."""
        done = self.run("ssh", cluster, "--node", node, "--", shlex.join(command), timeout=180)  # read as ssh reads it
        assert done.returncode == 0, f"{node}: {command}: {done.stdout}{done.stderr}"
        return done.stdout

    def lab(self, cluster: str) -> dict:  # type: ignore[type-arg]
        record = self.labs / f"{cluster}.json"
        return json.loads(record.read_text()) if record.exists() else {}

    def lab_log(self, cluster: str) -> str:
        log = self.labs / f"{cluster}.log"
        return log.read_text() if log.exists() else ""

    def up(self, spec: str, cluster: str) -> float:
        started = time.monotonic()
        up = self.run("up", spec, "--local")
        assert up.returncode == 0, up.stdout + up.stderr + self.lab_log(cluster)[-3000:]
        assert up.stderr.splitlines()[0] == "engine: direct (--local)", up.stderr
        return time.monotonic() - started

    def srun_both(self, cluster: str) -> None:
        srun = self.run("ssh", cluster, "--", "srun", "-N2", "--immediate=60", "hostname", timeout=180)
        assert srun.returncode == 0, srun.stdout + srun.stderr
        assert sorted(srun.stdout.split()) == [f"{cluster}-0", f"{cluster}-1"], srun.stdout + srun.stderr

    def shared_path_is_shared(self, cluster: str) -> None:
        """A file the head writes under /shared is read on the worker, and the other way."""
        head, worker = f"{cluster}-0", f"{cluster}-1"
        self.on(cluster, head, "sh", "-c", "echo written-on-the-head > /shared/from-head")
        assert self.on(cluster, worker, "cat", "/shared/from-head") == "written-on-the-head\n"
        self.on(cluster, worker, "sh", "-c", "echo written-on-the-worker > /shared/from-worker")
        assert self.on(cluster, head, "cat", "/shared/from-worker") == "written-on-the-worker\n"
        # The head's /shared is the rendered bind of its checkpoint path; its export list (rendered
        # provisioner-firewall) names the worker; the worker's /shared is the stand-in's SFTP mount
        # of HEAD:/shared made from the rendered fstab line.
        # Each once, though a node runs them at boot and again in the SSH pass.
        assert self.on(cluster, head, "cat", "/etc/fstab").count("/mnt/checkpoints/.shared /shared none bind") == 1
        exports = self.on(cluster, head, "cat", "/etc/exports.d/provisioner.exports")
        assert "/shared 10.80.0." in exports and "(rw,sync,no_subtree_check,root_squash)" in exports, exports
        assert self.on(cluster, worker, "cat", "/etc/fstab").count(f"{head}:/shared /shared nfs4 ") == 1
        mounts = self.on(cluster, worker, "findmnt", "-rno", "SOURCE,FSTYPE", "/shared")
        assert f"root@{head}:/shared fuse.sshfs" in mounts, mounts
        assert "nfsd" not in self.on(cluster, head, "cat", "/proc/filesystems")  # why the stand-in

    def down(self, cluster: str) -> float:
        lab = self.lab(cluster)
        started = time.monotonic()
        down = self.run("down", cluster, timeout=300)
        assert down.returncode == 0, down.stdout + down.stderr
        assert not (self.labs / f"{cluster}.json").exists() and not _alive(lab["pid"])
        assert "stopped; left running: nothing" in self.lab_log(cluster)
        netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30).stdout
        assert lab["netns"] not in netns
        assert not Path(lab["workdir"]).exists()
        return time.monotonic() - started


@contextmanager
def _a_user(node_image: Path) -> Iterator[User]:
    home = Path(tempfile.mkdtemp(prefix="provisioner-local-", dir="/var/tmp"))
    you = User(home, node_image)
    try:
        yield you
    finally:
        for record in you.labs.glob("*.json"):  # a lab this user's `up` started: stopped by its pid
            pid = json.loads(record.read_text())["pid"]
            if _alive(pid):
                os.kill(pid, signal.SIGTERM)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture
def user(node_image: Path) -> Iterator[User]:
    with _a_user(node_image) as you:
        yield you


@dataclass
class Lifetimes:
    """The two Lambda VMs with a 4-minute TTL and a 1-minute idle timeout, up: ``idle_since`` is when
    the head's idle clock was started (time.monotonic()), None until then."""

    user: User
    lab: dict  # type: ignore[type-arg]
    up_s: float
    idle_since: float | None = None


@pytest.fixture(scope="session")
def lifetimes(node_image: Path) -> Iterator[Lifetimes]:
    """Brought up once for the two tests below. The first checks the running cluster and starts the
    head's idle clock; the nodes then end themselves (worker: TTL, head: idle) while the other boot
    tests run (tests/boot/conftest.py runs it first and the second last), and the second reads how
    each ended and takes the cluster down. Either test alone does the whole of it."""
    with _a_user(node_image) as you:
        (you.home / "spec.yaml").write_text(SPEC)
        up_s = you.up("spec.yaml", CLUSTER)
        lab = you.lab(CLUSTER)
        assert lab["provider"] == "lambda" and _alive(lab["pid"])
        yield Lifetimes(you, lab, up_s)


def _running_nodes(workdir: str) -> list[str]:
    """Roots of the lab's nodes whose systemd-nspawn still runs."""
    roots = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0") if entry.name.isdigit() else []
        except OSError:
            continue
        if b"systemd-nspawn" in argv and b"-D" in argv:
            root = argv[argv.index(b"-D") + 1].decode()
            if root.startswith(workdir):
                roots.append(root)
    return roots


def _journal(root: Path, *match: str) -> str:
    return subprocess.run(
        ["journalctl", "-D", str(root / "var" / "log" / "journal"), "--no-pager", "-o", "cat", *match],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout


def _idle_head(cluster: Lifetimes) -> None:
    """The head's GPUs go idle (a stand-in nvidia-smi; Slurm, on the head, has no job) and its own
    deadline moves an hour out, so what ends it is the idle timer. The worker (no nvidia-smi:
    counted busy) ends at its TTL, 4 minutes after its first boot. (Not the other way round: a
    worker's idle check asks the head's slurmctld, and counts a head that is gone as busy.)"""
    user = cluster.user
    user.on(
        CLUSTER,
        HEAD,
        "sudo",
        "sh",
        "-c",
        f"printf '{IDLE_GPUS}' > /usr/local/bin/nvidia-smi && "
        "chmod 755 /usr/local/bin/nvidia-smi && echo $(( $(date +%s) + 3600 )) > /var/lib/provisioner/deadline",
    )
    # The idle check once now, as its timer would at its next tick (up to 90 s away: every minute,
    # 30 s accuracy): it finds the head idle and starts the idle clock, so the timer's next run,
    # a minute on, ends the head while the worker's TTL runs out, not one after the other.
    user.on(CLUSTER, HEAD, "sudo", "systemctl", "start", "provisioner-idle.service")
    assert user.on(CLUSTER, HEAD, "sudo", "cat", "/var/lib/provisioner/idle-since").strip().isdigit()
    cluster.idle_since = time.monotonic()


def test_up_local_vms_share_a_path_and_run_the_nvme_setup_with_both_lifetime_timers(lifetimes: Lifetimes) -> None:
    user = lifetimes.user
    status = user.run("status", CLUSTER, timeout=120)
    assert status.returncode == 0 and HEAD in status.stdout and WORKER in status.stdout, status.stdout + status.stderr
    user.srun_both(CLUSTER)
    user.shared_path_is_shared(CLUSTER)

    # NVMe: three stand-in disks per node. No md driver here, so the node's rendered unit was given
    # the first (the script's one-disk path): formatted and mounted at the checkpoint path, which
    # holds the head's shared export (.shared).
    for node in (HEAD, WORKER):
        disks = user.on(CLUSTER, node, "lsblk", "-rno", "MAJ:MIN", *(f"/dev/nvme{i}n1" for i in range(3)))
        assert disks.count("7:") == 3, disks  # loop devices
        journal = user.on(CLUSTER, node, "sudo", "journalctl", "-u", "provisioner-nvme", "--no-pager", "-o", "cat")
        assert "nvme-raid: 1 disk(s): /dev/nvme0n1 -> /dev/nvme0n1" in journal, journal
        mounted = user.on(CLUSTER, node, "findmnt", "-rno", "SOURCE,FSTYPE,OPTIONS", "/mnt/checkpoints")
        assert mounted.startswith("/dev/nvme0n1 ext4 rw,noatime") and "discard" in mounted, mounted
        assert user.on(CLUSTER, node, "stat", "-c", "%a", "/mnt/checkpoints").strip() == "1777"
    assert user.on(CLUSTER, HEAD, "findmnt", "-rno", "SOURCE", "/shared").strip() == "/dev/nvme0n1[/.shared]"
    # The RAID0 path, by the same installed script over the two other disks: it reaches mdadm with
    # both, which cannot open the array (no md driver: no /proc/mdstat), and stops there.
    raid = user.run(
        "ssh",
        CLUSTER,
        "--",
        "sudo",
        "env",
        "PROVISIONER_NVME_DEVICES='/dev/nvme1n1 /dev/nvme2n1'",  # ssh joins words for the node's shell
        "PROVISIONER_MOUNT_POINT=/mnt/raid0",
        "/usr/local/sbin/provisioner-nvme-raid",
        timeout=120,
    )
    assert raid.returncode == 1 and "mdadm: unexpected failure opening /dev/md" in raid.stdout + raid.stderr, (
        raid.stdout + raid.stderr
    )
    assert "No such file" in user.on(CLUSTER, HEAD, "sh", "-c", "cat /proc/mdstat 2>&1 || true")

    # The lifetime timers, on both nodes.
    for node in (HEAD, WORKER):
        timers = user.on(CLUSTER, node, "systemctl", "list-timers", "--all", "--no-pager", "provisioner-*")
        assert "provisioner-deadman.timer" in timers and "provisioner-idle.timer" in timers, timers
    _idle_head(lifetimes)  # the nodes now end themselves: read back by the test below


def test_up_local_vms_end_themselves_on_ttl_and_idle(lifetimes: Lifetimes) -> None:
    """The worker powers itself off when its TTL is up (deadman timer) and the head when it has been
    idle a minute (idle timer), each through the rendered provisioner-teardown (Lambda: power off),
    read back from their journals; then ``down``."""
    user, lab = lifetimes.user, lifetimes.lab
    if lifetimes.idle_since is None:  # run without the test above
        _idle_head(lifetimes)
    assert lifetimes.idle_since is not None
    deadline = lifetimes.idle_since + 420
    while _running_nodes(lab["workdir"]) and time.monotonic() < deadline:
        time.sleep(2)
    reasons = {
        (root / "etc" / "hostname").read_text().strip(): _journal(root, "-t", "provisioner-teardown")
        for root in Path(lab["workdir"]).glob("i-*")
        if root.is_dir()
    }
    assert _running_nodes(lab["workdir"]) == [], (
        f"a node did not end itself within 7 minutes of the idle clock starting: {reasons}"
    )
    assert "idle limit reached; powering off" in reasons[HEAD], reasons
    assert "ttl limit reached; powering off" in reasons[WORKER], reasons
    assert "ttl limit reached" not in reasons[HEAD] and "idle limit reached" not in reasons[WORKER]

    down_s = user.down(CLUSTER)  # the instances the fake still bills are deleted; the lab stops
    print(f"up --local (Lambda VMs): up {lifetimes.up_s:.0f} s (lab start and Slurm ready), down {down_s:.0f} s")


def test_up_local_boots_the_pretraining_example_as_a_runpod_instant_cluster(user: User) -> None:
    shutil.copy(EXAMPLE, user.home / "pretrain.yaml")
    up_s = user.up("pretrain.yaml", "llm-pretrain")
    assert user.lab("llm-pretrain")["provider"] == "runpod"
    user.srun_both("llm-pretrain")
    user.shared_path_is_shared("llm-pretrain")
    down_s = user.down("llm-pretrain")
    print(f"up --local (the pretraining example, RunPod Instant Cluster): up {up_s:.0f} s, down {down_s:.0f} s")
