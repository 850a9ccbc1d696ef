"""The node image ``provisioner up --local`` and the boot tests boot: a provider's GPU image, less
the GPU stack, built once with mmdebstrap and cached (``build_image``).

What makes a node differ from a GPU machine on a provider lives here, in the image, never in the
user data or scripts the CLI renders and delivers (those reach the node unmodified). Each
difference is a stand-in for something this host's kernel or nspawn cannot give a container:

- GPU device files stand in for /dev/nvidia* (bound read-only by nodes.py); only stat()ed.
- slurmd/slurmctld run through ``SLURM_COMPAT``: the cgroup plugins need writable cgroups.
- ``mount.nfs`` is ``NFS_STAND_IN`` and the head's nfs-server ``NFS_SERVER_STAND_IN``: the kernel
  has no NFS client or server (see their comments).
- ``provisioner-nvme.service`` reads the node's stand-in disks from ``NVME_ENV`` (see
  ``NVME_DROP_IN``): the disks are loop devices, which lsblk lists as ``loopN``, not ``nvmeXnY``.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

# A provider's GPU image, less the GPU stack: what the rendered bootstrap expects to find (the
# nodes have no internet, so nothing can be installed at boot).
IMAGE_PACKAGES = (
    "systemd",
    "systemd-sysv",
    "dbus",
    "cloud-init",
    "iproute2",
    "openssh-server",
    "sudo",
    "procps",
    "curl",
    "mdadm",
    "nfs-common",
    "nfs-kernel-server",
    "nftables",
    "munge",
    "slurmd",
    "slurmctld",
    "slurm-client",
    "slurmdbd",
    "mariadb-server",
    "e2fsprogs",
    "sshfs",
    "rclone",  # what the bootstrap installs for a checkpoint.remote (render/checkpoint_sync.py)
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


# The kernel of the machine these nodes run on may lack NFS (this one does: CONFIG_NFS_FS and
# CONFIG_NFSD are not set, and there are no modules to load; /proc/filesystems has neither nfs nor
# nfsd), so the head's nfs-server cannot start and no node can mount nfs4. The image keeps the
# rendered path (the head binds its checkpoint disk's .shared to the shared path and writes the
# export list; each other node mounts HEAD:PATH with the rendered fstab line, on first access
# through systemd's automount, or `mount -a -t nfs4` in a pod) and swaps only the transport:
# mount(8)'s nfs helper mounts the same HEAD:PATH over SFTP (sshfs, FUSE) with the image's own key,
# which the nodes' sshd accepts for sftp only (NFS_KEY_OPTIONS). Like mount.nfs it retries a
# foreground mount for retry=N minutes (default 2) while the head is not up yet. Where
# the kernel has NFS (/proc/filesystems lists nfs4) the real helper runs unchanged.
NFS_REAL = "/usr/lib/provisioner-test/mount.nfs"
NFS_KEY = "/etc/provisioner-test/nfs-stand-in"
NFS_KEY_OPTIONS = 'restrict,command="/usr/lib/openssh/sftp-server"'
NFS_STAND_IN = """#!/bin/sh
# provisioner test image: mount.nfs/mount.nfs4 (see provisioner/local/image.py).
grep -qw nfs4 /proc/filesystems && exec {real} "$@"
source=$1 target=$2
echo "$(date +%s) mount.nfs $*" >> /run/provisioner-test-nfs.log
# retry=N (minutes; the last one given wins, as in mount.nfs): tries every 5 s, at least once.
minutes=$(echo "$*" | grep -o 'retry=[0-9]*' | tail -n 1 | cut -d= -f2)
tries=$(( ${{minutes:-2}} * 12 ))
for try in $(seq 1 $(( tries > 0 ? tries : 1 ))); do
    [ "$try" = 1 ] || sleep 5
    sshfs -o allow_other,reconnect,ServerAliveInterval=15,BatchMode=yes,ConnectTimeout=5 \\
        -o IdentityFile={key},StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null \\
        "root@$source" "$target" 2>> /run/provisioner-test-nfs.log && exit 0
done
exit 32
"""
# The head's nfs-server (the rendered bootstrap starts it: systemd's nfs-server.service, or
# /etc/init.d/nfs-kernel-server in a pod) is a stand-in that succeeds without nfsd, its export being
# served over SFTP by sshd; where the kernel has nfsd it runs Debian's init script (kept here).
NFS_SERVER_REAL = "/usr/lib/provisioner-test/nfs-kernel-server"
NFS_SERVER_STAND_IN = """#!/bin/sh
# provisioner test image: nfs-server (see provisioner/local/image.py).
grep -qw nfsd /proc/filesystems && exec {real} "$@"
echo "nfs-server stand-in: this kernel has no nfsd; the shared path is served over SFTP (sshd)"
"""
NFS_SERVER_UNIT = """[Unit]
Description=NFS server (provisioner test image stand-in)
[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/etc/init.d/nfs-kernel-server start
ExecStop=/etc/init.d/nfs-kernel-server stop
[Install]
WantedBy=multi-user.target
"""
# sshd also reads the stand-in key (sftp only) beside the usual authorized_keys.
SSHD_DROP_IN = f"AuthorizedKeysFile .ssh/authorized_keys {NFS_KEY}.authorized\n"
# The rendered NVMe script discovers whole NVMe disks with lsblk, which reads /sys/block: a loop
# device stands in for each disk (bound as /dev/nvme<i>n1 by nodes.py) but lsblk names it loopN.
# The script's own hook PROVISIONER_NVME_DEVICES names them instead, from a file the node's boot
# writes (nodes._disks: all of them, or the first where the kernel has no md driver for RAID0);
# without that file (no stand-in disks) the service runs as rendered.
NVME_ENV = "/etc/provisioner-test/nvme.env"
NVME_DROP_IN = f"[Service]\nEnvironmentFile=-{NVME_ENV}\n"


def build_image(cache: Path, say: Callable[[str], None] | None = None) -> Path:
    """The node image's root folder under ``cache`` (built once, minutes; reused while the package
    list is the same). ``say`` gets one line per step (the lab's log, which ``up --local`` relays).
    Blocking; raises CalledProcessError when mmdebstrap fails."""
    tell = say or (lambda line: None)
    recipe = " ".join(
        (
            SUITE,
            *IMAGE_PACKAGES,
            ADDRESS_UNIT,
            "hosts",
            SLURM_COMPAT,
            SLURM_REAL_DIR,
            str(GPU_DEVICES),
            CLOUD_CFG,
            LOCALE,
            NFS_STAND_IN,
            NFS_KEY_OPTIONS,
            SSHD_DROP_IN,
            NVME_DROP_IN,
            NFS_SERVER_STAND_IN,
            NFS_SERVER_UNIT,
            "nfs-server off",
        )
    )
    key = hashlib.sha256(recipe.encode()).hexdigest()[:12]
    root = cache / f"node-{SUITE}-{key}"
    if (root / "etc" / "os-release").exists():
        tell(f"node image: {root} (built before)")
        return root
    cache.mkdir(parents=True, exist_ok=True)
    # One build at a time per cache: a second `up --local` (another terminal, another cluster) that
    # asks while the first builds waits for it and takes its image, not a second mmdebstrap of minutes.
    with open(cache / f".{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (root / "etc" / "os-release").exists():
            tell(f"node image: {root} (built meanwhile by another run)")
            return root
        return _build(root, cache, tell)


def _build(root: Path, cache: Path, tell: Callable[[str], None]) -> Path:
    """mmdebstrap ``root``'s image beside it and configure it; renamed into place when complete."""
    count = len(IMAGE_PACKAGES)
    tell(f"node image: building Debian {SUITE} with {count} packages (mmdebstrap; minutes the first time)")
    partial = cache / f".{root.name}.{os.getpid()}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    subprocess.run(
        ["mmdebstrap", "--variant=apt", "--quiet", f"--include={','.join(IMAGE_PACKAGES)}", SUITE, str(partial)],
        check=True,
        timeout=900,
        capture_output=True,
    )
    tell("node image: packages installed; configuring the image")
    (partial / "etc" / "systemd" / "system" / "test-address.service").write_text(ADDRESS_UNIT)
    subprocess.run(
        ["systemctl", f"--root={partial}", "enable", "test-address.service"],
        check=True,
        capture_output=True,
        timeout=60,
    )
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
    for unit in ("mariadb.service", "slurmdbd.service", "nfs-server.service"):
        subprocess.run(["systemctl", f"--root={partial}", "disable", unit], check=True, capture_output=True, timeout=60)
    devices = partial / "opt" / "provisioner-test" / "gpu"
    devices.mkdir(parents=True)
    for i in range(GPU_DEVICES):  # NVIDIA's numbers (major 195); only stat()ed by slurmd
        os.mknod(devices / f"nvidia{i}", stat.S_IFCHR | 0o666, os.makedev(195, i))
    _stand_ins(partial)
    partial.rename(root)
    tell(f"node image: ready at {root}")
    return root


def _stand_ins(partial: Path) -> None:
    """The NFS and NVMe stand-ins (see their constants) written into the image at ``partial``."""
    real = partial / NFS_REAL.lstrip("/")
    (partial / "usr" / "sbin" / "mount.nfs").rename(real)  # mount.nfs4 is a link to mount.nfs
    helper = partial / "usr" / "sbin" / "mount.nfs"
    helper.write_text(NFS_STAND_IN.format(real=NFS_REAL, key=NFS_KEY))
    helper.chmod(0o755)
    init = partial / "etc" / "init.d" / "nfs-kernel-server"
    init.rename(partial / NFS_SERVER_REAL.lstrip("/"))
    init.write_text(NFS_SERVER_STAND_IN.format(real=NFS_SERVER_REAL))
    init.chmod(0o755)
    (partial / "etc" / "systemd" / "system" / "nfs-server.service").write_text(NFS_SERVER_UNIT)
    key = partial / NFS_KEY.lstrip("/")
    key.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "provisioner-test nfs stand-in", "-f", str(key)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    public = key.with_name(key.name + ".pub").read_text().strip()
    key.with_name(key.name + ".authorized").write_text(f"{NFS_KEY_OPTIONS} {public}\n")
    (partial / "etc" / "ssh" / "sshd_config.d" / "provisioner-test.conf").write_text(SSHD_DROP_IN)
    drop_in = partial / "etc" / "systemd" / "system" / "provisioner-nvme.service.d"
    drop_in.mkdir(parents=True)
    (drop_in / "provisioner-test.conf").write_text(NVME_DROP_IN)
