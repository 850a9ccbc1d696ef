"""A 2-node Slurm cluster that really boots: the rendered cloud-init user data, unchanged, on two
systemd-nspawn machines of one Debian node image (what differs from a GPU VM: tests/boot/nodes.py).

Head ``boot-0`` (10.77.0.1) and worker ``boot-1`` (10.77.0.2) sit on a bridge in a network
namespace the test creates; the namespace itself holds 10.77.0.254 (the spec's only allowed SSH
source) and 10.77.0.253 (not allowed). The spec turns ``slurm.accounting`` on, so the head also
runs MariaDB and slurmdbd. After cloud-init finishes on both: ``sinfo`` on the head lists both
nodes idle, ``srun -N2 hostname`` over SSH (the ``ml`` user, the cluster key) prints both names,
``sacct`` lists that job COMPLETED on 2 nodes (from slurmdbd's database), and SSH from the address
outside ``access.allowed_cidrs`` is dropped by the rendered node firewall while the allowed one
and the other node get through. Then the worker's bootstrap as
a script runs over SSH (realize.bootstrap_ssh, as `ml` with sudo) twice: the second run skips
every one-off step, and Slurm still spans both nodes.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from provisioner.realize.bootstrap_ssh import SshBootstrapper, SshTarget
from provisioner.render import render_cluster
from provisioner.secrets import ClusterSecrets
from tests.boot.nodes import Machine, Netns, boot, left_running, wait_for
from tests.test_render_slurm import make_plan

pytestmark = [pytest.mark.boot, pytest.mark.system, pytest.mark.slow, pytest.mark.timeout(900)]

NAMES = ("boot-0", "boot-1")
ADDRESSES = {"boot-0": "10.77.0.1", "boot-1": "10.77.0.2"}
ALLOWED, DENIED = "10.77.0.254", "10.77.0.253"


@pytest.fixture
def cluster(node_image: Path, host_resources: tuple[int, int],
            ) -> Iterator[tuple[dict[str, Machine], Netns, Path, dict[str, str]]]:
    cpus, memory_mib = host_resources
    plan = make_plan({"name": "boot", "storage": {"shared": {"kind": "none"}}, "slurm": {"accounting": True},
                      "access": {"allowed_cidrs": [f"{ALLOWED}/32"]}},
                     nodes=2, vcpus=cpus, memory_gib=memory_mib / 1024)
    secrets = ClusterSecrets.generate()
    rendered = render_cluster(plan, secrets, node_addresses=ADDRESSES)
    workdir = Path(tempfile.mkdtemp(prefix="provisioner-boot-", dir="/var/tmp"))
    key = workdir / "cluster_key"
    key.write_text(secrets.ssh_private_key.get_secret_value())  # type: ignore[union-attr]
    key.chmod(0o600)
    netns = Netns(f"pvboot{os.getpid()}", (f"{ALLOWED}/24", f"{DENIED}/24"))
    machines: dict[str, Machine] = {}
    try:
        for name in NAMES:
            role = "head" if name == NAMES[0] else "worker"
            machines[name] = boot(node_image, workdir, netns, name, f"{ADDRESSES[name]}/24",
                                  rendered[f"cloud-init/{role}.yaml"])
        assert secrets.munge_key_b64.get_secret_value() not in "".join(
            rendered[f"cloud-init/{role}.yaml"] for role in ("head", "worker"))  # user data holds no secret
        yield machines, netns, key, {role: rendered[f"ssh/{role}.sh"] for role in ("head", "worker")}
    finally:
        for machine in machines.values():
            machine.stop()
        left = left_running(list(machines.values()))
        netns.delete()
        shutil.rmtree(workdir, ignore_errors=True)
        assert not left, f"nspawn processes or container inits left running: {left}"


def _cloud_init_done(machine: Machine) -> tuple[bool, str]:
    """cloud-init's last stage (packages, runcmd: the bootstrap) has ended. Not `cloud-init status`:
    it says "error" as soon as any stage had one, before cloud-final has even started (as the
    lifecycle's wait, realize.BOOT_BOOTSTRAP_DONE, it waits for boot-finished)."""
    if machine.proc.poll() is not None:
        raise AssertionError(f"{machine.name} exited {machine.proc.returncode}:\n{machine.log.read_text()[-3000:]}")
    if machine.leader() is None:
        return False, "no init yet"
    if machine.exec("test", "-e", "/var/lib/cloud/instance/boot-finished", timeout=30).returncode == 0:
        return True, "boot-finished"
    result = machine.exec("sh", "-c", "cloud-init status --long; systemctl list-jobs --no-pager", timeout=30)
    return False, result.stdout + result.stderr


def _ssh(netns: Netns, key: Path, source: str, host: str, command: str,
         timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return netns.run(["ssh", "-i", str(key), "-b", source, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
                      "-o", "UserKnownHostsFile=/dev/null", "-o", "ConnectTimeout=5", "-o", "LogLevel=ERROR",
                      f"ml@{host}", command], timeout=timeout)


def test_two_nodes_boot_into_one_slurm_cluster(
    cluster: tuple[dict[str, Machine], Netns, Path, dict[str, str]],
) -> None:
    machines, netns, key, scripts = cluster
    started = time.monotonic()
    head, worker = machines[NAMES[0]], machines[NAMES[1]]
    for machine in (head, worker):
        wait_for(lambda m=machine: _cloud_init_done(m), f"cloud-init on {machine.name}", 240)
    booted = time.monotonic() - started

    # The SSH pass brings the munge key (user data carries none) and starts Slurm: as `ml`, sudo -n,
    # with the cluster key, head first, as lifecycle.realize does.
    wrapper = key.parent / "ssh-in-netns"
    wrapper.write_text(f"#!/bin/sh\nexec ip netns exec {netns.name} ssh -b {ALLOWED} \"$@\"\n")
    wrapper.chmod(0o755)
    runner = SshBootstrapper(key, key.parent / "known_hosts", ssh=str(wrapper))
    for name, role in ((NAMES[0], "head"), (NAMES[1], "worker")):
        target = SshTarget(host=ADDRESSES[name], node_name=name, user="ml")
        # cloud-init's boot-finished can come before the node answers on its bridge address (a run
        # under load saw "No route to host"): wait for SSH first, as the realize core's pass does.
        runner.wait_until_reachable(target, timeout_s=120, interval_s=2)
        first = runner.run(target, scripts[role], timeout_s=300)
        assert "bootstrapped" in first.output and "FAILED" not in first.output, first.output
        assert "done earlier" not in first.output  # cloud-init ran the boot steps, not the script

    def both_idle() -> tuple[bool, str]:
        out = head.exec("sinfo", "-h", "-N", "-o", "%N %t").stdout
        states = dict(line.split() for line in out.splitlines() if line.strip())
        return states == {name: "idle" for name in NAMES}, out

    try:
        wait_for(both_idle, "both nodes idle in sinfo", 120)
    except AssertionError:
        logs = {m.name: m.exec("sh", "-c", "ip -br addr; cat /etc/hosts; "
                                           "tail -n 30 /var/log/slurm/*.log /var/log/cloud-init-output.log").stdout
                for m in (head, worker)}
        raise AssertionError(f"{logs}") from None

    srun = _ssh(netns, key, ALLOWED, ADDRESSES[NAMES[0]], "srun -N2 --immediate=60 hostname")
    assert srun.returncode == 0, srun.stderr
    assert sorted(srun.stdout.split()) == sorted(NAMES)

    # Accounting: slurmctld records the job in slurmdbd (asynchronously, through its agent queue).
    def job_in_sacct() -> tuple[bool, str]:
        out = _ssh(netns, key, ALLOWED, ADDRESSES[NAMES[0]], "sacct -n -X -P -o JobID,JobName,State,NNodes")
        return out.stdout.split() == ["1|hostname|COMPLETED|2"], out.stdout + out.stderr

    try:
        wait_for(job_in_sacct, "sacct to list the srun job", 60)
    except AssertionError:
        logs = head.exec("sh", "-c", "tail -n 30 /var/log/slurm/slurmctld.log /var/log/slurm/slurmdbd.log").stdout
        raise AssertionError(logs) from None
    assert head.exec("sacctmgr", "-n", "-P", "list", "cluster", "format=cluster").stdout.split() == ["boot"]

    # The node firewall: SSH only from access.allowed_cidrs and the cluster's own nodes.
    assert _ssh(netns, key, ALLOWED, ADDRESSES[NAMES[1]], "hostname").stdout.strip() == NAMES[1]
    from_worker = worker.exec("bash", "-c", f"exec 3<>/dev/tcp/{ADDRESSES[NAMES[0]]}/22 && head -c 4 <&3",
                              timeout=20)
    assert from_worker.stdout == "SSH-", from_worker.stderr
    denied = netns.run(["python3", "-c", (
        "import socket,sys\ns=socket.socket()\ns.bind((sys.argv[1],0))\ns.settimeout(3)\n"
        "try:\n s.connect((sys.argv[2],22)); print('open')\nexcept OSError as e: print(type(e).__name__)"),
        DENIED, ADDRESSES[NAMES[0]]], timeout=30)
    assert denied.stdout.strip() in ("TimeoutError", "timeout"), denied.stdout + denied.stderr
    ruleset = head.exec("nft", "list", "table", "inet", "provisioner").stdout
    assert f"{ALLOWED}" in ruleset and "10.77.0.1" in ruleset and "10.77.0.2" in ruleset

    # The SSH pass again on the worker: every one-off step is skipped; Slurm still spans both nodes.
    target = SshTarget(host=ADDRESSES[NAMES[1]], node_name=NAMES[1], user="ml")
    script = scripts["worker"]
    second = runner.run(target, script, timeout_s=300)
    one_off = set(re.findall(r"^if begin_step (\S+) 0; then", script, re.M))
    assert set(re.findall(r"step (\S+): done earlier", second.output)) == one_off, second.output
    assert len(one_off) >= 5 and "FAILED" not in second.output
    wait_for(both_idle, "both nodes idle after the SSH bootstrap", 120)
    again = _ssh(netns, key, ALLOWED, ADDRESSES[NAMES[0]], "srun -N2 --immediate=60 hostname")
    assert sorted(again.stdout.split()) == sorted(NAMES), again.stderr
    print(f"boot: cloud-init done on both nodes after {booted:.0f} s; whole check {time.monotonic() - started:.0f} s")
