"""``ClusterTopology``: the stack's SSH pass, with the provider's switch placement of its nodes.

The Pulumi twin of the direct engine's SSH pass (``provisioner.realize.sshpass.ssh_pass``,
called here, not copied): once the nodes of a stack run, the adapter the CLI uses
(``providers.registry.get_provider``) lists them and, where it can tell, says where the provider
placed them (EC2 DescribeInstanceTopology, GCE ``physicalHostTopology``); the bootstrap is
rendered again with that topology and the nodes' addresses and run over SSH on every node, head
first. That run is the only way the munge key and the k3s token reach a node on either engine:
the boot files (user data, a pod's env, Vast.ai's onstart) carry only the cluster's public key.
Slurm gets its ``topology.conf`` (``topology/tree``), Kubernetes nodes their rack/block labels
for Kueue. A provider that cannot tell (the neoclouds, no permission, a type without topology)
gives one flat switch; AWS/GCP add a line in ``warnings`` when asked and refused.

``GpuCluster`` creates one on every provider for a plan the SSH pass serves
(``realize.sshpass.ssh_pass_nodes``) when the program hands it the plan and the cluster secrets
(``provisioner.stacks.program`` always does), depending on the nodes through its inputs
(``node_ids``, ``public_ips``), so it runs after every instance and address exists.

Operations:

- ``check``: ``plan_json`` is a plan of this provider and cluster; ``node_ids`` names exactly
  its nodes.
- ``create`` / ``update``: wait until the adapter lists every planned node running under the
  given instance id (``ready_timeout_s``), then ``ssh_pass``. Blocks until every node's
  bootstrap ends (it first waits for the boot-time cloud-init to finish). A node SSH cannot
  reach fails the operation with StackError; the nodes stay and the next ``pulumi up`` tries
  again (a failed create leaves no state for this resource).
- ``diff``: an update (never a replacement) when the instance ids, addresses, project or the
  plan change.
- ``read``: what the state holds (no call); ``delete``: nothing to undo: the nodes and their
  files go with their own resources.

The checkpoint store's credentials a spec names (``checkpoint.credentials_env``) are read by the
SSH pass from this process's environment (the Pulumi CLI's, inherited from ``up``), never from the
step's inputs: Pulumi's state holds only their names (realize/store_credentials.py).

The machine running ``pulumi up`` needs SSH (tcp/22) to the nodes: ``access.allowed_cidrs``.
The cluster secrets enter as a Pulumi secret and are never in the outputs; the SSH key is
written 0600 into a temporary folder for one operation and removed after it. Outputs:
``topology`` ({node: [switch, ...]}, {} when flat), ``topology_conf`` (the topology.conf the
head got, "" unless Slurm), ``node_labels`` ({node: {rack label, block label}}, Kubernetes),
``bootstrapped`` (node names), ``warnings``.

The pickled provider (Pulumi keeps it in the state) holds only plain adapter options and, in
tests, a stand-in ``Remote``: no client, key or credential.
"""

from __future__ import annotations

import contextlib
import hashlib
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pulumi
import pulumi.dynamic
from pydantic import ValidationError

from provisioner.errors import ProvisionerError, StackError
from provisioner.plan import Plan
from provisioner.providers.base import Node, NodeStatus, Provider
from provisioner.providers.registry import facts
from provisioner.secrets import ClusterSecrets
from provisioner.stacks.neocloud import close_adapter
from provisioner.waiting import WaitTimeout

DEFAULT_READY_TIMEOUT_S = 900.0
_OUTPUTS = ("plan_sha256", "topology", "topology_conf", "node_labels", "bootstrapped", "warnings")
_RECORDED = ("provider", "cluster_id", "node_ids", "public_ips", "project", "ready_timeout_s")
_FORBIDDEN_OPTIONS = frozenset({"api_key", "transport", "session", "credentials"})


def _sha256(text: str | None) -> str:
    return hashlib.sha256((text or "").encode()).hexdigest()


def _plan(props: Mapping[str, Any]) -> Plan:
    return Plan.model_validate_json(str(props.get("plan_json") or ""))


def _same_id(given: str, node: Node) -> bool:
    """An adapter's node id against the stack's: EC2 instance ids are equal; a GCE instance's
    Pulumi id is its path (projects/P/zones/Z/instances/NAME), the adapter's id its name."""
    return given == node.id or given.rsplit("/", 1)[-1] == node.id


class ClusterTopologyProvider(pulumi.dynamic.ResourceProvider):
    """Applies the provider's switch topology to a stack's running nodes (see the module docstring).

    ``adapter_options``: plain constructor options for the adapter (``limits``, ``retry``,
    ``timeout_s``, ``poll_interval_s``), never a key, session or client. ``remote``: the
    ``Remote`` to run the bootstrap with (tests); default OpenSSH with the cluster key.
    """

    def __init__(self, adapter_options: Mapping[str, Any] | None = None, remote: Any = None) -> None:
        super().__init__()
        options = dict(adapter_options or {})
        forbidden = sorted(set(options) & _FORBIDDEN_OPTIONS)
        if forbidden:
            raise StackError(f"ClusterTopology: {forbidden} must not be stored in Pulumi state")
        self.adapter_options = options
        self.remote = remote

    def check(self, _olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.CheckResult:
        failures: list[pulumi.dynamic.CheckFailure] = []
        try:
            plan = _plan(news)
        except ValidationError as exc:
            where = ".".join(str(part) for part in exc.errors()[0]["loc"])
            return pulumi.dynamic.CheckResult(
                news, [pulumi.dynamic.CheckFailure("plan_json", f"not a plan ({where}: {exc.errors()[0]['msg']})")]
            )
        if news.get("provider") != plan.option.provider:
            failures.append(pulumi.dynamic.CheckFailure("provider", f"the plan is for {plan.option.provider}"))
        if news.get("cluster_id") != plan.cluster_id:
            failures.append(pulumi.dynamic.CheckFailure("cluster_id", f"the plan is cluster {plan.cluster_id}"))
        ids = news.get("node_ids")
        if isinstance(ids, Mapping) and set(ids) != {node.name for node in plan.nodes}:  # unknown in a preview
            failures.append(pulumi.dynamic.CheckFailure("node_ids", "must name exactly the plan's nodes"))
        return pulumi.dynamic.CheckResult(news, failures)

    def create(self, props: dict[str, Any]) -> pulumi.dynamic.CreateResult:
        return pulumi.dynamic.CreateResult(f"{props['provider']}/{props['cluster_id']}/topology", self._apply(props))

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.UpdateResult:
        return pulumi.dynamic.UpdateResult(self._apply(news))

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.DiffResult:
        changed = [
            key
            for key in ("provider", "cluster_id", "node_ids", "public_ips", "project")
            if olds.get(key) != news.get(key)
        ]
        if olds.get("plan_sha256") != _sha256(news.get("plan_json")):
            changed.append("plan_json")
        return pulumi.dynamic.DiffResult(changes=bool(changed), replaces=[], delete_before_replace=False)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        """Nothing to undo: the nodes (and the files pushed to them) go with their own resources."""

    def _adapter(self, plan: Plan, props: Mapping[str, Any]) -> Provider:
        from provisioner.providers.registry import get_provider

        name = plan.option.provider
        options = dict(self.adapter_options)
        kind = facts()[name].stack  # the adapter's constructor options follow its stack builder's kind
        if kind == "pulumi_aws":
            options["regions"] = [plan.option.region]
        elif kind == "pulumi_gcp":
            options["zones"] = sorted({node.zone for node in plan.nodes if node.zone}) or None
            if props.get("project"):
                options["project"] = str(props["project"])
        return get_provider(name, **options)

    @contextlib.contextmanager
    def _remote(self, secrets: ClusterSecrets, plan: Plan) -> Iterator[Any]:
        if self.remote is not None:
            yield self.remote
            return
        from provisioner.realize.remote import SshRemote

        with tempfile.TemporaryDirectory(prefix="provisioner-topology-") as folder:
            yield SshRemote.for_cluster(secrets, Path(folder), plan=plan)

    def _apply(self, props: Mapping[str, Any]) -> dict[str, Any]:
        from provisioner.realize.launch import unanswerable
        from provisioner.realize.runtime import Runtime, Timeouts
        from provisioner.realize.sshpass import SshPass, ssh_pass

        plan = _plan(props)
        try:
            secrets = ClusterSecrets.model_validate(dict(props.get("secrets") or {}))
        except ValidationError:  # the model hides input values in its errors; say only which field
            raise StackError(f"ClusterTopology {plan.cluster_id}: the cluster secrets are not valid") from None
        warnings: list[str] = []
        if secrets.ssh_private_key is None and self.remote is None:
            warnings.append("the cluster secrets hold no SSH key: the topology was not applied to the nodes")
            return _outputs(props, plan, SshPass(), warnings)

        def emit(event: str, /, *, message: str, **_fields: Any) -> None:
            if event == "warning":
                warnings.append(message)

        adapter = self._adapter(plan, props)
        try:
            poll = float(getattr(adapter, "poll_interval_s", 5.0))
            rt = Runtime(
                provider_for=lambda _name: adapter,
                emit=emit,
                timeouts=Timeouts(
                    running_s=float(props.get("ready_timeout_s") or DEFAULT_READY_TIMEOUT_S),
                    interval_s=poll,
                    max_interval_s=max(poll, 30.0),
                ),
            )
            nodes = _running(rt, adapter, plan, props.get("node_ids") or {})
            silent = unanswerable(nodes.values()) if self.remote is None else []
            if silent:  # as the direct engine: say so now, not after the SSH timeouts
                raise StackError(
                    f"node(s) {', '.join(silent)} have documentation (TEST-NET) addresses where "
                    "no machine will ever answer SSH: a fake provider without nodes?"
                )
            with self._remote(secrets, plan) as remote:
                done = ssh_pass(rt, remote, adapter, plan, secrets, nodes)
        except WaitTimeout as exc:
            raise StackError(f"ClusterTopology {plan.cluster_id}: {exc}") from None
        except ProvisionerError as exc:
            raise StackError(f"ClusterTopology {plan.cluster_id}: {exc}") from None
        finally:
            close_adapter(adapter)
        return _outputs(props, plan, done, warnings)


def _running(rt: Any, adapter: Provider, plan: Plan, node_ids: Mapping[str, str]) -> dict[str, Node]:
    """The plan's nodes by name once the adapter lists each running (under its stack id when given)."""
    wanted = [node.name for node in plan.nodes]

    def mine(nodes: Sequence[Node]) -> dict[str, Node]:
        return {
            node.name: node
            for node in nodes
            if node.name in wanted and (node.name not in node_ids or _same_id(str(node_ids[node.name]), node))
        }

    def up(nodes: list[Node]) -> bool:
        found = mine(nodes)
        failed = [name for name, node in found.items() if node.status is NodeStatus.FAILED]
        if failed:
            raise StackError(f"node(s) {', '.join(failed)} of {plan.cluster_id} failed")
        return all(name in found and found[name].status is NodeStatus.RUNNING for name in wanted)

    listed = rt.wait(
        lambda: adapter.get_nodes(plan.cluster_id),
        up,
        timeout_s=rt.timeouts.running_s,
        what=f"the nodes of {plan.cluster_id} to run",
    )
    return mine(listed)


def _outputs(props: Mapping[str, Any], plan: Plan, done: Any, warnings: list[str]) -> dict[str, Any]:
    """The state Pulumi records: no secret, no plan text (its hash), what was applied."""
    labels: dict[str, dict[str, str]] = {}
    if done.nodes and plan.spec.control_plane.value == "kubernetes":
        from provisioner.render.kubernetes import TOPOLOGY_BLOCK_LABEL, TOPOLOGY_RACK_LABEL, node_labels

        for node in plan.nodes:
            if node.name in done.nodes:
                found = node_labels(plan, node.index, (done.topology or {}).get(node.name))
                labels[node.name] = {key: found[key] for key in (TOPOLOGY_BLOCK_LABEL, TOPOLOGY_RACK_LABEL)}
    outs = {key: props.get(key) for key in _RECORDED}
    outs.update(
        plan_sha256=_sha256(props.get("plan_json")),
        topology=dict(done.topology or {}),
        topology_conf=str(done.rendered.get("slurm/topology.conf", "")),
        node_labels=labels,
        bootstrapped=list(done.nodes),
        warnings=warnings,
    )
    return outs


class ClusterTopology(pulumi.dynamic.Resource, module="provisioner", name="ClusterTopology"):
    """The provider's switch topology of a stack's nodes, applied over SSH (see the module docstring).

    ``node_ids`` and ``public_ips`` (node name -> the instance's id / address) wire it to the
    nodes; ``secrets`` (the ``ClusterSecrets`` fields) is always a secret and never an output.
    """

    topology: pulumi.Output[dict[str, list[str]]]
    topology_conf: pulumi.Output[str]
    node_labels: pulumi.Output[dict[str, dict[str, str]]]
    bootstrapped: pulumi.Output[list[str]]
    warnings: pulumi.Output[list[str]]

    def __init__(
        self,
        resource_name: str,
        *,
        plan: Plan,
        node_ids: pulumi.Input[Mapping[str, Any]],
        public_ips: pulumi.Input[Mapping[str, Any]],
        secrets: pulumi.Input[Mapping[str, Any]],
        project: pulumi.Input[str] | None = None,
        ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S,
        adapter_options: Mapping[str, Any] | None = None,
        remote: Any = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        props: dict[str, Any] = {
            "provider": plan.option.provider,
            "cluster_id": plan.cluster_id,
            "plan_json": plan.dumps(),
            "node_ids": node_ids,
            "public_ips": public_ips,
            "project": project,
            "secrets": pulumi.Output.secret(secrets),
            "ready_timeout_s": ready_timeout_s,
            **{name: None for name in _OUTPUTS},
        }
        secret_opts = pulumi.ResourceOptions(additional_secret_outputs=["secrets"])
        super().__init__(
            ClusterTopologyProvider(adapter_options, remote),
            resource_name,
            props,
            pulumi.ResourceOptions.merge(opts, secret_opts),
        )


def secret_fields(secrets: ClusterSecrets) -> dict[str, str]:
    """The secrets as the plain mapping ``ClusterTopology`` takes (wrap it in a Pulumi secret)."""
    fields = {
        "munge_key_b64": secrets.munge_key_b64.get_secret_value(),
        "k3s_token": secrets.k3s_token.get_secret_value(),
    }
    if secrets.ssh_private_key is not None and secrets.ssh_public_key is not None:
        fields.update(ssh_private_key=secrets.ssh_private_key.get_secret_value(), ssh_public_key=secrets.ssh_public_key)
    return fields


__all__ = ["DEFAULT_READY_TIMEOUT_S", "ClusterTopology", "ClusterTopologyProvider", "secret_fields"]
