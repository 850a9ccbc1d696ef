"""Clusters bought from the fake providers boot for real: every instance a fake launches is a
systemd-nspawn node (tests/boot/backed.py) on a bridge in a test network namespace.

A 2-node Slurm plan is brought up by the direct engine (``lifecycle.realize.bring_up``, what
`provisioner up --engine direct` runs) through the real adapters against the backed fakes, with
the bootstrap each provider runs (Lambda: cloud-init user data; RunPod: the bootstrap script as
the pod's start command), then ``srun -N2 hostname`` runs over SSH as the ``ml`` user with the cluster
key and prints both node names; the cluster is brought down and the fake holds zero instances
and no node is left running.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from provisioner.providers.base import NodeStatus, Provider

from provisioner.capabilities import Bootstrap, Purchase
from provisioner.lifecycle import realize
from provisioner.plan import Plan
from provisioner.realize.remote import SshRemote
from provisioner.secrets import ClusterSecrets
from provisioner.testing.fakes.base import serve
from tests.boot.backed import BackedFluenceFake, BackedLambdaFake, BackedRunPodFake, Machines
from tests.boot.nodes import Netns, left_running
from tests.test_render_slurm import make_plan

pytestmark = [pytest.mark.boot, pytest.mark.system, pytest.mark.slow, pytest.mark.timeout(600)]

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
            ["ssh", "-i", str(key), "-b", OPERATOR, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
             "-o", "UserKnownHostsFile=/dev/null", "-o", "ConnectTimeout=5", "-o", "LogLevel=ERROR",
             f"ml@{host}", command], timeout=timeout)

    def ssh_wrapper(self) -> Path:
        """An `ssh` that runs inside the namespace from OPERATOR (for realize.bootstrap_ssh)."""
        wrapper = self.workdir / "ssh-in-netns"
        wrapper.write_text(f"#!/bin/sh\nexec ip netns exec {self.netns.name} ssh -b {OPERATOR} \"$@\"\n")
        wrapper.chmod(0o755)
        return wrapper


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


def slurm_plan(provider: str, host_resources: tuple[int, int], **spec: Any) -> Plan:
    cpus, memory_mib = host_resources
    offers = {
        "lambda": {"provider": "lambda", "instance_type": "gpu_1x_a10", "region": "us-east-1", "gpu_model": "A10",
                   "gpus": 1, "gpu_memory_gib": 24},
        "runpod": {"provider": "runpod", "instance_type": "1x_RTX4090_SECURE", "region": "US-KS-2",
                   "gpu_model": "RTX4090", "gpus": 1, "gpu_memory_gib": 24},
        "fluence": {"provider": "fluence", "instance_type": "a10-24gi-pcie-1gpu-30cpu-186gi-1303gi",
                    "region": "dulles-usa-1", "offer_id": "0e311c31-1e31-4fc7-b27d-4b73f3f27bc2",
                    "gpu_model": "A10", "gpus": 1, "gpu_memory_gib": 24},
    }[provider]
    raw = {"name": "fb", "storage": {"checkpoint_nvme_gib_per_node": 0, "shared": {"kind": "none"}},
           "access": {"allowed_cidrs": [f"{OPERATOR}/32"]}, **spec}
    plan = make_plan(raw, nodes=2, vcpus=cpus, memory_gib=memory_mib / 1024, fabric="ethernet", fabric_gbps=100,
                     local_nvme_gib=0, **offers)
    how = {"lambda": (Purchase.INSTANCE, Bootstrap.CLOUD_INIT), "runpod": (Purchase.POD, Bootstrap.SCRIPT),
           "fluence": (Purchase.INSTANCE, Bootstrap.SSH)}[provider]
    option = plan.option.model_copy(update={"purchase": how[0], "bootstrap": how[1]})
    return Plan(spec=plan.spec, option=option, catalog_as_of=plan.catalog_as_of, catalog_origin=plan.catalog_origin)


def _key(lab: Lab, secrets: ClusterSecrets) -> Path:
    key = lab.workdir / "cluster_key"
    key.write_text(secrets.ssh_private_key.get_secret_value())  # type: ignore[union-attr]
    key.chmod(0o600)
    return key


def _slurm_ready(lab: Lab, key: Path, head: str, names: list[str]) -> Callable[[], tuple[bool, str]]:
    def check() -> tuple[bool, str]:
        out = lab.ssh(key, head, "sinfo -h -N -o '%N %t'", timeout=30)
        states = dict(line.split() for line in out.stdout.splitlines() if len(line.split()) == 2)
        return states == dict.fromkeys(names, "idle"), out.stdout + out.stderr
    return check


def _node_logs(lab: Lab) -> str:
    tails = []
    for machine in lab.machines.nodes.values():
        tails.append(f"--- {machine.name}\n" + machine.exec(
            "sh", "-c", "tail -n 25 /var/log/cloud-init-output.log /var/log/provisioner/bootstrap.log "
                        "/var/log/provisioner-user-data.log /var/log/slurm/*.log /var/log/mysql/error.log 2>/dev/null; "
                        "journalctl --no-pager -n 30 -u slurmctld -u slurmdbd 2>/dev/null", timeout=30).stdout)
    return "\n".join(tails)


def _up_run_down(lab: Lab, adapter: Provider, fake: Any, plan: Plan, ready_s: float = 90) -> dict[str, float]:
    """`provisioner up --engine direct` (realize.bring_up) with ``adapter``, srun over SSH, then down."""
    cluster_id = plan.cluster_id
    secrets = realize.cluster_secrets(cluster_id)  # the ones bring_up uses (kept in the state dir)
    key = _key(lab, secrets)
    remote = SshRemote(key, lab.workdir / "known_hosts", ssh=str(lab.ssh_wrapper()))
    runtime = realize.Runtime(remote=remote, provider_for=lambda name: adapter,
                              timeouts=realize.Timeouts(running_s=120, ready_s=ready_s, deleted_s=120, interval_s=1,
                                                        max_interval_s=2))
    started = time.monotonic()
    try:
        record = realize.bring_up(plan, runtime)
    except Exception as exc:
        logs = _node_logs(lab)  # before the teardown, which stops the nodes
        realize.tear_down(cluster_id, runtime)
        raise AssertionError(f"bring_up failed: {exc}\n{logs}") from None
    up_s = time.monotonic() - started
    names = [node.name for node in plan.nodes]
    head = record.head_address
    assert record.status == "up" and head in lab.machines.addresses.values()
    assert sorted(n.name for n in adapter.get_nodes(cluster_id)) == sorted(names)
    srun = lab.ssh(key, head, "srun -N2 --immediate=60 hostname")
    first_job_s = time.monotonic() - started
    assert srun.returncode == 0, srun.stderr + _node_logs(lab)
    assert sorted(srun.stdout.split()) == sorted(names), srun.stdout + srun.stderr + _node_logs(lab)
    assert realize.tear_down(cluster_id, runtime)
    assert fake.instance_count() == 0
    assert [n for n in adapter.get_nodes(cluster_id) if n.status != NodeStatus.TERMINATED] == []
    lab.machines.settle()
    assert lab.machines.running() == [] and left_running(lab.machines.stopped) == []
    return {"up_s": up_s, "first_job_s": first_job_s}


def _lambda(lab: Lab, host_resources: tuple[int, int]) -> dict[str, float]:
    from provisioner.providers.lambda_.provider import LambdaProvider

    fake = BackedLambdaFake(lab.machines, api_key=API_KEY)
    with serve(fake) as server:
        adapter = LambdaProvider(API_KEY, base_url=server.url, poll_interval_s=0.5)
        times = _up_run_down(lab, adapter, fake, slurm_plan("lambda", host_resources))
    assert fake.validation_errors == []
    return times


def test_lambda_cluster_boots_from_user_data_runs_srun_and_goes(lab: Lab, host_resources: tuple[int, int]) -> None:
    times = _lambda(lab, host_resources)
    print(f"lambda: up {times['up_s']:.0f} s, first job line after {times['first_job_s']:.0f} s")


def test_runpod_cluster_boots_from_the_start_command_runs_srun_and_goes(
    lab: Lab, host_resources: tuple[int, int],
) -> None:
    from provisioner.providers.runpod.provider import RunPodProvider

    fake = BackedRunPodFake(lab.machines, api_key=API_KEY)
    with serve(fake) as server:
        adapter = RunPodProvider(API_KEY, base_url=server.url, poll_interval_s=0.5)
        times = _up_run_down(lab, adapter, fake, slurm_plan("runpod", host_resources))
    assert fake.validation_errors == []
    print(f"runpod: up {times['up_s']:.0f} s, first job line after {times['first_job_s']:.0f} s")


def test_fluence_cluster_bootstrapped_over_ssh_runs_srun_and_goes(
    lab: Lab, host_resources: tuple[int, int],
) -> None:
    """Fluence GPU VMs take no user data: both nodes get the whole bootstrap over SSH after boot."""
    from provisioner.providers.fluence.provider import FluenceProvider

    fake = BackedFluenceFake(lab.machines, api_key=API_KEY)
    with serve(fake) as server:
        adapter = FluenceProvider(API_KEY, base_url=server.url, poll_interval_s=0.5)
        times = _up_run_down(lab, adapter, fake, slurm_plan("fluence", host_resources))
    print(f"fluence: up {times['up_s']:.0f} s, first job line after {times['first_job_s']:.0f} s")


def test_burst_runs_srun_on_two_local_nodes_and_leaves_nothing(lab: Lab, host_resources: tuple[int, int]) -> None:
    """`provisioner burst SPEC -- hostname` (lifecycle.burst.run_burst) on two booted Lambda nodes:
    exit 0, both node names in the job's output, zero instances and no node left. Prints the wall
    time from the call to the first job line (docs/benchmarks.md)."""
    from provisioner.providers.lambda_.provider import LambdaProvider

    from provisioner.lifecycle.burst import BurstOptions, run_burst

    plan = slurm_plan("lambda", host_resources)
    fake = BackedLambdaFake(lab.machines, api_key=API_KEY)
    lines: list[tuple[float, str]] = []
    started = time.monotonic()

    def emit(event: str, /, *, message: str, **fields: Any) -> None:
        if event == "job-output":
            lines.append((time.monotonic() - started, message))

    with serve(fake) as server:
        adapter = LambdaProvider(API_KEY, base_url=server.url, poll_interval_s=0.5)
        key = _key(lab, realize.cluster_secrets(plan.cluster_id))
        runtime = realize.Runtime(
            remote=SshRemote(key, lab.workdir / "known_hosts", ssh=str(lab.ssh_wrapper())),
            provider_for=lambda name: adapter, emit=emit,
            timeouts=realize.Timeouts(running_s=120, ready_s=90, deleted_s=120, interval_s=1, max_interval_s=2))
        started = time.monotonic()
        # No GPUs here, so the GPU validation gate would refuse the job: skipped, as --skip-validation does.
        code = run_burst([plan], ["hostname"], BurstOptions(skip_validation=True), runtime)
        total_s = time.monotonic() - started
        assert code == 0, lines
        assert sorted(line for _, line in lines) == sorted(node.name for node in plan.nodes)
        assert fake.instance_count() == 0
    lab.machines.settle()
    assert lab.machines.running() == [] and left_running(lab.machines.stopped) == []
    print(f"burst: first job line after {lines[0][0]:.1f} s; whole burst (down included) {total_s:.1f} s")
