"""What users run, booted: the installed ``provisioner`` CLI, as a subprocess, brings a 2-node Slurm
cluster up on a provider fake whose instances are systemd-nspawn nodes (tests/boot/backed.py),
runs a job on it, takes it down and collects nothing. Two providers, two ways of buying and
bootstrapping: Lambda (two instances, cloud-init user data) and a RunPod Instant Cluster (one
product of two member pods bought whole, the bootstrap as the pods' start command).

No test hook reaches into the CLI: it finds the fake through ``PROVISIONER_<P>_API_URL`` and
its key through ``PROVISIONER_<P>_API_KEY``; its state (record, cluster secrets, key copy,
known_hosts) lives in the default state dir under a temporary ``HOME``/``XDG_*``; it SSHes with
the system ``ssh`` and its own key paths, on its own timeouts and rate limits; the engine is the
default one (direct: no pulumi CLI on this machine's PATH, said in its first line). The spec and a
one-offer catalog (``--catalog``: the node's CPUs and memory as slurmd measures them, or slurmd
would drain a node reporting fewer than its slurm.conf says) are files, as a user writes them.

The CLI runs inside the test's network namespace (``ip netns exec``), where the nodes' bridge is
and where the fake listens on 127.0.0.1, so the host's network is never touched.

The rendered Slurm config reaches the nodes unmodified. One adaptation lives in the node image, not
in the config the CLI renders and delivers (tests/boot/nodes.py, ``SLURM_COMPAT``): this host has
cgroup v1, under which systemd-nspawn mounts every cgroup controller hierarchy read-only inside
the container (only its name=systemd subtree is writable; checked 2026-11-26: every v1
controller is mounted ro there, mkdir fails and ``mount -o remount,rw`` is refused), so slurmd
cannot create the job cgroups that ``proctrack/cgroup``, ``task/cgroup`` and ``jobacct_gather/cgroup`` need; just before
slurmd/slurmctld start, the image's wrapper switches those three lines to ``proctrack/linuxproc``,
``task/affinity`` and ``jobacct_gather/linux``. The test asserts those are the rendered values the
CLI delivered (the wrapper keeps a copy of the file as delivered) and that no other line differs.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from provisioner.testing.fakes.base import serve
from tests.boot.backed import BackedLambdaFake, BackedRunPodFake, Machines
from tests.boot.nodes import Netns, left_running

pytestmark = [pytest.mark.boot, pytest.mark.system, pytest.mark.slow, pytest.mark.timeout(1200)]

API_KEY = "test-key-not-secret"
NETWORK = "10.79.0.0/24"
OPERATOR = "10.79.0.254"  # the namespace's own address on the bridge: where the CLI's ssh comes from
CLUSTER = "cli-boot"
NODES = [f"{CLUSTER}-0", f"{CLUSTER}-1"]


def spec(provider: str) -> str:
    model, count = {"lambda": ("A10", 2), "runpod": ("H100", 16)}[provider]
    return (f"name: {CLUSTER}\ngpus: {{model: [{model}], count: {count}}}\nnodes: {{count: 2}}\n"
            f"control_plane: slurm\nproviders: {{allow: [{provider}]}}\nworkload: {{hours: 1}}\n"
            "storage: {checkpoint_nvme_gib_per_node: 0, shared: {kind: none}}\n"
            f"access: {{allowed_cidrs: [{OPERATOR}/32]}}\n")


# What the image's wrapper changes (nodes.SLURM_COMPAT), rendered value -> the one the daemons run.
CGROUP_LINES = {
    "ProctrackType=proctrack/cgroup": "ProctrackType=proctrack/linuxproc",
    "TaskPlugin=task/cgroup,task/affinity": "TaskPlugin=task/affinity",
    "JobAcctGatherType=jobacct_gather/cgroup": "JobAcctGatherType=jobacct_gather/linux",
}


# One offer per provider the fake sells, the size of this host's nodes: Lambda's gpu_1x_a10 in
# us-east-1 (instances, cloud-init) and a RunPod Instant Cluster of 8x H100 pods in US-KS-2 (one
# product bought whole, the bootstrap as the pods' start command).
OFFERS = {
    "lambda": {"provider": "lambda", "instance_type": "gpu_1x_a10", "region": "us-east-1", "gpu_model": "A10",
               "gpus": 1, "gpu_memory_gib": 24, "fabric": "ethernet", "fabric_gbps": 100, "purchase": "instance",
               "bootstrap": "cloud_init", "network": "private", "min_nodes": 1},
    "runpod": {"provider": "runpod", "instance_type": "cluster_8x_H100-SXM", "region": "US-KS-2", "gpu_model": "H100",
               "gpus": 8, "gpu_memory_gib": 80, "fabric": "infiniband", "fabric_gbps": 3200, "purchase": "cluster",
               "bootstrap": "script", "network": "cluster_fabric", "min_nodes": 2},
}


def catalog(provider: str, cpus: int, memory_mib: int) -> dict:  # type: ignore[type-arg]
    """The provider's offer in OFFERS with this host's CPUs and memory, in a one-offer catalog."""
    offer = {
        **OFFERS[provider], "vcpus": cpus, "memory_gib": memory_mib // 1024, "local_nvme_gib": 0,
        "price_per_hour_usd": 0.75, "spot_price_per_hour_usd": None,
        "billing_increment_s": 60, "billing_minimum_s": 0, "egress_usd_per_gb": 0.0, "ingress_usd_per_gb": 0.0,
        "disk_usd_per_gib_hour": 0.0, "interruptions_per_node_hour": 0.0002, "spot_interruptions_per_node_hour": None,
        "interruption_basis": "test", "reliability": 0.995, "max_nodes": 4, "available": True,
    }
    facts = {"source": "boot test", "internet_egress_tiers": [], "free_egress_gb": 0, "inter_region_usd_per_gb": 0,
                "shared_storage_usd_per_gib_month": 0.2, "shared_storage_kind": "NFS", "boot_minutes": 6,
                "egress_note": "none"}
    return {"as_of": "2026-11-20", "providers": {provider: facts}, "offers": [offer]}


@dataclass
class User:
    """A user's machine: a HOME of their own, the installed CLI, the fake as their provider."""

    netns: Netns
    home: Path
    env: dict[str, str]

    def run(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        cli = Path(sys.executable).parent / "provisioner"  # the console script pip installed
        return subprocess.run(["ip", "netns", "exec", self.netns.name, str(cli), *args], env=self.env, cwd=self.home,
                              capture_output=True, text=True, timeout=timeout)


@pytest.fixture(params=["lambda", "runpod"])
def lab(request: pytest.FixtureRequest, node_image: Path, host_resources: tuple[int, int],
        ) -> Iterator[tuple[User, Any, Machines]]:
    provider = request.param
    workdir = Path(tempfile.mkdtemp(prefix="provisioner-cliboot-", dir="/var/tmp"))
    netns = Netns(f"pvcli{os.getpid()}", (f"{OPERATOR}/24",))
    machines = Machines(node_image, workdir / "nodes", netns, network=NETWORK)
    (workdir / "nodes").mkdir()
    home = workdir / "home"
    home.mkdir()
    fake = {"lambda": BackedLambdaFake, "runpod": BackedRunPodFake}[provider](machines, api_key=API_KEY)
    with netns.entered():
        server = serve(fake)  # listens on the namespace's 127.0.0.1
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8",
           "XDG_STATE_HOME": str(home / ".local" / "state"), "XDG_CACHE_HOME": str(home / ".cache"),
           "XDG_CONFIG_HOME": str(home / ".config"), "XDG_DATA_HOME": str(home / ".local" / "share"),
           f"PROVISIONER_{provider.upper()}_API_URL": server.url, f"PROVISIONER_{provider.upper()}_API_KEY": API_KEY,
           "AWS_EC2_METADATA_DISABLED": "true", "NO_GCE_CHECK": "True", "GCE_METADATA_HOST": "127.0.0.1"}
    (home / "spec.yaml").write_text(spec(provider))
    (home / "catalog.json").write_text(json.dumps(catalog(provider, *host_resources)))
    try:
        yield User(netns, home, env), fake, machines
    finally:
        server.stop()
        left = machines.close()
        netns.delete()
        shutil.rmtree(workdir, ignore_errors=True)
        assert not left, f"nspawn processes or container inits left running: {left}"


def _node_logs(machines: Machines) -> str:
    return "\n".join(f"--- {m.name}\n" + m.exec("sh", "-c", "tail -n 25 /var/log/cloud-init-output.log "
                                                     "/var/log/provisioner/bootstrap.log /var/log/slurm/*.log",
                                                     timeout=30).stdout for m in machines.nodes.values())


def test_the_installed_cli_brings_a_booted_cluster_up_runs_srun_and_leaves_nothing(
    lab: tuple[User, Any, Machines],
) -> None:
    user, fake, machines = lab
    provider = fake.provider
    assert shutil.which("pulumi", path=user.env["PATH"]) is None, "this test is the direct engine's: no pulumi CLI"
    started = time.monotonic()
    up = user.run("up", "spec.yaml", "--catalog", "catalog.json")
    up_s = time.monotonic() - started
    assert up.returncode == 0, up.stdout + up.stderr + _node_logs(machines)
    assert up.stderr.splitlines()[0].startswith("engine: direct (no pulumi CLI on PATH"), up.stderr
    # The default state dir under the user's XDG_STATE_HOME holds the record and the cluster's key.
    state = user.home / ".local" / "state" / "gpu-provisioner"
    assert CLUSTER in "".join(str(p) for p in state.rglob("*")), sorted(state.rglob("*"))
    assert fake.instance_count() == 2 and len(machines.running()) == 2
    if provider == "runpod":  # one Instant Cluster holds both pods, not two plain pods
        (product,) = fake.cluster_routes.clusters
        assert sorted(pod["id"] for pod in fake.cluster_routes.members(product)) == sorted(machines.running())

    status = user.run("status", CLUSTER, timeout=120)
    assert status.returncode == 0, status.stderr
    assert all(name in status.stdout for name in NODES), status.stdout
    assert status.stdout.startswith(f"{CLUSTER}: up on {provider} (direct)"), status.stdout

    srun = user.run("ssh", CLUSTER, "--", "srun", "-N2", "--immediate=60", "hostname", timeout=180)
    assert srun.returncode == 0, srun.stdout + srun.stderr + _node_logs(machines)
    assert sorted(srun.stdout.split()) == NODES, srun.stdout + srun.stderr

    head = next(m for m in machines.nodes.values() if m.exec("hostname").stdout.strip() == NODES[0])
    delivered = head.exec("cat", "/etc/provisioner-test/slurm.conf.delivered").stdout.splitlines()
    running = head.exec("cat", "/etc/slurm/slurm.conf").stdout.splitlines()
    assert delivered and len(delivered) == len(running)
    changed = {a: b for a, b in zip(delivered, running, strict=True) if a != b}
    # Only the cgroup plugins the nspawn node cannot run, where the rendered config names them
    # (jobacct_gather only with slurm.accounting, off in this spec).
    assert changed == {line: other for line, other in CGROUP_LINES.items() if line in delivered}
    assert "ProctrackType=proctrack/cgroup" in changed and "TaskPlugin=task/cgroup,task/affinity" in changed

    started = time.monotonic()
    down = user.run("down", CLUSTER)
    down_s = time.monotonic() - started
    assert down.returncode == 0, down.stdout + down.stderr
    assert fake.instance_count() == 0  # nothing left at the provider: no instance or pod, no firewall or cluster
    assert (fake.firewall.rulesets if provider == "lambda" else fake.cluster_routes.clusters) == {}
    machines.settle()
    assert machines.running() == [] and left_running(machines.stopped) == []

    gc = user.run("gc", timeout=300)
    assert gc.returncode == 0 and "nothing to collect" in gc.stdout, gc.stdout + gc.stderr
    assert f"checked: {provider}" in gc.stdout, gc.stdout
    assert fake.validation_errors == []
    print(f"installed CLI, {provider}: up {up_s:.0f} s (Slurm ready on both nodes), down {down_s:.0f} s")


def test_a_killed_up_is_collected_by_gc_cluster(lab: tuple[User, Any, Machines]) -> None:
    """``up`` SIGKILLed once its nodes are bought (a crashed client, no chance to clean up); then
    ``gc --cluster ID --yes`` (the installed CLI again) deletes what the fake still holds of it and
    forgets its record; no node is left running."""
    user, fake, machines = lab
    cli = Path(sys.executable).parent / "provisioner"
    up = subprocess.Popen(["ip", "netns", "exec", user.netns.name, str(cli), "up", "spec.yaml", "--catalog",
                           "catalog.json"], env=user.env, cwd=user.home, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while fake.instance_count() < 2 and up.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert fake.instance_count() == 2, f"up ended {up.poll()} before buying both nodes"
    finally:
        up.kill()  # `ip netns exec` execs the CLI: this pid is the CLI's
        up.wait(timeout=30)
    assert up.returncode == -9
    # Plain gc sees that no process holds the cluster any more (its up died) and lists both nodes.
    listed = user.run("gc", timeout=300)
    for name in NODES:
        assert f"would delete {fake.provider} {CLUSTER} {name} (" in listed.stdout, listed.stdout + listed.stderr
    assert "its up died while creating" in listed.stdout and "2 node(s) to collect" in listed.stdout
    assert fake.instance_count() == 2  # listing deletes nothing
    gc = user.run("gc", "--cluster", CLUSTER, "--yes", timeout=300)
    assert gc.returncode == 0, gc.stdout + gc.stderr
    assert fake.instance_count() == 0
    machines.settle()
    assert machines.running() == [] and left_running(machines.stopped) == []
    again = user.run("status", CLUSTER, timeout=120)
    assert again.returncode == 2, again.stdout + again.stderr  # the record is gone with the nodes
