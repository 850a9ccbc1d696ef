"""``GpuCluster``: one Pulumi component for one planned cluster, on any provider.

The component takes ``ClusterArgs`` (built from the Plan up front by
``provisioner.stacks.model.cluster_args``), wraps every node's user data into a Pulumi
secret, and creates its children with ``parent=self``:

- ``aws``: ``provisioner.stacks.aws.build_aws`` (pulumi_aws);
- ``gcp``: ``provisioner.stacks.gcp.build_gcp`` (pulumi_gcp);
- the neoclouds: one ``NeocloudNodes`` dynamic resource (the CLI's own adapters), plus the
  provider's firewall for ``access.allowed_cidrs`` where its adapter can set one
  (``provisioner.stacks.firewall``);
- given the plan and the cluster secrets, on every provider, for a plan the SSH pass serves
  (``realize.sshpass.ssh_pass_nodes``: several nodes, a Slurm/Kubernetes control plane, an SSH
  bootstrap): one ``ClusterTopology`` step after the nodes (``provisioner.stacks.topology``), the
  direct engine's SSH pass, which brings the munge key / k3s token to the nodes (never in their
  boot files) and applies the provider's switch topology (Slurm topology.conf, Kueue rack/block
  labels) where the provider tells one.

Counts and names come from the Plan, never from inside ``.apply()``. Outputs (registered at
the end): ``head_address``, ``ssh_command``, ``nodes`` (name, role, public and private
address per node), ``hourly_usd`` (exact decimal text), ``expires_at`` (ISO UTC or ""),
``shared_fs`` (managed filesystem endpoint, or None), ``topology`` ({node: [switch, ...]} as
applied; {} without a topology step or when the provider told none). No output holds a secret.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi

from provisioner.errors import StackError
from provisioner.plan import Plan
from provisioner.secrets import ClusterSecrets
from provisioner.stacks.built import Built, BuiltNode
from provisioner.stacks.model import ClusterArgs

TYPE_TOKEN = "provisioner:index:GpuCluster"


def _neocloud_nodes(args: ClusterArgs) -> list[dict[str, Any]]:
    """Each node's final NodeSpec (``args.specs``: the realize input's, ``realize.inputs``, as the direct
    engine creates it: role, bootstrap, owner, expiry, lease, reservation fields) as plain fields,
    minus the user data (a secret beside them) and with the login key, which may be an Output here."""
    nodes = []
    for spec in args.specs:
        item: dict[str, Any] = spec.model_dump(
            mode="json", exclude={"user_data", "ssh_public_key"}, exclude_none=True, exclude_defaults=True
        )
        # Always spelled out, as every stack so far recorded them (diff compares them: no replacement).
        item.update(
            name=spec.name, instance_type=spec.instance_type, region=spec.region, gpus=spec.gpus, spot=spec.spot
        )
        if args.ssh_public_key is not None:
            item["ssh_public_key"] = args.ssh_public_key
        nodes.append(item)
    return nodes


def build_neocloud(
    parent: pulumi.Resource,
    args: ClusterArgs,
    user_data: Mapping[str, pulumi.Output[str]],
    adapter_options: Mapping[str, Any] | None = None,
) -> Built:
    """The nodes through ``NeocloudNodes``, and the provider's firewall where it has one."""
    from provisioner.stacks.firewall import firewall_for
    from provisioner.stacks.neocloud import NeocloudNodes

    child = pulumi.ResourceOptions(parent=parent)
    firewall = firewall_for(parent, args, adapter_options)
    secret: pulumi.Output[Any] | None = None
    if user_data:
        secret = pulumi.Output.secret(pulumi.Output.all(**user_data))
    resource = NeocloudNodes(
        f"{args.cluster_id}-nodes",
        provider=args.provider,
        cluster_id=args.cluster_id,
        nodes=_neocloud_nodes(args),
        user_data=secret,
        adapter_options=adapter_options,
        opts=pulumi.ResourceOptions.merge(
            child, pulumi.ResourceOptions(depends_on=[firewall] if firewall is not None else None)
        ),
    )

    def address_of(name: str, ips: pulumi.Output[list[str]]) -> pulumi.Output[str]:
        def pick(values: list[Any]) -> str:
            names, found = values
            return str(dict(zip(names or [], found or [], strict=False)).get(name, ""))

        return pulumi.Output.all(resource.node_names, ips).apply(pick)

    built = [
        BuiltNode(
            node.name,
            node.role,
            address_of(node.name, resource.public_ips),
            address_of(node.name, resource.private_ips),
            address_of(node.name, resource.node_ids),
        )
        for node in args.nodes
    ]
    return Built(built)


class GpuCluster(pulumi.ComponentResource):
    """A planned GPU cluster: its nodes, network, firewall, bootstrap and outputs.

    Raises StackError for a provider no builder serves. Creating it only registers
    resources; the engine creates them (idempotently, per Pulumi's state).
    """

    head_address: pulumi.Output[str]
    ssh_command: pulumi.Output[str]
    nodes: pulumi.Output[list[dict[str, str]]]
    hourly_usd: pulumi.Output[str]
    expires_at: pulumi.Output[str]
    shared_fs: pulumi.Output[Any]
    topology: pulumi.Output[Any]

    def __init__(
        self,
        name: str,
        args: ClusterArgs,
        opts: pulumi.ResourceOptions | None = None,
        *,
        adapter_options: Mapping[str, Any] | None = None,
        plan: Plan | None = None,
        secrets: ClusterSecrets | pulumi.Output[ClusterSecrets] | None = None,
    ) -> None:
        """``plan`` and ``secrets`` (the plan ``args`` was built from, the secrets it was rendered
        with) give the cluster its ``ClusterTopology`` step (the SSH pass); without them the nodes
        get no secret and keep the placement guessed at render time."""
        super().__init__(TYPE_TOKEN, name, None, opts)
        if plan is not None and plan.cluster_id != args.cluster_id:
            raise StackError(f"GpuCluster: the plan is cluster {plan.cluster_id}, the args {args.cluster_id}")
        user_data = {node: pulumi.Output.secret(text) for node, text in args.user_data.items()}
        built = self._build(args, user_data, adapter_options)
        head = built.nodes[0]
        self.head_address = head.public_ip
        self.ssh_command = head.public_ip.apply(lambda ip: f"ssh {args.ssh_user}@{ip}" if ip else "")
        self.nodes = pulumi.Output.all(*[pulumi.Output.all(n.public_ip, n.private_ip) for n in built.nodes]).apply(
            lambda pairs: [
                {"name": n.name, "role": n.role, "public_ip": pub or "", "private_ip": priv or ""}
                for n, (pub, priv) in zip(built.nodes, pairs, strict=True)
            ]
        )
        self.hourly_usd = pulumi.Output.from_input(str(args.hourly_usd))
        self.expires_at = pulumi.Output.from_input(args.expires_text)
        self.shared_fs = built.shared_fs if built.shared_fs is not None else pulumi.Output.from_input(None)
        self.topology = self._topology(args, built, plan, secrets, adapter_options)
        self.register_outputs(
            {
                "head_address": self.head_address,
                "ssh_command": self.ssh_command,
                "nodes": self.nodes,
                "hourly_usd": self.hourly_usd,
                "expires_at": self.expires_at,
                "shared_fs": self.shared_fs,
                "topology": self.topology,
            }
        )

    def _topology(
        self,
        args: ClusterArgs,
        built: Built,
        plan: Plan | None,
        secrets: ClusterSecrets | pulumi.Output[ClusterSecrets] | None,
        adapter_options: Mapping[str, Any] | None,
    ) -> pulumi.Output[Any]:
        """The ``ClusterTopology`` step (the SSH pass) after the nodes, where one applies; its ``topology``
        output. Every provider: the munge key and the k3s token reach the nodes only through it."""
        from provisioner.realize.sshpass import ssh_pass_nodes
        from provisioner.stacks.topology import ClusterTopology, secret_fields

        ids = {node.name: node.id for node in built.nodes if node.id is not None}
        if plan is None or secrets is None or not ssh_pass_nodes(plan) or len(ids) != len(built.nodes):
            return pulumi.Output.from_input({})
        fields = secrets.apply(secret_fields) if isinstance(secrets, pulumi.Output) else secret_fields(secrets)
        step = ClusterTopology(
            f"{args.cluster_id}-topology",
            plan=plan,
            node_ids=ids,
            public_ips={node.name: node.public_ip for node in built.nodes},
            secrets=fields,
            project=built.project,
            adapter_options=adapter_options,
            opts=pulumi.ResourceOptions(parent=self),
        )
        return step.topology

    def _build(
        self, args: ClusterArgs, user_data: dict[str, pulumi.Output[str]], adapter_options: Mapping[str, Any] | None
    ) -> Built:
        from provisioner.providers.registry import facts

        found = facts().get(args.provider)
        if found is None:
            raise StackError(f"no stack builder for provider {args.provider!r}")
        if found.stack == "pulumi_aws":  # the builder the provider's FACTS name
            from provisioner.stacks.aws import build_aws

            return build_aws(self, args, user_data)
        if found.stack == "pulumi_gcp":
            from provisioner.stacks.gcp import build_gcp

            return build_gcp(self, args, user_data)
        return build_neocloud(self, args, user_data, adapter_options)


__all__ = ["TYPE_TOKEN", "GpuCluster", "build_neocloud"]
