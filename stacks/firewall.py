"""The provider's own firewall for ``access.allowed_cidrs``, where a neocloud's API has one.

Lambda Cloud has firewall rulesets (``providers.base.SupportsFirewall``: the adapter's
``ensure_firewall(cluster_id, allowed_cidrs, region)`` and ``remove_firewall(cluster_id)``).
``firewall_for`` creates a ``NeocloudFirewall`` dynamic resource only when the provider's
adapter class has them; otherwise it returns None and the node firewall rendered into the
bootstrap (nftables, SSH only from the allowed CIDRs) is the only one. ``GpuCluster`` makes
the nodes depend on it: the ruleset exists before any launch (Lambda attaches rulesets at
launch only) and is removed after the nodes are gone (Lambda refuses to delete one in use).
The dynamic provider, like ``NeocloudNodesProvider``, holds no client or key: each operation
builds a fresh adapter from the environment.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi.dynamic

from provisioner.providers.registry import get_provider, provider_class
from provisioner.stacks.model import ClusterArgs


def has_firewall(provider: str) -> bool:
    """Whether ``provider``'s adapter can set a firewall (``SupportsFirewall``)."""
    try:
        cls = provider_class(provider)
    except KeyError:
        return False
    return all(callable(getattr(cls, name, None)) for name in ("ensure_firewall", "remove_firewall"))


class NeocloudFirewallProvider(pulumi.dynamic.ResourceProvider):
    """CRUD for a cluster's provider firewall. Holds only plain adapter options."""

    def __init__(self, adapter_options: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        self.adapter_options = {
            k: v for k, v in dict(adapter_options or {}).items() if k not in ("api_key", "transport")
        }

    def _apply(self, props: Mapping[str, Any]) -> dict[str, Any]:
        adapter: Any = get_provider(props["provider"], **self.adapter_options)
        try:
            firewall_id = adapter.ensure_firewall(props["cluster_id"], list(props["allowed_cidrs"]), props["region"])
        finally:
            close = getattr(adapter, "close", None)
            if callable(close):
                close()
        return {**props, "firewall_id": firewall_id}

    def create(self, props: dict[str, Any]) -> pulumi.dynamic.CreateResult:
        return pulumi.dynamic.CreateResult(f"{props['provider']}/{props['cluster_id']}/firewall", self._apply(props))

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.DiffResult:
        changed = [k for k in ("provider", "cluster_id", "region", "allowed_cidrs") if olds.get(k) != news.get(k)]
        return pulumi.dynamic.DiffResult(
            changes=bool(changed), replaces=[k for k in changed if k != "allowed_cidrs"], delete_before_replace=True
        )

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> pulumi.dynamic.UpdateResult:
        return pulumi.dynamic.UpdateResult(self._apply(news))

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        adapter: Any = get_provider(props["provider"], **self.adapter_options)
        try:
            adapter.remove_firewall(props["cluster_id"])
        finally:
            close = getattr(adapter, "close", None)
            if callable(close):
                close()


class NeocloudFirewall(pulumi.dynamic.Resource, module="provisioner", name="NeocloudFirewall"):
    """SSH only from ``allowed_cidrs`` at the provider's firewall for one cluster."""

    firewall_id: pulumi.Output[str]

    def __init__(
        self,
        resource_name: str,
        *,
        provider: str,
        cluster_id: str,
        region: str,
        allowed_cidrs: list[str],
        adapter_options: Mapping[str, Any] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ) -> None:
        props = {
            "provider": provider,
            "cluster_id": cluster_id,
            "region": region,
            "allowed_cidrs": list(allowed_cidrs),
            "firewall_id": None,
        }
        super().__init__(NeocloudFirewallProvider(adapter_options), resource_name, props, opts)


def firewall_for(
    parent: pulumi.Resource, args: ClusterArgs, adapter_options: Mapping[str, Any] | None = None
) -> NeocloudFirewall | None:
    """A ``NeocloudFirewall`` child of ``parent`` when the provider has one, else None."""
    if not has_firewall(args.provider):
        return None
    return NeocloudFirewall(
        f"{args.cluster_id}-firewall",
        provider=args.provider,
        cluster_id=args.cluster_id,
        region=args.region,
        allowed_cidrs=list(args.allowed_cidrs),
        adapter_options=adapter_options,
        opts=pulumi.ResourceOptions(parent=parent),
    )


__all__ = ["NeocloudFirewall", "NeocloudFirewallProvider", "firewall_for", "has_firewall"]
