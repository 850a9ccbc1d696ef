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
  ``capacityReservationId`` (the EC2 Capacity Block a Capacity Block plan launches into, bought first).

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
from provisioner.realize.hostkeys import hostkey_tokens
from provisioner.realize.nodes import expiry_for, user_data_path
from provisioner.render import render_cluster
from provisioner.secrets import SECRETS_FILE_VERSION, ClusterSecrets, load_or_create_secrets, secrets_path_for
from provisioner.stacks.cluster import GpuCluster
from provisioner.stacks.model import cluster_args

PRIVATE_CIDRS = {name: list(found.private_cidrs) for name, found in facts().items() if found.private_cidrs}
"""The cluster's own address space per provider (the stacks' VPCs), for the node firewall."""


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


def _needed_paths(plan: Plan) -> list[str]:
    return sorted({p for node in plan.nodes if (p := user_data_path(node.bootstrap, node.role)) is not None})


def _file(rendered: pulumi.Output[Any], path: str) -> pulumi.Output[str]:
    return rendered.apply(lambda files: str(files[path]))


def secrets_from_config(raw: Any) -> ClusterSecrets:
    """The secret config ``secrets``: the secrets file's JSON as the docs pipe it in (its ``version``
    field, which must be the file format's, is dropped) or the bare fields. StackError (no value)."""
    data = dict(raw) if isinstance(raw, Mapping) else None
    if data is None or data.pop("version", SECRETS_FILE_VERSION) != SECRETS_FILE_VERSION:
        raise StackError(f"provisioner:secrets: not a cluster secrets file (version {SECRETS_FILE_VERSION})")
    return ClusterSecrets.model_validate(data)


def rendered_bootstrap(plan: Plan, config: pulumi.Config, source: Path) -> tuple[Mapping[str, Any], Any, Any]:
    """(rendered path -> text or Output[text], the login key to install, the ClusterSecrets or an
    Output of them) for ``plan``. The host key tokens come from the secrets (``hostkey_tokens``).

    With secret config ``secrets`` the render happens inside an Output (its values stay
    secret); otherwise the kept secrets file is read (or created) and rendered now.
    """
    private = PRIVATE_CIDRS.get(plan.option.provider)
    # The munge key / k3s token reach the nodes over the ClusterTopology step's SSH pass on every
    # provider, never in user data, a pod's env or onstart (docs/security.md).
    blob = config.get_secret_object("secrets")
    if blob is not None:
        secrets = blob.apply(secrets_from_config)
        rendered = secrets.apply(lambda s: render_cluster(plan, s, private_cidrs=private))
        files = {path: _file(rendered, path) for path in _needed_paths(plan)}
        key = pulumi.Output.unsecret(secrets.apply(lambda s: s.ssh_public_key or plan.spec.access.ssh_public_key))
        return files, key, secrets
    kept, _ = load_or_create_secrets(_secrets_file(config, source))
    return (
        render_cluster(plan, kept, private_cidrs=private),
        kept.ssh_public_key or plan.spec.access.ssh_public_key,
        kept,
    )


def build(
    config: pulumi.Config | None = None, *, now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)
) -> GpuCluster:
    """Register the cluster for the current stack and export its outputs. Raises ProvisionerError."""
    config = config or pulumi.Config("provisioner")
    plan, source = plan_from_config(config)
    files, key, secrets = rendered_bootstrap(plan, config, source)
    pinned = config.get("expiresAt")
    try:
        expires = dt.datetime.fromisoformat(pinned.replace("Z", "+00:00")) if pinned else expiry_for(plan, now())
    except ValueError:
        raise StackError(f"provisioner:expiresAt {pinned!r} is not an ISO 8601 time") from None
    tokens = (
        secrets.apply(lambda s: hostkey_tokens(plan, s)) if hasattr(secrets, "apply") else hostkey_tokens(plan, secrets)
    )
    args = cluster_args(
        plan,
        files,
        owner=config.get("owner") or owner_id(),
        expires_at=expires,
        ssh_public_key=key,
        image=config.get("image"),
        flex_start=config.get_bool("flexStart") or False,
        capacity_reservation_id=config.get("capacityReservationId"),
        hostkey_tokens=tokens,
    )
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


__all__ = ["PRIVATE_CIDRS", "build", "main", "plan_from_config", "rendered_bootstrap"]
