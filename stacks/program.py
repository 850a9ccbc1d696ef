"""The Pulumi program: stack config -> Plan -> rendered bootstrap -> one ``GpuCluster``.

Stack config (namespace ``provisioner``):

- ``spec`` (a spec YAML path) or ``plan`` (a saved plan.json path), exactly one. A spec is
  planned here with the refreshed or bundled catalog (``catalog`` overrides it) and the
  registry's adapter capabilities, like ``provisioner plan``; a plan is built as saved.
- ``secrets`` (secret config, a JSON object with the cluster secrets file's fields); else the
  0600 file ``secretsFile`` (what ``provisioner up`` passes), else the one kept beside the plan
  (``plan.secrets.json``) or, for a spec, ``.provisioner/<stack>/.cluster-secrets.json``,
  created on first use (``provisioner.secrets.load_or_create_secrets``).
- ``owner`` (default: ``providers.base.owner_id()``, as the adapters and ``gc`` use),
  ``expiresAt`` (ISO UTC; default: now + the spec's TTL, recomputed on every ``up`` unless
  pinned), ``image`` (overrides the GPU image), ``flexStart`` (GCP flex-start provisioning),
  ``capacityReservationId`` (the EC2 Capacity Block a Capacity Block plan launches into, bought first),
  ``lease`` (the lease mark of the ``provisioner up`` running the stack, written on each node as the
  direct engine writes it; unset by hand), ``run`` (the run id of that bring-up, each node's
  ``provisioner-run`` mark; unset by hand).

The nodes are built from ``realize.inputs.realize_input``, the function the direct engine's ``up``
builds them from: the same boot data, host key tokens, owner, expiry, lease, run mark, reservation fields and
private address space for the same plan, secrets and facts.

Stack outputs: ``cluster_id``, ``provider``, ``head_address``, ``ssh_command``, ``nodes``,
``hourly_usd``, ``expires_at``, ``shared_fs``, ``topology`` (the switch topology the
``ClusterTopology`` step applied over SSH on a multi-node AWS/GCP cluster; else {}). A mistake
in the config or the spec stops the program with one line (``pulumi.RunError``), not a traceback.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pulumi

from provisioner.errors import ProvisionerError, StackError
from provisioner.plan import Plan, load_plan
from provisioner.providers.base import owner_id
from provisioner.providers.registry import facts
from provisioner.realize.inputs import RunFacts, private_cidrs, realize_input
from provisioner.realize.nodes import expiry_for
from provisioner.secrets import SECRETS_FILE_VERSION, ClusterSecrets, load_or_create_secrets, secrets_path_for
from provisioner.stacks.cluster import GpuCluster
from provisioner.stacks.model import ClusterArgs, cluster_args

PRIVATE_CIDRS = {name: cidrs for name in facts() if (cidrs := private_cidrs(name))}
"""The cluster's own address space per provider (the stacks' VPCs), for the node firewall
(``realize.inputs.private_cidrs``: the direct engine renders with the same)."""


def plan_from_config(config: pulumi.Config) -> tuple[Plan, Path]:
    """The Plan named by ``spec`` or ``plan`` and its source path. StackError/SpecError/PlanError."""
    spec, plan = config.get("spec"), config.get("plan")
    if bool(spec) == bool(plan):
        raise StackError("set exactly one of provisioner:spec (a spec YAML) or provisioner:plan (a plan.json)")
    if plan:
        return load_plan(Path(plan)), Path(plan)
    from provisioner.workflow import plan_from_source

    catalog = config.get("catalog")
    source = Path(str(spec))
    return plan_from_source(source, catalog_path=Path(catalog) if catalog else None), source


def _secrets_file(config: pulumi.Config, source: Path) -> Path:
    named = config.get("secretsFile")
    if named:
        return Path(named)
    return secrets_path_for(source, Path(".provisioner") / pulumi.get_stack())


def secrets_from_config(raw: Any) -> ClusterSecrets:
    """The secret config ``secrets``: the secrets file's JSON as the docs pipe it in (its ``version``
    field, which must be the file format's, is dropped) or the bare fields. StackError (no value)."""
    data = dict(raw) if isinstance(raw, Mapping) else None
    if data is None or data.pop("version", SECRETS_FILE_VERSION) != SECRETS_FILE_VERSION:
        raise StackError(f"provisioner:secrets: not a cluster secrets file (version {SECRETS_FILE_VERSION})")
    return ClusterSecrets.model_validate(data)


def cluster_secrets_of(plan: Plan, config: pulumi.Config, source: Path) -> Any:
    """The cluster secrets for ``plan``: an Output of them from secret config ``secrets`` (their
    values stay secret), else the kept secrets file, read (or created) now."""
    blob = config.get_secret_object("secrets")
    if blob is not None:
        return blob.apply(secrets_from_config)
    kept, _ = load_or_create_secrets(_secrets_file(config, source))
    return kept


def realized_input(plan: Plan, secrets: Any, run: RunFacts) -> Any:
    """``realize.inputs.realize_input`` (the direct engine's too) for ``plan``, ``secrets`` and ``run``;
    an Output of it when ``secrets`` is one. The munge key / k3s token reach the nodes over the
    ClusterTopology step's SSH pass on every provider, never in user data, a pod's env or onstart
    (docs/security.md)."""
    if hasattr(secrets, "apply"):
        return secrets.apply(lambda found: realize_input(plan, found, run))
    return realize_input(plan, secrets, run)


def run_facts(plan: Plan, config: pulumi.Config, now: Callable[[], dt.datetime]) -> RunFacts:
    """This run's facts from the stack config: ``owner``, ``expiresAt`` (else now + the spec's TTL)
    ``lease`` (the lease mark of the ``provisioner up`` that runs the stack; none by hand) and ``run``
    (the run id of that bring-up, each node's run mark; none by hand)."""
    pinned = config.get("expiresAt")
    try:
        expires = dt.datetime.fromisoformat(pinned.replace("Z", "+00:00")) if pinned else expiry_for(plan, now())
    except ValueError:
        raise StackError(f"provisioner:expiresAt {pinned!r} is not an ISO 8601 time") from None
    return RunFacts(
        owner=config.get("owner") or owner_id(),
        expires_at=expires,
        lease=config.get("lease") or None,
        run=config.get("run") or None,
    )


def build_args(
    config: pulumi.Config, now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)
) -> tuple[Plan, ClusterArgs, Any]:
    """(the plan, the component's arguments, the secrets or an Output of them) for the stack's config:
    the realize input both engines build from. Raises ProvisionerError."""
    plan, source = plan_from_config(config)
    secrets = cluster_secrets_of(plan, config, source)
    run = run_facts(plan, config, now)
    args = cluster_args(
        plan,
        realized_input(plan, secrets, run),
        run,
        image=config.get("image"),
        flex_start=config.get_bool("flexStart") or False,
        capacity_reservation_id=config.get("capacityReservationId"),
    )
    return plan, args, secrets


def build(
    config: pulumi.Config | None = None, *, now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)
) -> GpuCluster:
    """Register the cluster for the current stack and export its outputs. Raises ProvisionerError."""
    plan, args, secrets = build_args(config or pulumi.Config("provisioner"), now)
    cluster = GpuCluster(plan.cluster_id, args, plan=plan, secrets=secrets)
    pulumi.export("cluster_id", plan.cluster_id)
    pulumi.export("provider", plan.option.provider)
    for name in ("head_address", "ssh_command", "nodes", "hourly_usd", "expires_at", "shared_fs", "topology"):
        pulumi.export(name, getattr(cluster, name))
    return cluster


def main() -> None:
    """Entry point for the engine (``stacks/__main__.py``): one-line errors, no traceback."""
    try:
        build()
    except ProvisionerError as exc:
        raise pulumi.RunError(str(exc)) from None


__all__ = ["PRIVATE_CIDRS", "build", "build_args", "main", "plan_from_config", "run_facts"]
