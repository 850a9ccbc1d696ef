"""Who may reach a cluster's nodes: the rules ``up`` enforces before and after a purchase.

- ``require_ssh_sources``: ``up``/``burst`` refuse a spec without ``access.allowed_cidrs`` (the node
  firewall and the provider's firewall then admit SSH from nowhere outside the cluster, and these
  commands reach the nodes over SSH).
- ``say_exposure``: one warning per fact a user must know before buying: SSH open to every address
  (any split of 0.0.0.0/0 or ::/0), and each provider among the tries that cannot apply
  ``allowed_cidrs`` at all (provisioner.exposure.UNFILTERED: RunPod, Vast.ai).
- ``ensure_firewall`` / ``remove_firewall``: the provider's own firewall for the cluster where the
  adapter has one (``SupportsFirewall``: Lambda's rulesets, AWS's cluster security group, GCP's
  cluster firewall rules), made
  before the launch that attaches it and removed after the nodes are gone.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from provisioner.errors import ProvisionerError, SpecError
from provisioner.plan import Plan
from provisioner.providers.base import Provider, SupportsFirewall
from provisioner.realize.events import Emit


def require_ssh_sources(plan: Plan, source: Path | None = None) -> None:
    """SpecError (before anything is bought) when ``access.allowed_cidrs`` is empty: ``up`` and ``burst``
    reach the nodes over SSH from this machine, which a closed firewall would refuse after the purchase.
    Located in ``source`` (the spec or plan file) where it can be. The tool does not guess this
    machine's public address (that would take an outside service)."""
    if plan.spec.access.allowed_cidrs:
        return
    file, line, column = "<plan>", 1, 1
    if source is not None:
        file = str(source)
        if source.suffix != ".json":
            from provisioner.loader import locate, spec_marks

            line, column = locate("access.allowed_cidrs", spec_marks(source.read_text(encoding="utf-8"), file))
    raise SpecError(
        "not set: up reaches the nodes over SSH from this machine, and nothing outside the cluster may "
        "connect until you allow it; set it to this machine's public address, e.g. [203.0.113.7/32] "
        "or pass --ssh-from 203.0.113.7/32 (0.0.0.0/0 opens SSH to every address)",
        path="access.allowed_cidrs",
        file=file,
        line=line,
        column=column,
    )


def say_exposure(plans: Sequence[Plan], emit: Emit) -> None:
    """Emit a ``warning`` event for each line of provisioner.exposure.exposure_lines over the providers
    ``plans`` may buy from (in try order), before anything is bought."""
    from provisioner.exposure import exposure_lines

    if not plans:
        return
    for line in exposure_lines(plans[0].spec.access.allowed_cidrs, [plan.option.provider for plan in plans]):
        emit("warning", message=f"warning: {line}")


def ensure_firewall(provider: Provider, plan: Plan) -> None:
    """The provider's own firewall for the cluster (Lambda rulesets, the AWS cluster security group, the
    GCP cluster rules:
    SSH only from ``access.allowed_cidrs``), before the launch that attaches it. The stacks make
    theirs as resources (docs/security.md says what each provider gets)."""
    if isinstance(provider, SupportsFirewall):
        for region in dict.fromkeys(node.region for node in plan.nodes):
            provider.ensure_firewall(plan.cluster_id, plan.spec.access.allowed_cidrs, region)


def remove_firewall(emit: Emit, provider: Provider, cluster_id: str) -> None:
    """Remove the cluster's provider firewall once its nodes are gone; a failure is reported, not raised
    (a ruleset costs nothing, and the nodes are what must go)."""
    if not isinstance(provider, SupportsFirewall):
        return
    try:
        provider.remove_firewall(cluster_id)
    except ProvisionerError as exc:
        emit(
            "warning",
            message=f"the firewall of {cluster_id} stays on {provider.name} ({exc}); it costs "
            f"nothing; run provisioner down {cluster_id} again to remove it",
            cluster=cluster_id,
        )


__all__ = ["ensure_firewall", "remove_firewall", "require_ssh_sources", "say_exposure"]
