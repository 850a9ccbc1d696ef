"""The Pulumi engine's code on booted nodes. No ``pulumi`` CLI here, so the engine's two halves are
driven as it drives them: the program (``GpuCluster``, registered under Pulumi's mocks, as
``pulumi up`` runs it) says which dynamic resources to make; each (the Lambda firewall, then
``NeocloudNodes``, then ``ClusterTopology``, the SSH pass that brings the munge key) is checked and
created through the dynamic provider's own gRPC server (``python -m pulumi.dynamic``, the process the
engine starts) against the Lambda fake whose instances are systemd-nspawn nodes
(tests/boot/backed.py); then ``up --engine pulumi``'s last step (``lifecycle.realize.await_stack``:
wait until the nodes run, Slurm ready) runs;
``srun -N2 hostname`` prints both names; Delete through the dynamic provider leaves nothing at the
fake and no node running.

SSH goes through the test namespace (an ``ssh`` wrapper, tests/boot/inprocess.py):
the installed CLI's own SSH paths are booted in tests/boot/test_boot_cli.py.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pulumi.runtime.proto import provider_pb2

from provisioner.lifecycle import realize
from provisioner.providers.base import owner_id
from provisioner.realize.hostkeys import hostkey_tokens
from provisioner.realize.inputs import RunFacts, realize_input
from provisioner.realize.remote import SshRemote
from provisioner.stacks.model import cluster_args
from provisioner.testing.fakes.base import serve
from tests.boot.backed import BackedLambdaFake
from tests.boot.hostkeys import assert_pinned
from tests.boot.inprocess import API_KEY, Lab, lab, lambda_plan  # noqa: F401
from tests.boot.nodes import left_running
from tests.test_engine_matrix import DYNAMIC, _struct, _unsecret, wired_step
from tests.test_stack_cluster import realize as register
from tests.test_stack_grpc import dynamic_provider

pytestmark = [pytest.mark.boot, pytest.mark.system, pytest.mark.slow, pytest.mark.timeout(600)]


def test_the_pulumi_engines_dynamic_provider_boots_nodes_that_run_srun_and_deletes_them(
    lab: Lab,  # noqa: F811
    host_resources: tuple[int, int],
    tmp_path: Path,
) -> None:
    from provisioner.providers.lambda_.provider import LambdaProvider

    plan = lambda_plan(host_resources)
    names = sorted(node.name for node in plan.nodes)
    secrets = realize.cluster_secrets(plan.cluster_id)  # the state dir's, as the engine keeps them
    tokens = hostkey_tokens(plan, secrets)  # what the boot data carries: the pinned host keys
    run = RunFacts(owner=owner_id(), expires_at=None)  # as stacks.program.build_args passes them
    args = cluster_args(plan, realize_input(plan, secrets, run), run)
    recorder = register(args, plan=plan, secrets=secrets).recorder
    order = [
        r
        for kind in ("NeocloudFirewall", "NeocloudNodes", "ClusterTopology")
        for r in recorder.resources
        if r.typ == DYNAMIC + kind
    ]
    assert [r.typ for r in order][-2:] == [DYNAMIC + "NeocloudNodes", DYNAMIC + "ClusterTopology"]

    fake = BackedLambdaFake(lab.machines, api_key=API_KEY)
    with serve(fake) as server:
        adapter = LambdaProvider(API_KEY, base_url=server.url, poll_interval_s=0.5)
        key = lab.key(secrets)
        remote = SshRemote(key, lab.workdir / "known_hosts", ssh=str(lab.ssh_wrapper()), hostkey_tokens=tokens)
        runtime = realize.Runtime(
            remote=remote,
            provider_for=lambda _name: adapter,
            timeouts=realize.Timeouts(running_s=120, ready_s=120, deleted_s=120, interval_s=1, max_interval_s=2),
        )
        env = {"PROVISIONER_LAMBDA_API_URL": server.url, "PROVISIONER_LAMBDA_API_KEY": API_KEY}
        made = []
        with dynamic_provider(tmp_path, env) as engine:
            try:
                started = time.monotonic()
                for resource in order:
                    urn = f"urn:pulumi:test::gpu-cluster::{resource.typ}::{resource.name}"
                    props = _unsecret(resource.inputs)
                    if resource.typ == DYNAMIC + "ClusterTopology":  # the SSH pass, through the test namespace
                        props = wired_step(props, made[-1][1], remote)
                    checked = engine.Check(provider_pb2.CheckRequest(urn=urn, olds=_struct({}), news=_struct(props)))
                    assert list(checked.failures) == []
                    made.append((urn, engine.Create(provider_pb2.CreateRequest(urn=urn, properties=checked.inputs))))
                assert fake.instance_count() == len(names) and len(lab.machines.running()) == len(names)
                try:
                    by_name = realize.await_stack(plan, runtime)
                except Exception as exc:
                    raise AssertionError(f"await_stack: {exc}\n{lab.node_logs()}") from None
                up_s = time.monotonic() - started
                head = by_name[plan.head.name].public_ip or by_name[plan.head.name].private_ip
                assert head in lab.machines.addresses.values()
                assert_pinned(lab.machines, lab.workdir / "known_hosts", set(tokens.values()))
                srun = lab.ssh(key, head, "srun -N2 --immediate=60 hostname")
                assert srun.returncode == 0, srun.stderr + lab.node_logs()
                assert sorted(srun.stdout.split()) == names, srun.stdout + srun.stderr
            finally:
                for urn, created in reversed(made):
                    engine.Delete(provider_pb2.DeleteRequest(id=created.id, urn=urn, properties=created.properties))
        assert fake.instance_count() == 0 and fake.firewall.rulesets == {}
        assert fake.validation_errors == []
    lab.machines.settle()
    assert lab.machines.running() == [] and left_running(lab.machines.stopped) == []
    print(f"pulumi engine path: create -> Slurm ready on both nodes {up_s:.0f} s")
