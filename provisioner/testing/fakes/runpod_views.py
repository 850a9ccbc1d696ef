"""How the RunPod fake's state looks through GraphQL: a GPU type (with ``lowestPrice``) and a pod.

The fake keeps one store (``RunPodFake.gpus`` and ``RunPodFake.pods``, in REST v2's shapes); these
functions read it as the GraphQL types of ``runpod_schema`` so that a pod bought over either API is
seen over both. Values the store does not carry are derived, and each derivation is a choice of
the fake, not a fact about RunPod:

- ``lowestPrice``: ``uninterruptablePrice`` is the lowest on-demand price per GPU of the clouds
  asked for (``secureCloud`` true, false or absent for both) that offer ``gpuCount`` GPUs;
  ``minimumBidPrice`` the lowest spot floor of those clouds; ``stockStatus`` the best availability
  (``High``/``Medium``/``Low``) of the data centers that match ``dataCenterId`` or ``countryCode``,
  null when none has stock (gpuhunt reads null as unavailable); ``minVcpu``/``minMemory`` RunPod's
  placement floors (2 vCPU and 8 GB per GPU). Null when no cloud offers that many GPUs.
- Savings-plan prices (``oneWeekPrice``...) are null: the fake sells no plans. ``clusterPrice`` is
  the Secure Cloud price where the GPU is offered on Secure Cloud (the fake's clusters need it).
- A pod's ``desiredStatus`` is RUNNING from its creation (what was asked for); ``runtime`` is null
  until the pod runs, as RunPod leaves it; ``podType`` INTERRUPTABLE for a spot pod.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from provisioner.testing.fakes.runpod import RunPodFake

LEVELS = ("NONE", "LOW", "MEDIUM", "HIGH")
CUDA_CORES = {"H100": 16896, "H200": 16896, "A100": 6912, "RTX 4090": 16384}
VCPUS_PER_GPU = 2
MEMORY_GB_PER_GPU = 8
POD_COUNTS = (1, 2, 4, 8)


def _cuda_cores(name: str) -> int | None:
    return next((cores for model, cores in CUDA_CORES.items() if name.startswith(model)), None)


def gpu_type(gpu: dict[str, Any]) -> dict[str, Any]:
    """One ``GpuType``; ``lowestPrice`` is a resolver taking its ``input`` argument."""
    clouds = [c for c in ("secure", "community") if gpu[c]]
    most = max((gpu["maxCount"][c] for c in clouds), default=0)

    def lowest_price(_info: Any, input: dict[str, Any] | None = None) -> dict[str, Any] | None:
        return lowest(gpu, input or {})

    return {
        "id": gpu["id"],
        "displayName": gpu["name"],
        "manufacturer": "AMD" if gpu["id"].startswith("AMD") else "Nvidia",
        "memoryInGb": gpu["memory"],
        "cudaCores": _cuda_cores(gpu["name"]),
        "secureCloud": gpu["secure"],
        "communityCloud": gpu["community"],
        "securePrice": gpu["price"]["secure"],
        "communityPrice": gpu["price"]["community"],
        "secureSpotPrice": gpu["spot"]["secure"],
        "communitySpotPrice": gpu["spot"]["community"],
        "oneWeekPrice": None,
        "oneMonthPrice": None,
        "threeMonthPrice": None,
        "sixMonthPrice": None,
        "clusterPrice": gpu["price"]["secure"] if gpu["secure"] else None,
        "maxGpuCount": most,
        "maxGpuCountSecureCloud": gpu["maxCount"]["secure"],
        "maxGpuCountCommunityCloud": gpu["maxCount"]["community"],
        "minPodGpuCount": 1,
        "nodeGroupDatacenters": [{"id": dc, "name": dc, "listed": True} for dc in gpu["dataCenters"]],
        "lowestPrice": lowest_price,
    }


def lowest(gpu: dict[str, Any], asked: dict[str, Any]) -> dict[str, Any] | None:
    """``lowestPrice(input: ...)`` of one GPU type (see the module docstring for the rules)."""
    count = asked.get("gpuCount") or 1
    secure = asked.get("secureCloud")
    wanted = ("secure", "community") if secure is None else ("secure",) if secure else ("community",)
    clouds = [c for c in wanted if gpu[c] and gpu["maxCount"][c] >= count]
    if not clouds:
        return None
    centers = [
        (dc, level)
        for dc, level in gpu["dataCenters"].items()
        if level != "NONE"
        and asked.get("dataCenterId") in (None, dc)
        and (not asked.get("countryCode") or dc.startswith(f"{asked['countryCode']}-"))
    ]
    best = max(centers, key=lambda item: LEVELS.index(item[1]), default=None)
    bids = [gpu["spot"][c] for c in clouds if gpu["spot"][c]]
    most = max(gpu["maxCount"][c] for c in clouds)
    return {
        "gpuName": gpu["name"],
        "gpuTypeId": gpu["id"],
        "minimumBidPrice": min(bids) if bids else None,
        "uninterruptablePrice": min(gpu["price"][c] for c in clouds),
        "minVcpu": float(VCPUS_PER_GPU * count),
        "minMemory": float(MEMORY_GB_PER_GPU * count),
        "stockStatus": best[1].title() if best else None,
        "compliance": [],
        "countryCode": best[0].split("-", 1)[0] if best else None,
        "maxUnreservedGpuCount": most,
        "availableGpuCounts": [c for c in POD_COUNTS if c <= most],
    }


def pod(fake: RunPodFake, stored: dict[str, Any]) -> dict[str, Any]:
    """One ``Pod`` from the fake's stored (REST v2 shaped) pod, advanced on the boot clock."""
    shown = fake._visible(stored)
    count = shown["gpu"]["count"]
    gpu = next((g for g in fake.gpus if g["id"] == shown["gpu"]["id"]), {"name": shown["gpu"]["id"]})
    runtime = None
    if shown["status"] == "RUNNING":
        mapped = shown["runtime"].get("ports") or []
        runtime = {
            "uptimeInSeconds": shown["runtime"].get("uptime", 0),
            "ports": [
                {
                    "ip": p["ip"],
                    "isIpPublic": True,
                    "privatePort": p["private"],
                    "publicPort": p["public"],
                    "type": p["type"],
                }
                for p in mapped
            ],
        }
    return {
        "id": shown["id"],
        "name": shown["name"],
        "imageName": shown["image"],
        "env": [f"{key}={value}" for key, value in shown["env"].items()],
        "gpuCount": count,
        "costPerHr": shown["cost"],
        "adjustedCostPerHr": shown["cost"],
        "desiredStatus": "RUNNING",
        "lastStatusChange": f"Rented by User: {shown['createdAt']}",
        "machineId": f"m{shown['id'][:11]}",
        "machine": {
            "podHostId": shown["ssh"]["proxy"]["username"],
            "gpuDisplayName": gpu["name"],
            "location": shown["dataCenterId"],
        },
        "memoryInGb": float(MEMORY_GB_PER_GPU * count),
        "vcpuCount": float(VCPUS_PER_GPU * count),
        "containerDiskInGb": shown["disk"],
        "volumeInGb": 0.0,
        "volumeMountPath": "/workspace",
        "dockerArgs": shown["args"],
        "dockerId": None,
        "podType": "INTERRUPTABLE" if shown["id"] in fake.bids else "RESERVED",
        "port": None,
        "ports": ",".join(shown["ports"]),
        "uptimeSeconds": runtime["uptimeInSeconds"] if runtime else 0,
        "runtime": runtime,
    }


__all__ = ["gpu_type", "lowest", "pod"]
