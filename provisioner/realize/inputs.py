"""The realize input: one function turns a plan, its secrets and one run's facts into what both
engines build the cluster from. Pure (no network, no clock, no environment).

``realize_input(plan, secrets, run)`` renders the cluster's files (with the provider's private
address space for the node firewall, ``private_cidrs``) and builds one final ``NodeSpec`` per
planned node: role, bootstrap method, boot data with the node's host key token, the login key,
owner, expiry, the create's lease mark, the run mark and the reservation fields of a Capacity Block plan. The
direct engine's ``up``, ``heal`` and the Pulumi program consume it; the Pulumi program hands the
specs to its ``NeocloudNodes`` resource, which creates exactly them (tests/test_engine_matrix.py
compares each create request both engines send, field by field, per provider).

- ``RunFacts``: what one run adds to the plan (owner, expiry, lease mark, run id);
- ``bare_specs(plan, run)``: the specs without boot data or key (what a reservation is bought
  for, and the node list the Pulumi program registers before the secrets are known);
- ``login_key(plan, secrets)``: the key the provider installs (the cluster's, else the spec's);
- ``private_cidrs(provider)``: the provider's private address space (``FACTS.private_cidrs``).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from provisioner.plan import Plan
from provisioner.providers.base import NodeSpec
from provisioner.providers.registry import facts
from provisioner.realize.hostkeys import hostkey_tokens
from provisioner.realize.nodes import block_fields, node_spec, node_specs
from provisioner.render import RenderedCluster, render_cluster
from provisioner.secrets import ClusterSecrets


@dataclass(frozen=True)
class RunFacts:
    """What one run adds to a plan: who launches (``owner``, OWNER_TAG), when the cluster expires,
    the lease mark of the create (``providers.ownership.LeaseMark.token()``; None: no mark) and the
    bring-up's run id (``lifecycle.state.new_run_id``, RUN_TAG; None: no run mark)."""

    owner: str
    expires_at: dt.datetime | None = None
    lease: str | None = None
    run: str | None = None


@dataclass(frozen=True)
class RealizeInput:
    """The rendered files and the final NodeSpec of every planned node, in plan order (head first)."""

    files: RenderedCluster
    specs: tuple[NodeSpec, ...]

    def spec(self, name: str) -> NodeSpec:
        """The spec of node ``name``. KeyError for a name the plan does not have."""
        for spec in self.specs:
            if spec.name == name:
                return spec
        raise KeyError(name)


def private_cidrs(provider: str) -> list[str] | None:
    """The cluster's own address space on ``provider`` (its VPC), for the node firewall; None without."""
    found = facts().get(provider)
    return list(found.private_cidrs) if found is not None and found.private_cidrs else None


def login_key(plan: Plan, secrets: ClusterSecrets) -> str | None:
    """The key the provider installs for the login user: the cluster's, else the spec's access key."""
    return secrets.ssh_public_key or plan.spec.access.ssh_public_key


def bare_specs(plan: Plan, run: RunFacts) -> list[NodeSpec]:
    """Every planned node's final spec less its boot data and login key (a Capacity Block plan's
    carry the block's fields, ``realize.nodes.block_fields``). Pure."""
    return [
        node_spec(
            node,
            user_data=None,
            ssh_public_key=None,
            expires_at=run.expires_at,
            owner=run.owner,
            block=block_fields(plan),
            lease=run.lease,
            run=run.run,
        )
        for node in plan.nodes
    ]


def realize_input(plan: Plan, secrets: ClusterSecrets, run: RunFacts) -> RealizeInput:
    """The rendered files and the final node specs of ``plan`` for ``run``. Pure and deterministic for
    fixed secrets and facts. Raises what ``render_cluster`` raises (PlanError for an inconsistent plan)."""
    files = render_cluster(plan, secrets, private_cidrs=private_cidrs(plan.option.provider))
    specs = node_specs(
        plan,
        files,
        ssh_public_key=login_key(plan, secrets),
        expires_at=run.expires_at,
        owner=run.owner,
        hostkey_tokens=hostkey_tokens(plan, secrets),
        lease=run.lease,
        run=run.run,
    )
    return RealizeInput(files=files, specs=tuple(specs))


__all__ = ["RealizeInput", "RunFacts", "bare_specs", "login_key", "private_cidrs", "realize_input"]
