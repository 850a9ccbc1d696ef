"""What a provider's builder hands back to ``GpuCluster``: each node's addresses, and the shared filesystem."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi


@dataclass(frozen=True)
class BuiltNode:
    name: str
    role: str
    public_ip: pulumi.Output[str]
    private_ip: pulumi.Output[str]
    id: pulumi.Output[str] | None = None
    """The instance's id (AWS instance id, GCE instance path), where one resource is one node."""


@dataclass(frozen=True)
class Built:
    nodes: list[BuiltNode]
    shared_fs: pulumi.Output[dict[str, str]] | None = None
    project: pulumi.Input[str] | None = None
    """The cloud project the nodes live in (GCP), for the adapter that reads their topology."""


__all__ = ["Built", "BuiltNode"]
