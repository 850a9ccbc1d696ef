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


@dataclass(frozen=True)
class Built:
    nodes: list[BuiltNode]
    shared_fs: pulumi.Output[dict[str, str]] | None = None


__all__ = ["Built", "BuiltNode"]
