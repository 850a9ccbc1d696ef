"""RunPod GPU ids <-> canonical GPU models <-> instance-type names.

Instance types follow the public RunPod catalogs' convention ``{n}x_{GPU}_{SECURE|COMMUNITY}``
(``8x_H100-SXM_SECURE``). RunPod's own GPU ids are long names ("NVIDIA H100 80GB HBM3");
the table maps the ones we know, and anything else gets a name derived from RunPod's
display name, so an unknown GPU still produces a usable, reversible offer.
"""

from __future__ import annotations

import re

# The image a node runs when the spec names none (pods and Instant Clusters alike).
DEFAULT_IMAGE = "runpod/pytorch:1.0.2-cu1281-torch280-ubuntu2404"

# RunPod gpu id -> (canonical model, instance-type token)
KNOWN_GPUS: dict[str, tuple[str, str]] = {
    "NVIDIA H100 80GB HBM3": ("H100", "H100-SXM"),
    "NVIDIA H100 PCIe": ("H100", "H100-PCIe"),
    "NVIDIA H100 NVL": ("H100", "H100-NVL"),
    "NVIDIA H200": ("H200", "H200-SXM"),
    "NVIDIA B200": ("B200", "B200"),
    "NVIDIA A100-SXM4-80GB": ("A100", "A100-80GB-SXM"),
    "NVIDIA A100 80GB PCIe": ("A100", "A100-80GB"),
    "NVIDIA L40S": ("L40S", "L40S"),
    "NVIDIA L40": ("L40", "L40"),
    "NVIDIA L4": ("L4", "L4"),
    "NVIDIA RTX A6000": ("A6000", "A6000"),
    "NVIDIA RTX 6000 Ada Generation": ("RTX6000ADA", "RTX6000-Ada"),
    "NVIDIA GeForce RTX 4090": ("RTX4090", "RTX4090"),
    "NVIDIA GeForce RTX 5090": ("RTX5090", "RTX5090"),
    "NVIDIA GeForce RTX 3090": ("RTX3090", "RTX3090"),
    "AMD Instinct MI300X OAM": ("MI300X", "MI300X"),
}
_TOKEN_TO_ID = {token: gpu_id for gpu_id, (_, token) in KNOWN_GPUS.items()}
_INSTANCE_TYPE = re.compile(r"^(?P<count>\d+)x_(?P<token>.+)_(?P<cloud>SECURE|COMMUNITY)$")


def _derived_token(display_name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", display_name.strip()).strip("-")


def gpu_model(gpu_id: str, display_name: str) -> str:
    """Canonical model name (H100, A100, RTX4090, ...) for a RunPod GPU id."""
    if gpu_id in KNOWN_GPUS:
        return KNOWN_GPUS[gpu_id][0]
    return re.sub(r"[^A-Za-z0-9]", "", display_name).upper() or gpu_id


def gpu_token(gpu_id: str, display_name: str) -> str:
    return KNOWN_GPUS[gpu_id][1] if gpu_id in KNOWN_GPUS else _derived_token(display_name)


def instance_type(gpu_id: str, display_name: str, count: int, cloud: str) -> str:
    return f"{count}x_{gpu_token(gpu_id, display_name)}_{cloud}"


def parse_instance_type(name: str) -> tuple[int, str, str] | None:
    """``(gpu_count, token, cloud)`` or None when ``name`` does not follow the convention."""
    match = _INSTANCE_TYPE.match(name)
    if not match:
        return None
    return int(match["count"]), match["token"], match["cloud"]


def gpu_id_for_token(token: str) -> str | None:
    """RunPod gpu id for a known token; None means look it up in the live catalog."""
    return _TOKEN_TO_ID.get(token)


def derived_token_matches(token: str, display_name: str) -> bool:
    return _derived_token(display_name) == token


__all__ = [
    "DEFAULT_IMAGE",
    "KNOWN_GPUS",
    "derived_token_matches",
    "gpu_id_for_token",
    "gpu_model",
    "gpu_token",
    "instance_type",
    "parse_instance_type",
]
