"""What the two boot tests that drive the engine in process share (tests/boot/test_boot_heal.py:
burst's heal loop with a 5 s poll and a fault injected between steps; tests/boot/test_boot_pulumi_path.py:
the Pulumi engine's dynamic provider, no pulumi CLI here). Everything a user runs through the
installed CLI is booted in tests/boot/test_boot_cli.py instead.

``lab``: a network namespace with a bridge, the node-backed fakes' ``Machines`` on it, and an ``ssh``
that runs inside the namespace from ``OPERATOR`` (the spec's only allowed SSH source).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from provisioner.plan import Plan
from provisioner.secrets import ClusterSecrets
from tests.boot.backed import Machines
from tests.boot.nodes import Netns
from tests.test_render_slurm import make_plan

API_KEY = "test-key-not-secret"
NETWORK = "10.78.0.0/24"
OPERATOR = "10.78.0.254"  # the namespace's own address: where `ssh` runs from


@dataclass
class Lab:
    machines: Machines
    netns: Netns
    workdir: Path

    def ssh(self, key: Path, host: str, command: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
        return self.netns.run(
            [
                "ssh",
                "-i",
                str(key),
                "-b",
                OPERATOR,
                "-o",
                "BatchMode=yes",
                "-o",
                "StrictHostKeyChecking=no",
                "-o",
                "UserKnownHostsFile=/dev/null",
                "-o",
                "ConnectTimeout=5",
                "-o",
                "LogLevel=ERROR",
                f"ml@{host}",
                command,
            ],
            timeout=timeout,
        )

    def ssh_wrapper(self) -> Path:
        """An `ssh` that runs inside the namespace from OPERATOR (for the realize core's SshRemote)."""
        wrapper = self.workdir / "ssh-in-netns"
        wrapper.write_text(f'#!/bin/sh\nexec ip netns exec {self.netns.name} ssh -b {OPERATOR} "$@"\n')
        wrapper.chmod(0o755)
        return wrapper

    def key(self, secrets: ClusterSecrets) -> Path:
        """The cluster's private key as a 0600 file."""
        key = self.workdir / "cluster_key"
        key.write_text(secrets.ssh_private_key.get_secret_value())  # type: ignore[union-attr]
        key.chmod(0o600)
        return key

    def node_logs(self) -> str:
        """The last lines of every node's bootstrap and Slurm logs (for a failure's message)."""
        return "\n".join(
            f"--- {machine.name}\n"
            + machine.exec(
                "sh",
                "-c",
                "tail -n 25 /var/log/cloud-init-output.log /var/log/provisioner/bootstrap.log "
                "/var/log/slurm/*.log 2>/dev/null",
                timeout=30,
            ).stdout
            for machine in self.machines.nodes.values()
        )


@pytest.fixture
def lab(node_image: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Lab]:
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(tmp_path / "state"))
    workdir = Path(tempfile.mkdtemp(prefix="provisioner-fakeboot-", dir="/var/tmp"))
    netns = Netns(f"pvfake{os.getpid()}", (f"{OPERATOR}/24",))
    machines = Machines(node_image, workdir, netns, network=NETWORK)
    try:
        yield Lab(machines, netns, workdir)
    finally:
        left = machines.close()
        netns.delete()
        shutil.rmtree(workdir, ignore_errors=True)
        assert not left, f"nspawn processes or container inits left running: {left}"


def lambda_plan(
    host_resources: tuple[int, int],
    *,
    instance_type: str = "gpu_1x_a10",
    region: str = "us-east-1",
    gpu_model: str = "A10",
    gpu_memory_gib: int = 24,
) -> Plan:
    """A 2-node Slurm plan of one Lambda offer the size of this host (slurmd drains a node that
    reports fewer CPUs or less memory than slurm.conf says)."""
    cpus, memory_mib = host_resources
    raw = {
        "name": "fb",
        "storage": {"checkpoint_nvme_gib_per_node": 0, "shared": {"kind": "none"}},
        "access": {"allowed_cidrs": [f"{OPERATOR}/32"]},
    }
    return make_plan(
        raw,
        nodes=2,
        vcpus=cpus,
        memory_gib=memory_mib / 1024,
        fabric="ethernet",
        fabric_gbps=100,
        local_nvme_gib=0,
        provider="lambda",
        instance_type=instance_type,
        region=region,
        gpu_model=gpu_model,
        gpus=1,
        gpu_memory_gib=gpu_memory_gib,
    )
