"""A user's machine for the installed-CLI boot tests (tests/boot/test_boot_cli.py): a HOME of their
own, the console script pip installed, and one provider's node-backed fake (tests/boot/backed.py)
listening on 127.0.0.1 inside a test network namespace, where the nodes' bridge is.

No test hook reaches into the CLI: it finds the fake through ``PROVISIONER_<P>_API_URL`` and
its key through ``PROVISIONER_<P>_API_KEY``; its state (record, cluster secrets, key copy,
known_hosts) lives in the default state dir under the temporary ``HOME``/``XDG_*``; it SSHes with
the system ``ssh`` and its own key paths, on its own timeouts. The spec and a one-offer catalog
(``--catalog``: the node's CPUs and memory as slurmd measures them, or slurmd would drain a node
reporting fewer than its slurm.conf says) are files, as a user writes them. The CLI runs inside the
namespace (``ip netns exec``), so the host's network is never touched.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from provisioner.testing.fakes.base import serve
from tests.boot.backed import BackedFluenceFake, BackedLambdaFake, BackedRunPodFake, Machines
from tests.boot.nodes import Netns

API_KEY = "test-key-not-secret"
NETWORK = "10.79.0.0/24"
OPERATOR = "10.79.0.254"  # the namespace's own address on the bridge: where the CLI's ssh comes from
DENIED = "10.79.0.253"  # also the namespace's, outside access.allowed_cidrs
CLUSTER = "cli-boot"
CLI = Path(sys.executable).parent / "provisioner"  # the console script pip installed

# One offer per provider, the size of this host's nodes: Lambda's gpu_1x_a10 (instances,
# cloud-init), a RunPod Instant Cluster of 8x H100 pods (one product bought whole, the bootstrap as
# the pods' start command) and a Fluence A10 VM (no user data: the whole bootstrap over SSH; no
# private network, so one node: the optimizer refuses a multi-node Fluence Slurm cluster).
OFFERS: dict[str, dict[str, Any]] = {
    "lambda": {
        "provider": "lambda",
        "instance_type": "gpu_1x_a10",
        "region": "us-east-1",
        "gpu_model": "A10",
        "gpus": 1,
        "gpu_memory_gib": 24,
        "fabric": "ethernet",
        "fabric_gbps": 100,
        "purchase": "instance",
        "bootstrap": "cloud_init",
        "network": "private",
        "min_nodes": 1,
    },
    "runpod": {
        "provider": "runpod",
        "instance_type": "cluster_8x_H100-SXM",
        "region": "US-KS-2",
        "gpu_model": "H100",
        "gpus": 8,
        "gpu_memory_gib": 80,
        "fabric": "infiniband",
        "fabric_gbps": 3200,
        "purchase": "cluster",
        "bootstrap": "script",
        "network": "cluster_fabric",
        "min_nodes": 2,
    },
    "fluence": {
        "provider": "fluence",
        "instance_type": "a10-24gi-pcie-1gpu-30cpu-186gi-1303gi",
        "region": "dulles-usa-1",
        "offer_id": "0e311c31-1e31-4fc7-b27d-4b73f3f27bc2",
        "gpu_model": "A10",
        "gpus": 1,
        "gpu_memory_gib": 24,
        "fabric": "ethernet",
        "fabric_gbps": 10,
        "purchase": "instance",
        "bootstrap": "ssh",
        "network": "none",
        "min_nodes": 1,
    },
}
FAKES = {"lambda": BackedLambdaFake, "runpod": BackedRunPodFake, "fluence": BackedFluenceFake}


def spec(provider: str, *, nodes: int = 2, accounting: bool = False) -> str:
    offer = OFFERS[provider]
    slurm = "slurm: {accounting: true}\n" if accounting else ""
    return (
        f"name: {CLUSTER}\ngpus: {{model: [{offer['gpu_model']}], count: {offer['gpus'] * nodes}}}\n"
        f"nodes: {{count: {nodes}}}\ncontrol_plane: slurm\n{slurm}providers: {{allow: [{provider}]}}\n"
        "workload: {hours: 1}\nstorage: {checkpoint_nvme_gib_per_node: 0, shared: {kind: none}}\n"
        f"access: {{allowed_cidrs: [{OPERATOR}/32]}}\n"
    )


FACTS: dict[str, Any] = {
    "source": "boot test",
    "internet_egress_tiers": [],
    "free_egress_gb": 0,
    "inter_region_usd_per_gb": 0,
    "shared_storage_usd_per_gib_month": 0.2,
    "shared_storage_kind": "NFS",
    "boot_minutes": 6,
    "egress_note": "none",
}
"""A provider's facts in the boot tests' catalogs."""


def host_offer(fields: dict[str, Any], cpus: int, memory_mib: int, price_per_hour_usd: float = 0.75) -> dict[str, Any]:
    """A catalog offer of ``fields`` (as OFFERS gives them) with this host's CPUs and memory."""
    return {
        **fields,
        "vcpus": cpus,
        "memory_gib": memory_mib // 1024,
        "local_nvme_gib": 0,
        "price_per_hour_usd": price_per_hour_usd,
        "spot_price_per_hour_usd": None,
        "billing_increment_s": 60,
        "billing_minimum_s": 0,
        "egress_usd_per_gb": 0.0,
        "ingress_usd_per_gb": 0.0,
        "disk_usd_per_gib_hour": 0.0,
        "interruptions_per_node_hour": 0.0002,
        "spot_interruptions_per_node_hour": None,
        "interruption_basis": "test",
        "reliability": 0.995,
        "max_nodes": 4,
        "available": True,
    }


def catalog(provider: str, cpus: int, memory_mib: int) -> dict[str, Any]:
    """The provider's offer in OFFERS with this host's CPUs and memory, in a one-offer catalog."""
    return {
        "as_of": "2026-11-20",
        "providers": {provider: FACTS},
        "offers": [host_offer(OFFERS[provider], cpus, memory_mib)],
    }


@dataclass
class User:
    """A user's machine: a HOME of their own, the installed CLI, the fake as their provider."""

    netns: Netns
    home: Path
    env: dict[str, str]

    def argv(self, *args: str) -> list[str]:
        """``provisioner ARGS`` inside the namespace (``ip netns exec`` execs it: same pid)."""
        return ["ip", "netns", "exec", self.netns.name, str(CLI), *args]

    def run(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*args), env=self.env, cwd=self.home, capture_output=True, text=True, timeout=timeout
        )

    @property
    def state(self) -> Path:
        """The default state dir under the user's XDG_STATE_HOME."""
        return self.home / ".local" / "state" / "gpu-provisioner"


@contextmanager
def user_lab(
    provider: str, node_image: Path, host_resources: tuple[int, int], *, nodes: int = 2, accounting: bool = False
) -> Iterator[tuple[User, Any, Machines]]:
    """A user with ``spec.yaml`` and ``catalog.json`` in their HOME and ``provider``'s node-backed
    fake; on exit every node is stopped, the namespace deleted, and the test fails if any nspawn
    process or container init is left."""
    workdir = Path(tempfile.mkdtemp(prefix="provisioner-cliboot-", dir="/var/tmp"))
    netns = Netns(f"pvcli{os.getpid()}", (f"{OPERATOR}/24", f"{DENIED}/24"))
    machines = Machines(node_image, workdir / "nodes", netns, network=NETWORK)
    (workdir / "nodes").mkdir()
    home = workdir / "home"
    home.mkdir()
    fake = FAKES[provider](machines, api_key=API_KEY)
    with netns.entered():
        server = serve(fake)  # listens on the namespace's 127.0.0.1
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        f"PROVISIONER_{provider.upper()}_API_URL": server.url,
        f"PROVISIONER_{provider.upper()}_API_KEY": API_KEY,
        "AWS_EC2_METADATA_DISABLED": "true",
        "NO_GCE_CHECK": "True",
        "GCE_METADATA_HOST": "127.0.0.1",
    }
    (home / "spec.yaml").write_text(spec(provider, nodes=nodes, accounting=accounting))
    (home / "catalog.json").write_text(json.dumps(catalog(provider, *host_resources)))
    try:
        yield User(netns, home, env), fake, machines
    finally:
        server.stop()
        left = machines.close()
        netns.delete()
        shutil.rmtree(workdir, ignore_errors=True)
        assert not left, f"nspawn processes or container inits left running: {left}"


def node_logs(machines: Machines) -> str:
    """The last lines of every node's bootstrap and Slurm logs (for a failure's message)."""
    return "\n".join(
        f"--- {m.name}\n"
        + m.exec(
            "sh",
            "-c",
            "tail -n 25 /var/log/cloud-init-output.log "
            "/var/log/provisioner/bootstrap.log /var/log/slurm/*.log "
            "2>/dev/null",
            timeout=30,
        ).stdout
        for m in machines.nodes.values()
    )
