"""The SSH pass both engines run once every node of a cluster runs.

A node's boot-time bootstrap (user data, a container's start command) could not know the other
nodes' addresses, nor on Lambda/RunPod its own name, nor the provider's switch topology: with
more than one node (or an SSH-bootstrapped node), ``ssh_pass`` renders again with what is known
now and runs each node's bootstrap over SSH, head first. Each node proves its SSH host key with
the token its boot data carried before anything is sent (``Remote.bootstrap``, ``realize.hostkeys``).
The direct engine calls it after its nodes run; the stacks' ``ClusterTopology`` step calls the
same function.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from provisioner.capabilities import Bootstrap
from provisioner.errors import ProvisionerError, StackError
from provisioner.plan import Plan, PlanNode
from provisioner.providers.base import Node, Provider, SupportsTopology
from provisioner.realize.remote import Remote, login_user, ssh_target, ssh_text
from provisioner.realize.runtime import Runtime
from provisioner.realize.store_credentials import credentials_script, read_store_credentials
from provisioner.secrets import ClusterSecrets

BOOT_BOOTSTRAP_DONE = """#!/bin/bash
# Wait for the boot-time bootstrap to end (cloud-init on a VM; the start command's run, which
# holds the bootstrap lock, on a pod) so the SSH run does not race it.
# Not `cloud-init status --wait`: cloud-init 22.x reports done between two stages (before runcmd);
# boot-finished is written when its last stage ends.
if [ -d /run/systemd/system ] && command -v cloud-init >/dev/null; then
    for _ in $(seq 900); do [ -e /var/lib/cloud/instance/boot-finished ] && break; sleep 1; done
fi
if [ -e /run/provisioner/bootstrap.lock ] && command -v flock >/dev/null; then
    flock -w 900 /run/provisioner/bootstrap.lock true
fi
"""


def ssh_pass_nodes(plan: Plan) -> list[PlanNode]:
    """The nodes the SSH pass bootstraps once every node runs, head first: every node of a
    multi-node plan, of a control plane with secrets or of a spec naming the checkpoint store's
    credentials (the munge key, the k3s token, the store's keys travel only over SSH, never in user
    data), else the ones bootstrapped over SSH only. Pure."""
    secrets = plan.spec.control_plane.value in ("slurm", "kubernetes") or bool(
        plan.spec.checkpoint.credential_sources()
    )
    return [node for node in plan.nodes if node.bootstrap is Bootstrap.SSH or len(plan.nodes) > 1 or secrets]


@dataclass(frozen=True)
class SshPass:
    """What ``ssh_pass`` did: the nodes it bootstrapped, the switch topology it rendered (None:
    one flat switch) and the files rendered for it (secret ones included: never an output)."""

    nodes: tuple[str, ...] = ()
    topology: dict[str, list[str]] | None = None
    rendered: Mapping[str, str] = field(default_factory=dict, repr=False)


def ssh_pass(
    rt: Runtime, remote: Remote, provider: Provider, plan: Plan, secrets: ClusterSecrets, by_name: dict[str, Node]
) -> SshPass:
    """Once every node runs (``by_name``: the provider's nodes by name): ask the provider for its
    switch topology (``switch_paths``), render again with it and the nodes' addresses, and run each
    ``ssh_pass_nodes`` bootstrap over SSH (Slurm topology.conf, Kubernetes rack/block labels).
    The direct engine and the stacks' ``ClusterTopology`` step both call this. Blocks; raises
    what ``Remote.bootstrap`` raises (BootstrapError) and StackError for a node without an address."""
    nodes = ssh_pass_nodes(plan)
    if not nodes:
        return SshPass()
    topology = switch_paths(rt, provider, plan)
    rendered = _ssh_bootstrap(rt, remote, plan, secrets, by_name, nodes, topology)
    return SshPass(tuple(node.name for node in nodes), topology, rendered)


def switch_paths(rt: Runtime, provider: Provider, plan: Plan) -> dict[str, list[str]] | None:
    """The provider's placement of the nodes ({node: [switch, ...]}, outermost first: AWS
    DescribeInstanceTopology, GCE physical hosts) when it knows every node; else None (Slurm then
    gets one flat switch). A provider that cannot tell is not an error."""
    if not isinstance(provider, SupportsTopology):
        return None
    try:
        found = provider.topology(plan.cluster_id)
    except ProvisionerError as exc:
        rt.emit(
            "warning",
            message=f"no switch topology from {plan.option.provider} ({exc}); Slurm gets one flat switch",
            cluster=plan.cluster_id,
        )
        return None
    names = {node.name for node in plan.nodes}
    if set(found) != names:
        return None
    return found


def _ssh_bootstrap(
    rt: Runtime,
    remote: Remote,
    plan: Plan,
    secrets: ClusterSecrets,
    by_name: dict[str, Node],
    ssh_nodes: Sequence[PlanNode],
    topology: Mapping[str, Sequence[str]] | None = None,
) -> Mapping[str, str]:
    """Render again with the nodes' addresses (now known) and the provider's switch topology, and
    run each role's script over SSH, after writing the checkpoint store's credentials (when the spec
    names them; read from ``rt.environ`` before any node is reached). Returns the rendered files."""
    from provisioner.render import render_cluster

    store = read_store_credentials(plan.spec.checkpoint, rt.environ)
    if store is not None:
        rt.emit(
            "bootstrap",
            message=f"the checkpoint store's credentials ({', '.join(store.sources)}) go to "
            f"{len(ssh_nodes)} node(s) over SSH only",
            cluster=plan.cluster_id,
        )

    addresses = {name: node.private_ip or node.public_ip or "" for name, node in by_name.items()}
    rendered = render_cluster(
        plan, secrets, node_addresses={k: v for k, v in addresses.items() if v}, topology=topology
    )
    user = login_user(plan.option.provider)
    for node in ssh_nodes:  # head first: plan order
        target = ssh_target(by_name[node.name], user, node.name)
        if target is None:
            raise StackError(f"node {node.name} has no address to bootstrap over SSH")
        rt.emit(
            "bootstrap",
            message=f"bootstrapping {node.name} over SSH ({ssh_text(target)})",
            cluster=plan.cluster_id,
            node=node.name,
        )
        if node.bootstrap is Bootstrap.SSH:  # no boot data: no token can vouch for its host key
            rt.emit(
                "warning",
                message=f"{node.name}: its SSH host key is trusted on first use: "
                f"{plan.option.provider} boots it with no data that could carry a proof "
                "(docs/security.md, Host keys)",
                cluster=plan.cluster_id,
                node=node.name,
            )
        else:
            remote.bootstrap(target, BOOT_BOOTSTRAP_DONE)
        if store is not None:  # before the bootstrap: its sync timer finds them on its first run
            remote.bootstrap(target, credentials_script(store))
        remote.bootstrap(target, rendered[f"ssh/{node.role}.sh"])  # the one script that holds secrets
    return rendered


__all__ = ["BOOT_BOOTSTRAP_DONE", "SshPass", "ssh_pass", "ssh_pass_nodes", "switch_paths"]
