"""RunPod's GraphQL endpoint in the RunPod fake (``runpod.RunPodFake``): ``gpuTypes`` and
``podRentInterruptable`` (spot pods), the two operations the adapter sends. GraphQL is not in
RunPod's OpenAPI file, so requests are checked against the documented shapes here; a violation is
recorded in ``fake.validation_errors`` and answered as GraphQL's validation error.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from werkzeug.wrappers import Request, Response

if TYPE_CHECKING:
    from provisioner.testing.fakes.runpod import RunPodFake

NO_CAPACITY = "There are no longer any instances available with the requested specifications."

# podRentInterruptable input fields as documented (runpod-python / dstack usage).
RENT_FIELDS = frozenset(
    {
        "name",
        "imageName",
        "gpuTypeId",
        "cloudType",
        "gpuCount",
        "volumeInGb",
        "containerDiskInGb",
        "minVcpuCount",
        "minMemoryInGb",
        "dataCenterId",
        "countryCode",
        "startSsh",
        "supportPublicIp",
        "ports",
        "dockerArgs",
        "volumeMountPath",
        "env",
        "networkVolumeId",
        "minCudaVersion",
        "allowedCudaVersions",
        "templateId",
        "bidPerGpu",
    }
)
RENT_REQUIRED = frozenset({"gpuTypeId", "gpuCount", "bidPerGpu", "imageName"})
GPU_TYPE_FIELDS = frozenset(
    {"id", "displayName", "memoryInGb", "securePrice", "communityPrice", "secureSpotPrice", "communitySpotPrice"}
)


class GraphqlRoutes:
    """The GraphQL half of ``RunPodFake`` (its one route is registered here)."""

    def __init__(self, fake: RunPodFake) -> None:
        self.fake = fake
        fake.route(
            "POST",
            "/graphql",
            self.graphql,
            kind="other",
            name="graphql",
            validate=False,
            reason="GraphQL is not in the OpenAPI spec; checked against the documented shapes",
        )

    def graphql(self, request: Request) -> Response:
        fake = self.fake
        payload = fake.body(request)
        query = payload.get("query") if isinstance(payload, dict) else None
        if not isinstance(query, str):
            return self.invalid(request, "body needs a string 'query'")
        variables = payload.get("variables") or {}
        if "podRentInterruptable" in query:
            return self.rent(request, variables.get("input") or {})
        if "gpuTypes" in query:
            fields = set(re.findall(r"\w+", query.split("gpuTypes", 1)[1])) & GPU_TYPE_FIELDS
            if not fields:
                return self.invalid(request, "gpuTypes selects no known field")
            return fake.json({"data": {"gpuTypes": [self.gpu_type(gpu, fields) for gpu in fake.gpus]}})
        return self.invalid(request, "operation not served by this fake")

    def invalid(self, request: Request, why: str) -> Response:
        fake = self.fake
        message = f"runpod request POST /graphql: documented shape violated: {why}"
        with fake.lock:
            fake.validation_errors.append(message)
        return fake.json({"errors": [{"message": why, "extensions": {"code": "GRAPHQL_VALIDATION_FAILED"}}]}, 400)

    @staticmethod
    def gpu_type(gpu: dict[str, Any], fields: set[str]) -> dict[str, Any]:
        values = {
            "id": gpu["id"],
            "displayName": gpu["name"],
            "memoryInGb": gpu["memory"],
            "securePrice": gpu["price"]["secure"],
            "communityPrice": gpu["price"]["community"],
            "secureSpotPrice": gpu["spot"]["secure"],
            "communitySpotPrice": gpu["spot"]["community"],
        }
        return {key: values[key] for key in sorted(fields)}

    def rent(self, request: Request, spec: dict[str, Any]) -> Response:
        fake = self.fake
        unknown = set(spec) - RENT_FIELDS
        missing = RENT_REQUIRED - set(spec)
        env = spec.get("env", [])
        if unknown or missing:
            return self.invalid(
                request, f"podRentInterruptable input: unknown {sorted(unknown)}, missing {sorted(missing)}"
            )
        if not isinstance(env, list) or not all(isinstance(e, dict) and set(e) == {"key", "value"} for e in env):
            return self.invalid(request, "env must be a list of {key, value}")
        if spec.get("cloudType", "ALL") not in ("ALL", "SECURE", "COMMUNITY"):
            return self.invalid(request, "cloudType must be ALL, SECURE or COMMUNITY")
        cloud = "SECURE" if spec.get("cloudType", "ALL") == "ALL" else spec["cloudType"]
        centers = [spec["dataCenterId"]] if spec.get("dataCenterId") else []
        refusal, center = fake._place(spec["gpuTypeId"], int(spec["gpuCount"]), cloud, centers)
        if refusal is not None:
            detail = json.loads(refusal.get_data()).get("detail", "")
            if refusal.status_code == 401:
                return refusal
            code = "SUPPLY_CONSTRAINT" if detail == NO_CAPACITY else "BAD_REQUEST"
            return fake.json(
                {
                    "errors": [{"message": detail, "path": ["podRentInterruptable"], "extensions": {"code": code}}],
                    "data": None,
                }
            )
        ports = [p for p in str(spec.get("ports", "")).split(",") if p]
        pod = fake._new_pod(
            name=spec.get("name", ""),
            image=spec["imageName"],
            gpu_id=spec["gpuTypeId"],
            count=int(spec["gpuCount"]),
            cloud=cloud,
            center=center,
            disk=int(spec.get("containerDiskInGb", 50)),
            env={e["key"]: e["value"] for e in env},
            ports=ports,
            args=spec.get("dockerArgs", ""),
            start_ssh=bool(spec.get("startSsh")),
            interruptible=True,
        )
        fake.bids[pod["id"]] = float(spec["bidPerGpu"])
        return fake.json({"data": {"podRentInterruptable": {"id": pod["id"], "name": pod["name"]}}})


__all__ = ["GPU_TYPE_FIELDS", "NO_CAPACITY", "RENT_FIELDS", "RENT_REQUIRED", "GraphqlRoutes"]
