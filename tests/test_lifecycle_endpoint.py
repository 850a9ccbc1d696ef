"""The direct engine reaches container nodes on their mapped SSH endpoint, not port 22.

RunPod publishes each pod's 22/tcp on another public port; Vast.ai on one of the instance's
direct ports. A cluster is brought up on the validating fake with a stand-in Remote that records
every SSH target; the targets must be the host and port the fake's API answered for that node
(the SSH bootstrap as the image's login user, the readiness check as the cluster user), and
``provisioner ssh --print`` / ``outputs`` must name the same endpoint.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from provisioner.cli import main
from provisioner.lifecycle.realize import bring_up, cluster_nodes, head_target, tear_down
from provisioner.providers.base import Node, NodeStatus
from provisioner.realize.bootstrap_ssh import SshTarget
from provisioner.realize.readiness import NotReadyError, wait_ready
from provisioner.realize.remote import SshRemote, ssh_target, ssh_text
from provisioner.validation.runner import CommandResult
from tests.conftest import need_shared
from tests.test_bootstrap_ssh import Sshd, rig  # noqa: F401  (rig: a real sshd on a free port, as root)
from tests.test_lifecycle_support import API_KEYS, StandInRemote, instant_runtime, plans_for, served_fake

RUNPOD_CLUSTER_SPEC = """\
name: lc-rpc
gpus: {model: [H100], count: 16}
nodes: {count: 2}
control_plane: slurm
providers: {allow: [runpod]}
workload: {hours: 1}
"""

VAST_SPEC = """\
name: lc-vast
gpus: {model: [RTX4090], count: 1}
nodes: {count: 1}
control_plane: slurm
providers: {allow: [vastai]}
workload: {hours: 1}
"""


@dataclass
class RecordingRemote(StandInRemote):
    """The stand-in Remote, keeping where each call went: (kind, node, user, host, port)."""

    targets: list[tuple[str, str, str, str, int]] = field(default_factory=list)

    def _note(self, kind: str, target: SshTarget) -> None:
        self.targets.append((kind, target.node_name, target.user, target.host, target.port))

    def run(self, target: SshTarget, argv: Sequence[str], *, timeout_s: float = 60.0) -> CommandResult:
        self._note(argv[0], target)
        return super().run(target, argv, timeout_s=timeout_s)

    def stream(
        self, target: SshTarget, argv: Sequence[str], on_line: Callable[[str], None], *, timeout_s: float | None = None
    ) -> int:
        self._note("stream", target)
        return super().stream(target, argv, on_line, timeout_s=timeout_s)

    def bootstrap(self, target: SshTarget, script: str, *, timeout_s: float = 3600) -> None:
        self._note("bootstrap", target)
        super().bootstrap(target, script, timeout_s=timeout_s)


@pytest.fixture(autouse=True)
def _state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "state"
    monkeypatch.setenv("PROVISIONER_STATE_DIR", str(folder))
    return folder


def test_runpod_cluster_is_bootstrapped_and_checked_on_the_mapped_ports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    need_shared("provider-apis", "runpod", "openapi-rest-v2.json")
    plan = next(p for p in plans_for(RUNPOD_CLUSTER_SPEC, tmp_path, count=20) if p.option.region == "US-KS-2")
    names = [node.name for node in plan.nodes]
    remote = RecordingRemote(nodes=names)
    events: list[dict[str, Any]] = []
    with served_fake("runpod", monkeypatch) as (app, _server):
        record = bring_up(plan, instant_runtime(remote, events))
        assert record.status == "up" and sorted(record.node_ids) == names
        # What the API answers for each member pod: its own published 22/tcp.
        mapped = {
            name: (app.pods[pod_id]["ssh"]["direct"]["host"], app.pods[pod_id]["ssh"]["direct"]["port"])
            for name, pod_id in record.node_ids.items()
        }
        assert all(port != 22 for _host, port in mapped.values()) and len(set(mapped.values())) == 2
        head = plan.head.name
        # Every node bootstrapped twice over SSH (boot-time script done, then the role's) as root.
        bootstraps = [t for t in remote.targets if t[0] == "bootstrap"]
        assert bootstraps == [("bootstrap", name, "root", *mapped[name]) for name in names for _ in range(2)]
        # The control plane asked on the head as the cluster user, at the head's endpoint.
        sinfo = {t for t in remote.targets if t[0] == "sinfo"}
        assert sinfo == {("sinfo", head, "ml", *mapped[head])}
        assert f"ssh -p {mapped[head][1]} ml@{mapped[head][0]}" in events[-1]["message"]

        _rec, nodes = cluster_nodes(plan.cluster_id, instant_runtime(remote))
        target = head_target(record, nodes)
        assert (target.host, target.port, target.user) == (*mapped[head], "ml")

        capsys.readouterr()
        assert main(["ssh", plan.cluster_id, "--print", "--", "sinfo"]) == 0
        argv = shlex.split(capsys.readouterr().out)
        assert argv[argv.index("-p") + 1] == str(mapped[head][1]) and f"ml@{mapped[head][0]}" in argv
        assert main(["ssh", plan.cluster_id, "--node", names[1], "--print"]) == 0
        argv = shlex.split(capsys.readouterr().out)
        assert argv[argv.index("-p") + 1] == str(mapped[names[1]][1]) and argv[-1] == f"ml@{mapped[names[1]][0]}"
        assert main(["outputs", plan.cluster_id, "--json"]) == 0
        out = json.loads(capsys.readouterr().out)
        assert out["ssh_endpoints"] == {name: f"{host}:{port}" for name, (host, port) in mapped.items()}
        tear_down(plan.cluster_id, instant_runtime(remote))
        assert app.instance_count() == 0


def test_vast_node_is_checked_on_its_direct_port(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    need_shared("provider-apis", "vastai", "openapi.yaml")
    monkeypatch.setitem(API_KEYS, "vastai", "vast-lc-key")
    plan = next(p for p in plans_for(VAST_SPEC, tmp_path, count=20) if p.option.region == "US")
    (name,) = [node.name for node in plan.nodes]
    remote = RecordingRemote(nodes=[name])
    with served_fake("vastai", monkeypatch) as (app, _server):
        record = bring_up(plan, instant_runtime(remote))
        raw = app.instances[int(record.node_ids[name])]
        (binding,) = raw["ports"]["22/tcp"]
        expected = (raw["public_ipaddr"], int(binding["HostPort"]))
        assert expected[1] != 22
        assert {t for t in remote.targets if t[0] == "sinfo"} == {("sinfo", name, "ml", *expected)}
        tear_down(plan.cluster_id, instant_runtime(remote))


def _node(name: str, **fields: Any) -> Node:
    return Node(provider="runpod", id=f"id-{name}", name=name, cluster_id="c", status=NodeStatus.RUNNING, **fields)


def test_targets_and_text_follow_the_endpoint() -> None:
    mapped = ssh_target(_node("a-0", public_ip="203.0.113.5", ssh_host="203.0.113.5", ssh_port=41022), "ml")
    assert mapped is not None and (mapped.host, mapped.port, mapped.node_name) == ("203.0.113.5", 41022, "a-0")
    assert ssh_text(mapped) == "-p 41022 ml@203.0.113.5"
    proxy = ssh_target(_node("a-1", public_ip="192.0.2.45", ssh_host="ssh2.vast.ai", ssh_port=10882), "root")
    assert proxy is not None and (proxy.host, proxy.port) == ("ssh2.vast.ai", 10882)
    vm = ssh_target(_node("a-2", public_ip="198.51.100.7", private_ip="10.0.0.7"), "ml")
    assert vm is not None and (vm.host, vm.port) == ("198.51.100.7", 22) and ssh_text(vm) == "ml@198.51.100.7"
    assert ssh_target(_node("a-3"), "ml") is None


def test_readiness_refuses_a_node_without_an_endpoint(tmp_path: Path) -> None:
    plan = plans_for(VAST_SPEC, tmp_path, count=1)[0]
    (name,) = [node.name for node in plan.nodes]
    remote = RecordingRemote(nodes=[name])
    with pytest.raises(NotReadyError, match=name):
        wait_ready(plan, remote, {name: _node(name)}, instant_runtime(remote))
    assert remote.targets == []
    wait_ready(
        plan,
        remote,
        {name: _node(name, public_ip="192.0.2.9", ssh_host="192.0.2.9", ssh_port=40001)},
        instant_runtime(remote),
    )
    assert {t[3:] for t in remote.targets} == {("192.0.2.9", 40001)}


@pytest.mark.system
def test_openssh_reaches_a_node_on_its_mapped_port(rig: tuple[Sshd, Any, Path]) -> None:  # noqa: F811
    """A real sshd on a free port stands in for a pod's published 22/tcp; the node's public address
    is a documentation address nothing answers on, so only the endpoint can succeed."""
    server, runner, tmp = rig
    node = _node("lc-0", public_ip="203.0.113.5", ssh_host="127.0.0.1", ssh_port=server.port)
    target = ssh_target(node, "root")
    assert target is not None and target.port == server.port != 22
    ssh = SshRemote(runner.key_file, tmp / "known-hosts", connect_timeout_s=5)
    done = ssh.run(target, ["echo", "on", "the", "port"])
    assert done.ok and done.stdout == "on the port\n"
