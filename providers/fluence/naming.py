"""Fluence names: how a node is marked as a cluster's, and how plan shapes are named.

Fluence instances have no tags or labels, only a name of 1-25 characters from
``[a-z0-9-]``. A node's instance name is therefore the only mark of its cluster, and it
must be deterministic (idempotent create finds a node by recomputing its name).

The scheme, ``instance_name(cluster_id, node, owner)`` = ``<C>-<N>``:

- ``C`` (the cluster and owner mark, 10 characters of ``[a-z0-9]``, never ``-``): the first
  5 lowercase alphanumerics of the cluster id (fewer when it has fewer), then base-36
  characters of the SHA-256 of ``<cluster id>/<owner>`` up to 10 (``owner``: providers.base
  ``owner_id()``). The owner is part of the mark, so one owner never claims another's nodes of a
  cluster with the same name, and a name a user chose (``research-box``) matches only by a
  hash collision (one in 36^5 at best).
- ``N`` (the node part, up to ``24 - len(C)`` = 14 characters): the node name itself when it
  already fits ``[a-z0-9-]``, starts and ends alphanumeric, and is short enough; otherwise a
  slug of it cut to leave room for ``-`` and 4 base-36 characters of the node name's SHA-256
  (``GPU_Worker.0001`` -> ``gpu-worker-0-x7k2`` style).

A name belongs to a cluster of an owner when its text before the first ``-`` equals that
``C`` exactly (strict: recomputed, never guessed from the name); the node part is what
follows. Two different node names that map to the same ``N`` (astronomically unlikely with the
hash) are refused before anything launches. There is no room for a lease mark: on Fluence the
lease is the local lock's only (docs/security.md says which API fields were checked for one). Nor
for a run mark (``FACTS.run_mark`` None): a run's Fluence nodes are told from an earlier run's of
the same name by the record's node ids and launch times (lifecycle.runs.of_run).
"""

from __future__ import annotations

import hashlib
import re

from provisioner.providers.base import owner_id

MAX_NAME = 25
MARK_LENGTH = 10
_NODE = re.compile(r"^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$")
_ALNUM = re.compile(r"[^a-z0-9]+")
_B36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def _hash36(text: str, length: int = 4) -> str:
    number = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    out = []
    for _ in range(length):
        number, digit = divmod(number, 36)
        out.append(_B36[digit])
    return "".join(out)


def cluster_mark(cluster_id: str, owner: str | None = None) -> str:
    """The ``C`` part: a readable prefix of the cluster id and a hash of cluster id and owner."""
    plain = _ALNUM.sub("", cluster_id.lower())[:5]
    return f"{plain}{_hash36(f'{cluster_id}/{owner or owner_id()}', MARK_LENGTH - len(plain))}"


def node_part(node: str, budget: int) -> str:
    """The ``N`` part in at most ``budget`` characters (budget >= 6)."""
    if _NODE.match(node) and len(node) <= budget:
        return node
    slug = _ALNUM.sub("-", node.lower()).strip("-")[: budget - 5].strip("-")
    return f"{slug}-{_hash36(node)}" if slug else _hash36(node)


def instance_name(cluster_id: str, node: str, owner: str | None = None) -> str:
    """The deterministic instance name of ``node`` in ``owner``'s ``cluster_id`` (see module docstring)."""
    mark = cluster_mark(cluster_id, owner)
    return f"{mark}-{node_part(node, MAX_NAME - len(mark) - 1)}"


def node_of(cluster_id: str, name: str, owner: str | None = None) -> str | None:
    """The node part of ``name`` if it belongs to ``owner``'s ``cluster_id``, else None."""
    mark, sep, rest = name.partition("-")
    return rest if sep and rest and mark == cluster_mark(cluster_id, owner) else None


_GIB = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?)?B?\s*$", re.IGNORECASE)
_TO_GIB = {"": 1.0, "k": 1 / 1024**2, "m": 1 / 1024, "g": 1.0, "t": 1024.0}


def to_gib(count: float, units: str = "Gi") -> float:
    """Fluence quantities (``{"count": 128, "units": "Gi"}``) in GiB; decimal units treated as binary."""
    return count * _TO_GIB.get(units[:1].lower(), 1.0)


def vram_gib(vram: str) -> float | None:
    """``"80Gi"`` -> 80.0; None when unparseable."""
    found = _GIB.match(vram or "")
    if not found:
        return None
    return to_gib(float(found.group(1)), found.group(2) or "Gi")


_GPU_ALIASES = {"RTX6000ADA": "RTX6000ADA", "GEFORCERTX4090": "RTX4090", "A10G": "A10G"}


def canonical_gpu(model: str) -> str:
    """``"h100"`` -> ``"H100"``, ``"rtx-4090"`` -> ``"RTX4090"``, ``"l40s"`` -> ``"L40S"``."""
    flat = re.sub(r"[^A-Za-z0-9]", "", model).upper()
    return _GPU_ALIASES.get(flat, flat)


def shape_name(
    gpu_model: str, vram: str, interface: str, gpus: int, vcpus: int, memory_gib: float, storage_gib: float
) -> str:
    """Instance-type name of a plan shape, as in Fluence's own plan names:
    ``h200-141gi-sxm-1gpu-16cpu-128gi-120gi``. Options and instances of the same shape get
    the same name, so a Node's ``instance_type`` matches the Offer it was bought from."""
    parts = [
        re.sub(r"[^a-z0-9]", "", gpu_model.lower()),
        (vram or "").lower(),
        re.sub(r"[^a-z0-9]", "", (interface or "").lower()),
        f"{gpus}gpu",
        f"{vcpus}cpu",
        f"{round(memory_gib)}gi",
        f"{round(storage_gib)}gi",
    ]
    return "-".join(p for p in parts if p)


__all__ = [
    "MARK_LENGTH",
    "MAX_NAME",
    "canonical_gpu",
    "cluster_mark",
    "instance_name",
    "node_of",
    "node_part",
    "shape_name",
    "to_gib",
    "vram_gib",
]
