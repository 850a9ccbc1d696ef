"""RunPod Instant Clusters in the RunPod fake: the ``/v2/clusters`` routes.

Shapes follow ``openapi-rest-v2.json`` (``CreateClusterRequest``, ``Cluster``,
``ListClustersResponse``, ``ListPodsResponse``); ``RunPodFake`` validates every request and
answer against it as for pods. Behaviour, where the spec leaves room:

- A create buys all ``compute.podCount`` member pods at once or none (a ``capacity_after``
  fault on ``createCluster`` that grants fewer than the pod count refuses the whole cluster
  with RunPod's no-capacity 400). Members are ordinary fake pods with ``cluster`` = {id, rank,
  ip}: rank 0 is the primary, ``ip`` its address on the cluster's overlay (``10.65.0.0/16``).
  Every member gets the request's env, args, ports and image, as the spec says the container
  configuration applies to every pod.
- Placement: the first data center in ``dataCenterIds`` (or any) whose availability for the
  GPU is not NONE; Secure Cloud only (the request has no cloud field).
- Names are not unique on RunPod; the fake does not enforce uniqueness either.
- ``DELETE /v2/clusters/{id}`` removes the cluster and its members at once (204); a second
  delete answers 404 like a gone pod.
"""

from __future__ import annotations

import copy
import secrets
import string
from collections import Counter
from typing import TYPE_CHECKING, Any

from werkzeug.wrappers import Request, Response

from provisioner.testing.fakes.metering import stamp

if TYPE_CHECKING:
    from provisioner.testing.fakes.runpod import RunPodFake

OVERLAY_CIDR = "10.65.0.0/16"
VXLAN_PORT = 4789


def _cluster_id() -> str:
    return "".join(secrets.choice(string.ascii_lowercase + string.digits) for _ in range(12))


class ClusterRoutes:
    """The cluster half of ``RunPodFake``; ``clusters`` maps id -> the stored cluster (without
    its derived ``pods``/``primary`` fields, which are computed from the member pods on read)."""

    def __init__(self, fake: RunPodFake) -> None:
        self.fake = fake
        self.clusters: dict[str, dict[str, Any]] = {}
        self._vxlan = 41
        fake.route("GET", "/v2/clusters", self._list, kind="list", name="listClusters")
        fake.route("POST", "/v2/clusters", self._create, kind="launch", name="createCluster")
        fake.route("GET", "/v2/clusters/{cluster_id}", self._get, kind="get", name="getCluster")
        fake.route("GET", "/v2/clusters/{cluster_id}/pods", self._pods, kind="list", name="listClusterPods")
        fake.route("DELETE", "/v2/clusters/{cluster_id}", self._delete, kind="delete", name="deleteCluster")

    def members(self, cluster_id: str) -> list[dict[str, Any]]:
        pods = [pod for pod in self.fake.pods.values() if pod.get("cluster", {}).get("id") == cluster_id]
        return sorted(pods, key=lambda pod: pod["cluster"]["rank"])

    def _shown(self, cluster: dict[str, Any]) -> dict[str, Any]:
        """The cluster as the API returns it, its summary derived from the members' current state."""
        members = [self.fake._visible(pod) for pod in self.members(cluster["id"])]
        body = copy.deepcopy(cluster)
        body["pods"] = {"total": len(members), "byStatus": dict(Counter(pod["status"] for pod in members))}
        if members:
            primary = members[0]
            body["primary"] = {"podId": primary["id"], "status": primary["status"]}
            direct = (primary.get("ssh") or {}).get("direct")
            if primary["status"] == "RUNNING" and direct:
                body["primary"]["sshEndpoint"] = f"{direct['host']}:{direct['port']}"
        return body

    # ----- handlers --------------------------------------------------------------------------
    def _list(self, request: Request) -> Response:
        return self.fake.ok({"clusters": [self._shown(cluster) for cluster in self.clusters.values()]})

    def _get(self, request: Request, cluster_id: str) -> Response:
        cluster = self.clusters.get(cluster_id)
        return self.fake.ok(self._shown(cluster)) if cluster else self.fake.problem(404, "cluster not found")

    def _pods(self, request: Request, cluster_id: str) -> Response:
        if cluster_id not in self.clusters:
            return self.fake.problem(404, "cluster not found")
        return self.fake.ok({"pods": [self.fake._visible(pod) for pod in self.members(cluster_id)]})

    def _delete(self, request: Request, cluster_id: str) -> Response:
        if self.clusters.pop(cluster_id, None) is None:
            return self.fake.problem(404, "cluster not found")
        for pod in self.members(cluster_id):
            self.fake.pods.pop(pod["id"], None)
            self.fake.meter.stop(pod["id"])
        return self.fake._with_limit_headers(Response(status=204))

    def _create(self, request: Request) -> Response:
        fake = self.fake
        body = fake.body(request)
        compute = body["compute"]
        gpu_id, per_pod, pod_count = compute["gpuTypeId"], compute["gpuCountPerPod"], compute["podCount"]
        gpu = next((g for g in fake.gpus if g["id"] == gpu_id), None)
        if gpu is None:
            return fake.problem(400, f"gpu type {gpu_id!r} is not available")
        if not gpu["secure"] or per_pod > gpu["maxCount"]["secure"]:
            return fake.problem(400, f"{gpu_id} x{per_pod} per pod is not offered for clusters")
        wanted = body.get("dataCenterIds") or []
        stocked = [dc for dc, level in gpu["dataCenters"].items() if level != "NONE" and (not wanted or dc in wanted)]
        if not stocked:
            return fake.error_reply("capacity")
        hourly = gpu["price"]["secure"] * per_pod * pod_count
        if fake.balance_usd is not None and hourly > fake.balance_usd:
            return fake.error_reply("insufficient_balance")
        granted, _ = fake.faults.grant_capacity(pod_count, "createCluster")
        if granted < pod_count:  # a cluster is bought whole or not at all
            return fake.error_reply("capacity")
        cluster_id = _cluster_id()
        self._vxlan += 1
        cluster = {
            "id": cluster_id,
            "name": body["name"],
            "type": body["type"],
            "compute": {"gpuTypeId": gpu_id, "gpuCountPerPod": per_pod, "podCount": pod_count},
            "dataCenterId": stocked[0],
            "createdAt": stamp(fake.clock()),
            "network": {"cidr": OVERLAY_CIDR, "vxlanId": self._vxlan, "vxlanPort": VXLAN_PORT},
        }
        self.clusters[cluster_id] = cluster
        for rank in range(pod_count):
            fake._new_pod(
                name=f"{body['name']}-{rank}",
                image=body.get("image", "runpod/base"),
                gpu_id=gpu_id,
                count=per_pod,
                cloud="SECURE",
                center=stocked[0],
                disk=body.get("disk", 50),
                env=dict(body.get("env") or {}),
                ports=list(body.get("ports") or []),
                args=body.get("args", ""),
                start_ssh=bool(body.get("startSsh")),
                cluster={"id": cluster_id, "rank": rank, "ip": f"10.65.0.{rank + 2}"},
            )
        return fake.ok(self._shown(cluster), 201)


__all__ = ["OVERLAY_CIDR", "ClusterRoutes"]
