"""Nodes that really boot: a Debian node image (mmdebstrap), systemd-nspawn machines on a private
bridge inside a network namespace the test creates, cloud-init user data from a NoCloud seed.

Recipe and pitfalls: ../shared/reference/test-infrastructure.md §10. Everything started here is
stopped by PID (the container's init gets SIGRTMIN+4, then its nspawn process SIGKILL), the
network namespace is deleted, and each node's root (an overlay over the read-only image) unmounted.

Two kinds of node: ``boot`` (a VM: systemd as init, cloud-init reads its NoCloud seed) and
``boot_pod`` (a container pod: no systemd, the given start command is the entrypoint, as on
RunPod/Vast.ai). What makes a node differ from a GPU machine is in the image
(provisioner.local.image), never in the rendered user data; a VM may get stand-in NVMe disks
(loop devices over sparse files, ``nvme_disks``).
"""

from __future__ import annotations

import ctypes
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from provisioner.local.image import GPU_DEVICES, NVME_ENV

# A container pod's network comes up before its entrypoint, as a container runtime does it.
# Its environment comes from a file: a pod's user data in one variable can exceed an argument's 128 KiB.
POD_ENTRY = (
    'ip link set host0 up && ip addr replace "$(cat /etc/provisioner-test/address)" dev host0'
    ' && set -a && . /etc/provisioner-test/env && set +a && exec /bin/bash -c "$1"'
)
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
CLONE_NEWNET = 0x40000000  # <sched.h>


@dataclass
class Netns:
    """A network namespace with bridge ``br0``; the namespace itself holds ``addresses`` on it."""

    name: str
    addresses: tuple[str, ...]

    def __post_init__(self) -> None:
        subprocess.run(["ip", "netns", "add", self.name], check=True, timeout=30)
        for cmd in (
            ["ip", "link", "set", "lo", "up"],
            ["ip", "link", "add", "br0", "type", "bridge"],
            ["ip", "link", "set", "br0", "up"],
            *(["ip", "addr", "add", addr, "dev", "br0"] for addr in self.addresses),
        ):
            self.run(cmd, check=True)

    def run(
        self, cmd: list[str], *, check: bool = False, timeout: float = 60, input: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["ip", "netns", "exec", self.name, *cmd],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=check,
            input=input,
        )

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
    loops: tuple[str, ...] = ()  # its stand-in NVMe disks' loop devices, detached by ``stop``

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
        return subprocess.run(
            ["nsenter", "-t", str(pid), "-a", "--", *cmd], capture_output=True, text=True, timeout=timeout
        )

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
        _detach(self.loops)

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
    subprocess.run(
        ["mount", "-t", "overlay", "overlay", "-o", f"lowerdir={image},upperdir={upper},workdir={work}", str(root)],
        check=True,
        timeout=30,
    )
    (root / "etc" / "provisioner-test").mkdir(exist_ok=True)
    (root / "etc" / "provisioner-test" / "address").write_text(address + "\n")
    (root / "etc" / "hostname").write_text(hostname + "\n")
    return root


def _nspawn(
    image: Path, root: Path, netns: Netns, name: str, hostname: str, tail: list[str], binds: tuple[str, ...] = ()
) -> list[str]:
    devices = image / "opt" / "provisioner-test" / "gpu"
    return [
        # nsenter, not `ip netns exec`: that remounts /sys and hides the cgroup tree nspawn needs.
        "nsenter",
        f"--net=/run/netns/{netns.name}",
        "systemd-nspawn",
        "-D",
        str(root),
        "--register=no",
        "--keep-unit",
        f"--machine={name}",
        f"--hostname={hostname}",
        "--network-bridge=br0",
        "--console=passive",
        *(f"--bind-ro={devices}/nvidia{i}:/dev/nvidia{i}" for i in range(GPU_DEVICES)),
        "--bind=/dev/fuse",  # the NFS stand-in's sshfs (provisioner.local.image)
        # systemd starts an automount unit (the rendered fstab's x-systemd.automount) only where
        # /dev/autofs exists; nspawn does not give a container one.
        "--bind=/dev/autofs",
        *(f"--bind={bind}" for bind in binds),
        *tail,
    ]


def _start(
    name: str, root: Path, workdir: Path, command: list[str], *, pod: bool = False, loops: tuple[str, ...] = ()
) -> Machine:
    log = workdir / f"{name}.nspawn.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    return Machine(name=name, root=root, proc=proc, log=log, pod=pod, loops=loops)


def _disks(workdir: Path, name: str, root: Path, count: int, size_gib: int = 1) -> tuple[str, ...]:
    """``count`` stand-in NVMe disks for node ``name``: sparse files in ``workdir`` on loop devices
    (detached by ``Machine.stop``), named in the node's NVME_ENV for its provisioner-nvme.service
    (all of them where the kernel has md, else the first). Returns the loop devices; the node sees
    them as /dev/nvme<i>n1."""
    loops: list[str] = []
    try:
        for i in range(count):
            backing = workdir / f".{name}.nvme{i}.img"
            with backing.open("wb") as disk:
                disk.truncate(size_gib << 30)
            loops.append(
                subprocess.run(
                    ["losetup", "--find", "--show", str(backing)],
                    check=True,
                    text=True,
                    capture_output=True,
                    timeout=30,
                ).stdout.strip()
            )
    except (OSError, subprocess.SubprocessError):
        _detach(loops)
        raise
    if count:
        # Without an md driver (no /proc/mdstat) mdadm cannot assemble the RAID0 the rendered script
        # makes of several disks, and the node's bootstrap fails there: it gets the first disk only
        # (the script's one-disk path: formatted and mounted); the others are there unused.
        names = " ".join(f"/dev/nvme{i}n1" for i in range(count if Path("/proc/mdstat").exists() else 1))
        (root / NVME_ENV.lstrip("/")).write_text(f'PROVISIONER_NVME_DEVICES="{names}"\n')
    return tuple(loops)


def _detach(loops: list[str] | tuple[str, ...]) -> None:
    for loop in loops:
        subprocess.run(["losetup", "--detach", loop], capture_output=True, timeout=30)


def boot(
    image: Path,
    workdir: Path,
    netns: Netns,
    name: str,
    address: str,
    user_data: str,
    *,
    hostname: str | None = None,
    nvme_disks: int = 0,
) -> Machine:
    """Boot a VM-like node ``name`` (systemd as init) from ``image`` on ``netns``'s bridge with
    ``address`` (CIDR), ``user_data`` as its NoCloud seed, ``hostname`` (default ``name``) as
    the hostname its image gives it and ``nvme_disks`` stand-in NVMe disks (``_disks``). Returns
    at once; the boot goes on in the background."""
    hostname = hostname or name
    root = _root(image, workdir, name, address, hostname)
    seed = root / "var" / "lib" / "cloud" / "seed" / "nocloud"
    seed.mkdir(parents=True, exist_ok=True)
    (seed / "meta-data").write_text(f"instance-id: {name}\nlocal-hostname: {hostname}\n")
    (seed / "user-data").write_text(user_data)
    loops = _disks(workdir, name, root, nvme_disks)
    binds = tuple(f"{loop}:/dev/nvme{i}n1" for i, loop in enumerate(loops))
    return _start(name, root, workdir, _nspawn(image, root, netns, name, hostname, ["-b"], binds), loops=loops)


def boot_pod(
    image: Path,
    workdir: Path,
    netns: Netns,
    name: str,
    address: str,
    start_command: str,
    env: dict[str, str],
    *,
    hostname: str,
) -> Machine:
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
