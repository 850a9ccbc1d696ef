"""What users run, booted: the installed ``provisioner`` CLI, as a subprocess, brings a Slurm cluster
up on a provider fake whose instances are systemd-nspawn nodes (tests/boot/cli_lab.py: the user's
HOME, the ``PROVISIONER_<P>_API_URL`` wiring, the default state dir, the system ``ssh``), runs
jobs on it, takes it down and collects nothing. The engine is the default one (direct: no pulumi
CLI on this machine's PATH, said in its first line). Three ways of buying and bootstrapping:

- Lambda: two instances, cloud-init user data, then the SSH pass. The spec turns
  ``slurm.accounting`` on (MariaDB and slurmdbd on the head): ``sacct`` lists the ``srun`` job. The
  rendered node firewall lets SSH in from ``access.allowed_cidrs`` and the other node only. The user
  data holds no munge key. ``up`` again on the cluster buys nothing and reruns the SSH pass, in which
  every one-off bootstrap step says "done earlier".
- RunPod: an Instant Cluster (one product of two member pods bought whole, the bootstrap as the
  pods' start command); also ``burst`` (up, job, down in one command) and a killed ``up`` that ``gc``
  collects.
- Fluence: a VM that takes no user data, bootstrapped wholly over SSH; one node, as a Fluence
  Slurm cluster can only be (no private network between its VMs: the optimizer refuses two).

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
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.boot.backed import Machines
from tests.boot.cli_lab import CLUSTER, DENIED, OPERATOR, User, node_logs, user_lab
from tests.boot.hostkeys import assert_pinned
from tests.boot.nodes import Machine, left_running, wait_for

pytestmark = [pytest.mark.boot, pytest.mark.system, pytest.mark.slow, pytest.mark.timeout(1200)]

NODES = [f"{CLUSTER}-0", f"{CLUSTER}-1"]
# What the image's wrapper changes (nodes.SLURM_COMPAT), rendered value -> the one the daemons run.
CGROUP_LINES = {
    "ProctrackType=proctrack/cgroup": "ProctrackType=proctrack/linuxproc",
    "TaskPlugin=task/cgroup,task/affinity": "TaskPlugin=task/affinity",
    "JobAcctGatherType=jobacct_gather/cgroup": "JobAcctGatherType=jobacct_gather/linux",
}
# Connects from a source address of the namespace to port 22: the server's first 4 bytes, or the error.
PROBE = (
    "import socket,sys\ns=socket.socket()\ns.bind((sys.argv[1],0))\ns.settimeout(3)\n"
    "try:\n s.connect((sys.argv[2],22)); print(s.recv(4).decode())\nexcept OSError as e: print(type(e).__name__)"
)
RUN_HEADER = re.compile(r"^provisioner-bootstrap: \S+ node of ", re.M)  # the first line of each bootstrap run


def _by_hostname(machines: Machines) -> dict[str, tuple[str, Machine]]:
    """Each running node by its hostname: (its address on the bridge, the machine)."""
    return {m.exec("hostname").stdout.strip(): (machines.addresses[iid], m) for iid, m in machines.nodes.items()}


def _up(user: User, fake: Any, machines: Machines, nodes: list[str]) -> float:
    """``up`` as a user runs it; returns its wall time. Asserts the engine line, the default state
    dir, and what the fake sold."""
    started = time.monotonic()
    up = user.run("up", "spec.yaml", "--catalog", "catalog.json")
    up_s = time.monotonic() - started
    assert up.returncode == 0, up.stdout + up.stderr + node_logs(machines)
    assert up.stderr.splitlines()[0].startswith("engine: direct (no pulumi CLI on PATH"), up.stderr
    # The default state dir under the user's XDG_STATE_HOME holds the record and the cluster's key.
    assert CLUSTER in "".join(str(p) for p in user.state.rglob("*")), sorted(user.state.rglob("*"))
    assert fake.instance_count() == len(nodes) and len(machines.running()) == len(nodes)
    if fake.provider == "runpod":  # one Instant Cluster holds both pods, not two plain pods
        (product,) = fake.cluster_routes.clusters
        assert sorted(pod["id"] for pod in fake.cluster_routes.members(product)) == sorted(machines.running())
    status = user.run("status", CLUSTER, timeout=120)
    assert status.returncode == 0, status.stderr
    assert all(name in status.stdout for name in nodes), status.stdout
    # The first line names the cluster, the run (state.new_run_id: date-time-hex), provider and engine.
    headline = rf"{CLUSTER} \(run \d{{8}}-\d{{6}}-[0-9a-f]{{6}}\): up on {fake.provider} \(direct\), "
    assert re.match(headline, status.stdout), status.stdout
    return up_s


def _known_hosts(user: User) -> Path:
    """The cluster's known_hosts in the default state dir (host keys pinned by the SSH pass)."""
    (found,) = user.state.rglob("known_hosts")
    return found


def _srun(user: User, machines: Machines, nodes: list[str]) -> None:
    srun = user.run("ssh", CLUSTER, "--", "srun", f"-N{len(nodes)}", "--immediate=60", "hostname", timeout=180)
    assert srun.returncode == 0, srun.stdout + srun.stderr + node_logs(machines)
    assert sorted(srun.stdout.split()) == nodes, srun.stdout + srun.stderr


def _slurm_conf_as_delivered(head: Machine) -> None:
    delivered = head.exec("cat", "/etc/provisioner-test/slurm.conf.delivered").stdout.splitlines()
    running = head.exec("cat", "/etc/slurm/slurm.conf").stdout.splitlines()
    assert delivered and len(delivered) == len(running)
    changed = {a: b for a, b in zip(delivered, running, strict=True) if a != b}
    # Only the cgroup plugins the nspawn node cannot run, where the rendered config names them
    # (jobacct_gather only with slurm.accounting).
    assert changed == {line: other for line, other in CGROUP_LINES.items() if line in delivered}
    assert "ProctrackType=proctrack/cgroup" in changed and "TaskPlugin=task/cgroup,task/affinity" in changed


def _down_and_gc(user: User, fake: Any, machines: Machines) -> float:
    started = time.monotonic()
    down = user.run("down", CLUSTER)
    down_s = time.monotonic() - started
    assert down.returncode == 0, down.stdout + down.stderr
    assert fake.instance_count() == 0  # nothing left at the provider: no instance or pod, no firewall or cluster
    assert {
        "lambda": lambda: fake.firewall.rulesets,
        "runpod": lambda: fake.cluster_routes.clusters,
        "fluence": lambda: {},
    }[fake.provider]() == {}
    machines.settle()
    assert machines.running() == [] and left_running(machines.stopped) == []
    gc = user.run("gc", timeout=300)
    assert gc.returncode == 0 and "nothing to collect" in gc.stdout, gc.stdout + gc.stderr
    assert f"checked: {fake.provider}" in gc.stdout, gc.stdout
    assert fake.validation_errors == []
    return down_s


def _accounting(user: User) -> None:
    """slurmctld records the srun job in slurmdbd (asynchronously, through its agent queue)."""

    def job_in_sacct() -> tuple[bool, str]:
        out = user.run("ssh", CLUSTER, "--", "sacct", "-n", "-X", "-P", "-o", "JobID,JobName,State,NNodes", timeout=60)
        return out.stdout.split() == ["1|hostname|COMPLETED|2"], out.stdout + out.stderr

    wait_for(job_in_sacct, "sacct to list the srun job", 60)
    clusters = user.run("ssh", CLUSTER, "--", "sacctmgr", "-n", "-P", "list", "cluster", "format=cluster", timeout=60)
    # slurm.conf's ClusterName: the spec's name with "_" for "-" (slurmdbd names a table after it)
    assert clusters.stdout.split() == ["cli_boot"], clusters.stdout + clusters.stderr


def _firewall_and_user_data(user: User, nodes: dict[str, tuple[str, Machine]]) -> None:
    """The node firewall lets SSH in from access.allowed_cidrs and the cluster's nodes only; the
    user data each VM booted from holds no munge key (it travels over the SSH pass)."""
    (head_ip, head), (worker_ip, worker) = nodes[NODES[0]], nodes[NODES[1]]

    def probe(source: str, target: str) -> str:
        return user.netns.run(["python3", "-c", PROBE, source, target], timeout=30).stdout.strip()

    assert probe(OPERATOR, head_ip) == "SSH-" and probe(OPERATOR, worker_ip) == "SSH-"
    from_worker = worker.exec("bash", "-c", f"exec 3<>/dev/tcp/{head_ip}/22 && head -c 4 <&3", timeout=20)
    assert from_worker.stdout == "SSH-", from_worker.stderr
    assert probe(DENIED, head_ip) in ("TimeoutError", "timeout")  # dropped, not refused
    ruleset = head.exec("nft", "list", "table", "inet", "provisioner").stdout
    assert OPERATOR in ruleset and head_ip in ruleset and worker_ip in ruleset, ruleset
    for _, machine in nodes.values():
        munge = machine.exec("base64", "-w0", "/etc/munge/munge.key").stdout.strip()
        user_data = (machine.root / "var" / "lib" / "cloud" / "seed" / "nocloud" / "user-data").read_text()
        assert len(munge) > 40 and munge not in user_data


def _last_run(machine: Machine) -> str:
    """The node's last bootstrap run, from its log (each run appends, beginning with its header)."""
    log = machine.exec("cat", "/var/log/provisioner/bootstrap.log").stdout
    starts = [m.start() for m in RUN_HEADER.finditer(log)]
    assert starts, log
    return log[starts[-1] :]


def _up_again_reruns_only_what_must(
    user: User, fake: Any, machines: Machines, nodes: dict[str, tuple[str, Machine]]
) -> None:
    """``up`` on the cluster that is up as planned says there is nothing to do and bootstraps
    nothing; ``up`` after one killed before it marked the cluster up (its record still ``creating``)
    buys nothing, and the SSH pass runs again on both nodes with every one-off step of the role's
    bootstrap (``provisioner render``'s ssh/ROLE.sh) skipped."""
    rendered = user.run("render", "spec.yaml", "--catalog", "catalog.json", "--out", "rendered", timeout=120)
    assert rendered.returncode == 0, rendered.stderr
    one_off = {
        role: set(
            re.findall(
                r"^if begin_step (\S+) 0; then", (user.home / "rendered" / "ssh" / f"{role}.sh").read_text(), re.M
            )
        )
        for role in ("head", "worker")
    }
    assert len(one_off["head"]) >= 5 and one_off["head"] > one_off["worker"]  # the head's: MariaDB too
    for _, machine in nodes.values():  # the first SSH pass ran each step (cloud-init did not mark them)
        first = _last_run(machine)
        assert "done earlier" not in first and "FAILED" not in first, first
    bought = sorted(machines.running())
    runs = {
        name: len(RUN_HEADER.findall(m.exec("cat", "/var/log/provisioner/bootstrap.log").stdout))
        for name, (_, m) in nodes.items()
    }
    unchanged = user.run("up", "spec.yaml", "--catalog", "catalog.json")
    assert unchanged.returncode == 0, unchanged.stdout + unchanged.stderr
    assert f"cluster {CLUSTER} is up as planned: nothing to do" in unchanged.stderr, unchanged.stderr
    for name, (_, machine) in nodes.items():  # no second bootstrap
        log = machine.exec("cat", "/var/log/provisioner/bootstrap.log").stdout
        assert len(RUN_HEADER.findall(log)) == runs[name], log
    # As an up killed after its SSH pass leaves it: the record still says creating.
    record_path = user.state / "clusters" / f"{CLUSTER}.json"
    record = json.loads(record_path.read_text())
    record["status"] = "creating"
    record_path.write_text(json.dumps(record))
    again = user.run("up", "spec.yaml", "--catalog", "catalog.json")
    assert again.returncode == 0, again.stdout + again.stderr + node_logs(machines)
    assert fake.instance_count() == 2 and sorted(machines.running()) == bought
    for name, (_, machine) in nodes.items():
        second = _last_run(machine)
        role = "head" if name == NODES[0] else "worker"
        assert set(re.findall(r"step (\S+): done earlier", second)) == one_off[role], second
        assert "FAILED" not in second, second


@pytest.mark.parametrize("provider", ["lambda", "runpod"])
def test_the_installed_cli_brings_a_booted_cluster_up_runs_srun_and_leaves_nothing(
    provider: str,
    node_image: Path,
    host_resources: tuple[int, int],
) -> None:
    with user_lab(provider, node_image, host_resources, accounting=provider == "lambda") as (user, fake, machines):
        assert shutil.which("pulumi", path=user.env["PATH"]) is None, "this test is the direct engine's"
        up_s = _up(user, fake, machines, NODES)
        assert_pinned(machines, _known_hosts(user), len(NODES))  # each key proven by its node's own token
        _srun(user, machines, NODES)
        nodes = _by_hostname(machines)
        _slurm_conf_as_delivered(nodes[NODES[0]][1])
        if provider == "lambda":
            _accounting(user)
            _firewall_and_user_data(user, nodes)
            _up_again_reruns_only_what_must(user, fake, machines, nodes)
            _srun(user, machines, NODES)
        down_s = _down_and_gc(user, fake, machines)
    print(f"installed CLI, {provider}: up {up_s:.0f} s (Slurm ready on both nodes), down {down_s:.0f} s")


def test_a_fluence_vm_bootstrapped_over_ssh_only_runs_srun(node_image: Path, host_resources: tuple[int, int]) -> None:
    """Fluence GPU VMs take no user data: the node gets its whole bootstrap over SSH after boot."""
    nodes = [f"{CLUSTER}-0"]
    with user_lab("fluence", node_image, host_resources, nodes=1) as (user, fake, machines):
        up_s = _up(user, fake, machines, nodes)
        assert_pinned(machines, _known_hosts(user), 0)  # no boot data, no token: learnt on first use
        _srun(user, machines, nodes)
        (machine,) = machines.nodes.values()
        log = machine.exec("cat", "/var/log/provisioner/bootstrap.log").stdout
        assert len(RUN_HEADER.findall(log)) == 1 and "done earlier" not in log, log  # nothing ran it at boot
        down_s = _down_and_gc(user, fake, machines)
    print(f"installed CLI, fluence: up {up_s:.0f} s (bootstrap over SSH, Slurm ready), down {down_s:.0f} s")


def test_burst_runs_the_job_on_both_nodes_and_leaves_nothing(node_image: Path, host_resources: tuple[int, int]) -> None:
    """``provisioner burst SPEC -- hostname``: up, the job (its lines streamed), down, in one command;
    exit 0 and no record, node or Instant Cluster left. No GPUs here, so the validation gate is
    skipped (--skip-validation)."""
    with user_lab("runpod", node_image, host_resources) as (user, fake, machines):
        started = time.monotonic()
        burst = user.run(
            "burst", "spec.yaml", "--catalog", "catalog.json", "--skip-validation", "--json", "--", "hostname"
        )
        burst_s = time.monotonic() - started
        assert burst.returncode == 0, burst.stdout + burst.stderr + node_logs(machines)
        events = [json.loads(line) for line in burst.stdout.splitlines() if line.startswith("{")]
        assert sorted(e["line"] for e in events if e["event"] == "job-output") == NODES, burst.stdout
        assert fake.instance_count() == 0 and fake.cluster_routes.clusters == {}
        machines.settle()
        assert machines.running() == [] and left_running(machines.stopped) == []
        assert user.run("status", CLUSTER, timeout=120).returncode == 2  # a burst cluster leaves no record
        assert fake.validation_errors == []
    print(f"installed CLI, burst on runpod: {burst_s:.0f} s (up, job, down)")


def test_a_killed_up_is_collected_by_gc_cluster(node_image: Path, host_resources: tuple[int, int]) -> None:
    """``up`` SIGKILLed once its nodes are bought (a crashed client, no chance to clean up); then
    ``gc --cluster ID --yes`` (the installed CLI again) deletes what the fake still holds of it and
    forgets its record; no node is left running. On the RunPod Instant Cluster (its pods stop at
    once); every neocloud's kill-then-gc, Lambda's included, is tests/test_killed_up.py's (no boot)."""
    provider = "runpod"
    with user_lab(provider, node_image, host_resources) as (user, fake, machines):
        up = subprocess.Popen(
            user.argv("up", "spec.yaml", "--catalog", "catalog.json"),
            env=user.env,
            cwd=user.home,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
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
            assert f"would delete {provider} {CLUSTER} {name} (" in listed.stdout, listed.stdout + listed.stderr
        assert "its up died while creating" in listed.stdout and "2 node(s) to collect" in listed.stdout
        assert fake.instance_count() == 2  # listing deletes nothing
        gc = user.run("gc", "--cluster", CLUSTER, "--yes", timeout=300)
        assert gc.returncode == 0, gc.stdout + gc.stderr
        assert fake.instance_count() == 0
        machines.settle()
        assert machines.running() == [] and left_running(machines.stopped) == []
        again = user.run("status", CLUSTER, timeout=120)
        assert again.returncode == 2, again.stdout + again.stderr  # the record is gone with the nodes
