"""Nodes that really boot: a Debian node image (mmdebstrap), systemd-nspawn machines on a private
bridge inside a network namespace the test creates, cloud-init user data from a NoCloud seed.

Recipe and pitfalls: ../shared/reference/test-infrastructure.md §10. Everything started here is
stopped by PID (the container's init gets SIGRTMIN+4, then its nspawn process SIGKILL), the
network namespace is deleted, and each node's root (an overlay over the read-only image) unmounted.

Two kinds of node: ``boot`` (a VM: systemd as init, cloud-init reads its NoCloud seed) and
``boot_pod`` (a container pod: no systemd, the given start command is the entrypoint, as on
RunPod/Vast.ai). What makes a node differ from a GPU machine is in the image, never in the
rendered user data: GPU device files stand in for /dev/nvidia* (bound read-only), and
slurmd/slurmctld are wrapped to run with proctrack/linuxproc (see ``SLURM_COMPAT``).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shlex
import shutil
import signal
import stat
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

# A provider's GPU image, less the GPU stack: what the rendered bootstrap expects to find (the
# nodes have no internet, so nothing can be installed at boot).
IMAGE_PACKAGES = (
    "systemd", "systemd-sysv", "dbus", "cloud-init", "iproute2", "openssh-server", "sudo", "procps",
    "curl", "mdadm", "nfs-common", "nftables", "munge", "slurmd", "slurmctld", "slurm-client",
    "slurmdbd", "mariadb-server",
)
GPU_DEVICES = 8
# On this cgroup-v1 host nspawn mounts a node's cgroup tree read-only, so slurmd cannot make job
# cgroups. The image (not the rendered config) adapts: before slurmd/slurmctld start, the node's
# slurm.conf switches proctrack/cgroup -> proctrack/linuxproc, task/cgroup,task/affinity ->
# task/affinity and jobacct_gather/cgroup (accounting) -> jobacct_gather/linux, the settings that
# need writable cgroups. Every other line stays as rendered; the file as delivered is kept in
# /etc/provisioner-test/slurm.conf.delivered.
# The real daemon keeps its own file name (under SLURM_REAL_DIR): Slurm decides which daemon it is
# from argv[0]'s base name (run_in_daemon.c). Renamed (say slurmctld.real), slurmctld skips the
# slurmdbd plugin's connection setup and dereferences NULL at its first accounting message
# (slurm_persist_msg_pack <- slurmdbd_agent_send <- acct_storage_p_flush_jobs_on_cluster), and
# slurmd reports no GPUs.
SLURM_REAL_DIR = "/usr/lib/provisioner-test"
SLURM_COMPAT = """#!/bin/sh
# provisioner test image: this node cannot create cgroups (read-only cgroup v1 tree in nspawn).
# The file as delivered is kept (for tests/boot/test_boot_cli.py) before the three lines change.
grep -q '^ProctrackType=proctrack/cgroup$' /etc/slurm/slurm.conf 2>/dev/null &&
    cp /etc/slurm/slurm.conf /etc/provisioner-test/slurm.conf.delivered
sed -i -e 's#^ProctrackType=proctrack/cgroup$#ProctrackType=proctrack/linuxproc#' \\
       -e 's#^TaskPlugin=task/cgroup,task/affinity$#TaskPlugin=task/affinity#' \\
       -e 's#^JobAcctGatherType=jobacct_gather/cgroup$#JobAcctGatherType=jobacct_gather/linux#' \\
       /etc/slurm/slurm.conf 2>/dev/null
exec {real_dir}/{daemon} "$@"
"""
# A container pod's network comes up before its entrypoint, as a container runtime does it.
# Its environment comes from a file: a pod's user data in one variable can exceed an argument's 128 KiB.
POD_ENTRY = ("ip link set host0 up && ip addr replace \"$(cat /etc/provisioner-test/address)\" dev host0"
             " && set -a && . /etc/provisioner-test/env && set +a && exec /bin/bash -c \"$1\"")
# RunPod images' /start.sh (which the adapter's start command hands over to): the account's keys
# (PUBLIC_KEY) for root, sshd, then wait.
POD_START = """#!/bin/bash
# Stand-in for a RunPod image's /start.sh.
if [ -n "${PUBLIC_KEY:-}" ]; then
    mkdir -p /root/.ssh && chmod 700 /root/.ssh && echo "$PUBLIC_KEY" >> /root/.ssh/authorized_keys
    chmod 600 /root/.ssh/authorized_keys
fi
mkdir -p /run/sshd && ssh-keygen -A >/dev/null && /usr/sbin/sshd
exec sleep infinity
"""
# cloud-init as a provider's Ubuntu image has it: NoCloud seed only, default user `ubuntu` (the
# login user the lifecycle SSHes in as) with the launch's SSH key and passwordless sudo.
CLOUD_CFG = """datasource_list: [ NoCloud, None ]
system_info:
  default_user:
    name: ubuntu
    lock_passwd: true
    gecos: Ubuntu
    groups: [sudo]
    sudo: ["ALL=(ALL) NOPASSWD:ALL"]
    shell: /bin/bash
"""
SUITE = "bookworm"
CLONE_NEWNET = 0x40000000  # <sched.h>
# The image's default locale, as a provider's cloud image sets one (Ubuntu's: C.UTF-8). Without
# it cloud-init's locale module asks for en_US.UTF-8, which this image cannot generate, so
# cloud-config.service fails; systemd in a node on this cgroup-v1 host then at times never
# finishes stopping that failed unit (TimeoutSec=0), and cloud-final (the bootstrap) never starts.
LOCALE = "LANG=C.UTF-8\n"
# The image's network: a static address on nspawn's host0 from /etc/provisioner-test/address
# (written per node), up before cloud-init's network stage, as a provider's image brings up its
# private NIC. DefaultDependencies=no: cloud-init.service runs before sysinit.target, so a unit
# ordered before it must not wait for basic.target (an ordering cycle drops cloud-init.service).
ADDRESS_UNIT = """[Unit]
Description=test: private address on host0
DefaultDependencies=no
Wants=network-pre.target
Before=network-pre.target cloud-init.service
After=local-fs.target
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'ip link set host0 up && ip addr replace $(cat /etc/provisioner-test/address) dev host0'
[Install]
WantedBy=sysinit.target
"""


def build_image(cache: Path) -> Path:
    """The node image's root folder under ``cache`` (built once, ~30 s; reused while the package
    list is the same). Blocking; raises CalledProcessError when mmdebstrap fails."""
    recipe = " ".join((SUITE, *IMAGE_PACKAGES, ADDRESS_UNIT, "hosts", SLURM_COMPAT, SLURM_REAL_DIR,
                       str(GPU_DEVICES), CLOUD_CFG, LOCALE))
    key = hashlib.sha256(recipe.encode()).hexdigest()[:12]
    root = cache / f"node-{SUITE}-{key}"
    if (root / "etc" / "os-release").exists():
        return root
    partial = cache / f".{root.name}.{os.getpid()}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    cache.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mmdebstrap", "--variant=apt", "--quiet", f"--include={','.join(IMAGE_PACKAGES)}",
                    SUITE, str(partial)], check=True, timeout=900, capture_output=True)
    (partial / "etc" / "systemd" / "system" / "test-address.service").write_text(ADDRESS_UNIT)
    subprocess.run(["systemctl", f"--root={partial}", "enable", "test-address.service"], check=True,
                   capture_output=True, timeout=60)
    (partial / "etc" / "cloud" / "cloud.cfg.d" / "90-ds.cfg").write_text(CLOUD_CFG)
    (partial / "etc" / "default" / "locale").write_text(LOCALE)
    (partial / "etc" / "hosts").write_text("127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n")
    real_dir = partial / SLURM_REAL_DIR.lstrip("/")
    real_dir.mkdir(parents=True)
    for daemon in ("slurmd", "slurmctld"):
        binary = partial / "usr" / "sbin" / daemon
        binary.rename(real_dir / daemon)
        binary.write_text(SLURM_COMPAT.format(real_dir=SLURM_REAL_DIR, daemon=daemon))
        binary.chmod(0o755)
    # Debian starts mariadb and slurmdbd at boot by default; a node runs them only when its bootstrap says so.
    for unit in ("mariadb.service", "slurmdbd.service"):
        subprocess.run(["systemctl", f"--root={partial}", "disable", unit], check=True, capture_output=True, timeout=60)
    devices = partial / "opt" / "provisioner-test" / "gpu"
    devices.mkdir(parents=True)
    for i in range(GPU_DEVICES):  # NVIDIA's numbers (major 195); only stat()ed by slurmd
        os.mknod(devices / f"nvidia{i}", stat.S_IFCHR | 0o666, os.makedev(195, i))
    partial.rename(root)
    return root


@dataclass
class Netns:
    """A network namespace with bridge ``br0``; the namespace itself holds ``addresses`` on it."""

    name: str
    addresses: tuple[str, ...]

    def __post_init__(self) -> None:
        subprocess.run(["ip", "netns", "add", self.name], check=True, timeout=30)
        for cmd in (["ip", "link", "set", "lo", "up"], ["ip", "link", "add", "br0", "type", "bridge"],
                    ["ip", "link", "set", "br0", "up"],
                    *(["ip", "addr", "add", addr, "dev", "br0"] for addr in self.addresses)):
            self.run(cmd, check=True)

    def run(self, cmd: list[str], *, check: bool = False, timeout: float = 60,
            input: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["ip", "netns", "exec", self.name, *cmd], capture_output=True, text=True,
                              timeout=timeout, check=check, input=input)

    def delete(self) -> None:
        subprocess.run(["ip", "netns", "delete", self.name], capture_output=True, timeout=30)

    @contextmanager
    def entered(self) -> Iterator[None]:
        """The calling thread inside the namespace for the ``with`` block. A socket opened there
        stays in the namespace after the block (a fake server on the namespace's 127.0.0.1)."""
        home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        try:
            join_netns(f"/run/netns/{self.name}")
            try:
                yield
            finally:
                join_netns(home)
        finally:
            os.close(home)


def join_netns(where: str | int) -> None:
    """Move the calling thread into the network namespace at path (or open fd) ``where``:
    setns(2), which Python 3.11 lacks. Threads and processes it starts afterwards are there too.
    Raises OSError."""
    fd = os.open(where, os.O_RDONLY) if isinstance(where, str) else where
    try:
        if ctypes.CDLL(None, use_errno=True).setns(fd, CLONE_NEWNET) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"setns: {os.strerror(errno)}")
    finally:
        if isinstance(where, str):
            os.close(fd)


@dataclass
class Machine:
    """One booted node: a copy of the image, its NoCloud seed, and the nspawn process running it."""

    name: str
    root: Path
    proc: subprocess.Popen[bytes]
    log: Path
    pod: bool = False
    extra: dict[str, str] = field(default_factory=dict)

    def leader(self) -> int | None:
        """PID of the container's init (a child of our nspawn process), once it exists."""
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid == self.proc.pid:
                return int(entry.name)
        return None

    def exec(self, *cmd: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        """Run ``cmd`` inside the node (all its namespaces) as root."""
        pid = self.leader()
        if pid is None:
            raise AssertionError(f"{self.name} has no running init; nspawn log:\n{self.log.read_text()[-3000:]}")
        return subprocess.run(["nsenter", "-t", str(pid), "-a", "--", *cmd], capture_output=True, text=True,
                              timeout=timeout)

    def stop(self) -> None:
        """Power off (SIGRTMIN+4 to its init); after 20 s SIGKILL the init (which ends every process
        of the container's PID namespace) and then nspawn. Killing only nspawn is not enough: the
        container's init outlives it, reparented to PID 1."""
        pid = self.leader() if self.proc.poll() is None else None
        if pid is not None:
            self.extra["leader"] = str(pid)
            # A pod's stub init has nothing to power off: its processes end with it.
            os.kill(pid, signal.SIGKILL if self.pod else signal.SIGRTMIN + 4)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
            self.proc.kill()
            self.proc.wait(timeout=20)
        # nspawn may exit a moment before the kernel has torn the container's PID namespace down.
        deadline = time.monotonic() + 10
        while pid is not None and Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        if pid is not None and Path(f"/proc/{pid}").exists():
            os.kill(pid, signal.SIGKILL)
        if os.path.ismount(self.root):
            subprocess.run(["umount", str(self.root)], capture_output=True, timeout=60)

    def alive(self) -> list[int]:
        """Our nspawn process and the container's init, where either still runs."""
        pids = [self.proc.pid] if self.proc.poll() is None else []
        leader = self.extra.get("leader")
        if leader and Path(f"/proc/{leader}").exists():
            pids.append(int(leader))
        return pids


def _root(image: Path, workdir: Path, name: str, address: str, hostname: str) -> Path:
    """A writable root for node ``name``: an overlay over the read-only ``image`` (no copy), with
    its address and hostname written in. Unmounted by ``Machine.stop``."""
    root, upper, work = workdir / name, workdir / f".{name}.upper", workdir / f".{name}.work"
    for folder in (root, upper, work):
        folder.mkdir(parents=True)
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                    f"lowerdir={image},upperdir={upper},workdir={work}", str(root)], check=True, timeout=30)
    (root / "etc" / "provisioner-test").mkdir(exist_ok=True)
    (root / "etc" / "provisioner-test" / "address").write_text(address + "\n")
    (root / "etc" / "hostname").write_text(hostname + "\n")
    return root


def _nspawn(image: Path, root: Path, netns: Netns, name: str, hostname: str, tail: list[str],
            env: dict[str, str] | None = None) -> list[str]:
    devices = image / "opt" / "provisioner-test" / "gpu"
    return [
        # nsenter, not `ip netns exec`: that remounts /sys and hides the cgroup tree nspawn needs.
        "nsenter", f"--net=/run/netns/{netns.name}", "systemd-nspawn", "-D", str(root), "--register=no",
        "--keep-unit", f"--machine={name}", f"--hostname={hostname}", "--network-bridge=br0",
        "--console=passive",
        *(f"--bind-ro={devices}/nvidia{i}:/dev/nvidia{i}" for i in range(GPU_DEVICES)),
        *(f"--setenv={key}={value}" for key, value in (env or {}).items()),
        *tail,
    ]


def _start(name: str, root: Path, workdir: Path, command: list[str], *, pod: bool = False) -> Machine:
    log = workdir / f"{name}.nspawn.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    return Machine(name=name, root=root, proc=proc, log=log, pod=pod)


def boot(image: Path, workdir: Path, netns: Netns, name: str, address: str, user_data: str,
         *, hostname: str | None = None) -> Machine:
    """Boot a VM-like node ``name`` (systemd as init) from ``image`` on ``netns``'s bridge with
    ``address`` (CIDR), ``user_data`` as its NoCloud seed and ``hostname`` (default ``name``) as
    the hostname its image gives it. Returns at once; the boot goes on in the background."""
    hostname = hostname or name
    root = _root(image, workdir, name, address, hostname)
    seed = root / "var" / "lib" / "cloud" / "seed" / "nocloud"
    seed.mkdir(parents=True, exist_ok=True)
    (seed / "meta-data").write_text(f"instance-id: {name}\nlocal-hostname: {hostname}\n")
    (seed / "user-data").write_text(user_data)
    return _start(name, root, workdir, _nspawn(image, root, netns, name, hostname, ["-b"]))


def boot_pod(image: Path, workdir: Path, netns: Netns, name: str, address: str, start_command: str,
             env: dict[str, str], *, hostname: str) -> Machine:
    """Start a container pod ``name``: no systemd, no cloud-init; ``start_command`` (a shell command
    line, as a pod's ``args``) is its entrypoint under a stub init, with ``env`` as its environment
    and ``/start.sh`` standing in for the RunPod image's. Returns at once."""
    root = _root(image, workdir, name, address, hostname)
    (root / "start.sh").write_text(POD_START)
    (root / "start.sh").chmod(0o755)
    environment = root / "etc" / "provisioner-test" / "env"
    environment.write_text("".join(f"{key}={shlex.quote(value)}\n" for key, value in env.items()))
    environment.chmod(0o600)
    tail = ["--as-pid2", "/bin/sh", "-c", POD_ENTRY, "pod-entry", start_command]
    return _start(name, root, workdir, _nspawn(image, root, netns, name, hostname, tail), pod=True)


def wait_for(check, what: str, timeout_s: float) -> str:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    last = ""
    while time.monotonic() < deadline:
        ok, last = check()
        if ok:
            return str(last)
        time.sleep(1)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}; last: {last}")


def left_running(machines: list[Machine]) -> list[int]:
    """PIDs of our nspawn processes and container inits still alive."""
    return [pid for machine in machines for pid in machine.alive()]
