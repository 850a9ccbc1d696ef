"""Nodes that really boot: a Debian node image (mmdebstrap), systemd-nspawn machines on a private
bridge inside a network namespace the test creates, cloud-init user data from a NoCloud seed.

Recipe and pitfalls: ../shared/reference/test-infrastructure.md §10. Everything started here is
stopped by PID (the container's init gets SIGRTMIN+4, then its nspawn process SIGKILL), the
network namespace is deleted, and each node's root copy removed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

# A provider's GPU image, less the GPU stack: what the rendered bootstrap expects to find (the
# nodes have no internet, so nothing can be installed at boot).
IMAGE_PACKAGES = (
    "systemd", "systemd-sysv", "dbus", "cloud-init", "iproute2", "openssh-server", "sudo", "procps",
    "curl", "mdadm", "nfs-common", "nftables", "munge", "slurmd", "slurmctld", "slurm-client",
)
SUITE = "bookworm"
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
    key = hashlib.sha256(" ".join((SUITE, *IMAGE_PACKAGES, ADDRESS_UNIT, "hosts")).encode()).hexdigest()[:12]
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
    (partial / "etc" / "cloud" / "cloud.cfg.d" / "90-ds.cfg").write_text("datasource_list: [ NoCloud, None ]\n")
    (partial / "etc" / "hosts").write_text("127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n")
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


@dataclass
class Machine:
    """One booted node: a copy of the image, its NoCloud seed, and the nspawn process running it."""

    name: str
    root: Path
    proc: subprocess.Popen[bytes]
    log: Path
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
            os.kill(pid, signal.SIGRTMIN + 4)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            if pid is not None:
                os.kill(pid, signal.SIGKILL)
            self.proc.kill()
            self.proc.wait(timeout=20)

    def alive(self) -> list[int]:
        """Our nspawn process and the container's init, where either still runs."""
        pids = [self.proc.pid] if self.proc.poll() is None else []
        leader = self.extra.get("leader")
        if leader and Path(f"/proc/{leader}").exists():
            pids.append(int(leader))
        return pids


def boot(image: Path, workdir: Path, netns: Netns, name: str, address: str, user_data: str) -> Machine:
    """Copy ``image``, seed it with ``user_data`` (NoCloud) and boot it as machine ``name`` on
    ``netns``'s bridge with ``address`` (CIDR). Returns at once; the boot goes on in the background."""
    root = workdir / name
    subprocess.run(["cp", "-a", "--reflink=auto", str(image), str(root)], check=True, timeout=300)
    seed = root / "var" / "lib" / "cloud" / "seed" / "nocloud"
    seed.mkdir(parents=True, exist_ok=True)
    (seed / "meta-data").write_text(f"instance-id: {name}\nlocal-hostname: {name}\n")
    (seed / "user-data").write_text(user_data)
    (root / "etc" / "provisioner-test").mkdir(exist_ok=True)
    (root / "etc" / "provisioner-test" / "address").write_text(address + "\n")
    (root / "etc" / "hostname").write_text(name + "\n")
    log = workdir / f"{name}.nspawn.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            # nsenter, not `ip netns exec`: that remounts /sys and hides the cgroup tree nspawn needs.
            ["nsenter", f"--net=/run/netns/{netns.name}", "systemd-nspawn", "-D", str(root), "-b", "--register=no",
             "--keep-unit", f"--machine={name}", "--network-bridge=br0", "--console=passive"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    return Machine(name=name, root=root, proc=proc, log=log)


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
