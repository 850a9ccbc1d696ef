"""What a Compute Engine instance is to the GCP adapter: the insert body built from a NodeSpec
(name, labels, metadata, scheduling), the Node read back from an instance, and the Launcher one
``create_nodes`` call drives through providers.orchestrate.

Split from ``provider.py`` along the create path's seam: the adapter class keeps the contract's
methods (offers, quotas, create/get/delete, firewall); this module holds the per-instance shapes.
See ``provider.py``'s docstring for how the contract maps onto Compute Engine.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from provisioner.errors import PlanError, ProviderAPIError, ProviderError
from provisioner.providers.addresses import ip_or_none
from provisioner.providers.base import (
    CLUSTER_TAG,
    EXPIRES_TAG,
    LEASE_TAG,
    NODE_TAG,
    OWNER_TAG,
    RENEWED_TAG,
    ROLE_TAG,
    RUN_TAG,
    Node,
    NodeSpec,
    NodeStatus,
    expiry_label,
    owner_id,
    parse_expiry,
)
from provisioner.providers.billing import provider_time
from provisioner.providers.gcp import firewall
from provisioner.providers.gcp.client import is_not_found
from provisioner.providers.gcp.models import leaf, zone_region
from provisioner.providers.orchestrate import Launcher, Member

if TYPE_CHECKING:
    from provisioner.providers.gcp.provider import GCPProvider

_LABEL = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")
_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")

STATUS = {
    "PROVISIONING": NodeStatus.PENDING,
    "STAGING": NodeStatus.PENDING,
    "PENDING": NodeStatus.PENDING,
    "RUNNING": NodeStatus.RUNNING,
    "STOPPING": NodeStatus.STOPPING,
    "SUSPENDING": NodeStatus.STOPPING,
    "DEPROVISIONING": NodeStatus.STOPPING,
    "PENDING_STOP": NodeStatus.STOPPING,
    "STOPPED": NodeStatus.STOPPING,
    "SUSPENDED": NodeStatus.STOPPING,
    "TERMINATED": NodeStatus.TERMINATED,
    "REPAIRING": NodeStatus.FAILED,
}
GONE = {"STOPPING", "TERMINATED", "DEPROVISIONING"}
SETTLING = {"STOPPING", "DEPROVISIONING"}  # on the way to stopped or deleted: delete_nodes leaves them be


def instance_body(cluster_id: str, spec: NodeSpec, *, image: str | None, owner: str | None) -> dict[str, Any]:
    """The instances.insert body of one node (``image``/``owner``: the adapter's defaults). Raises
    PlanError, before any request, for a node without zone or image or with an invalid name/label."""
    if not spec.zone:
        raise PlanError(f"gcp: node {spec.name} has no zone; GCP instances are zonal")
    if not (spec.image or image):
        raise PlanError(f"gcp: node {spec.name} has no image; set it or PROVISIONER_GCP_IMAGE")
    name = f"{cluster_id}-{spec.name}".lower()
    labels = {**spec.tags, CLUSTER_TAG: cluster_id, NODE_TAG: spec.name}
    labels.setdefault(OWNER_TAG, spec.owner or owner or owner_id())  # what every delete checks
    if spec.role is not None:
        labels.setdefault(ROLE_TAG, spec.role)
    if spec.expires_at is not None:
        labels[EXPIRES_TAG] = expiry_label(spec.expires_at)  # labels take no ':' or capitals
    if spec.lease:
        labels[LEASE_TAG] = spec.lease
    if spec.run:
        labels[RUN_TAG] = spec.run  # a run id is label-safe as it is (lowercase digits, '-', hex)
    bad = [f"{k}={v}" for k, v in labels.items() if not _LABEL.match(k) or not _LABEL_VALUE.match(v)]
    if bad or not _NAME.match(name):
        raise PlanError(
            f"gcp: {name!r} or labels {bad} are not valid GCP names/labels (lowercase letters, "
            "digits, '-' and '_'); nothing was bought"
        )
    metadata = []
    if spec.user_data:
        metadata.append({"key": "user-data", "value": spec.user_data})
    if spec.ssh_public_key:
        metadata.append({"key": "ssh-keys", "value": f"ubuntu:{spec.ssh_public_key.strip()}"})
    scheduling: dict[str, Any] = {
        "on_host_maintenance": "TERMINATE",
        "automatic_restart": not spec.spot,
        "provisioning_model": "SPOT" if spec.spot else "STANDARD",
    }
    if spec.spot:
        scheduling["instance_termination_action"] = "DELETE"
    if spec.expires_at is not None:
        # GCE deletes the VM itself at the expiry: the TTL stops the bill (disks too) even
        # when the client is gone. Absolute time, so a retried create asks for the same end.
        scheduling["termination_time"] = spec.expires_at.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        scheduling["instance_termination_action"] = "DELETE"
    return {
        "name": name,
        "machine_type": f"zones/{spec.zone}/machineTypes/{spec.instance_type}",
        "labels": labels,
        "disks": [
            {
                "boot": True,
                "auto_delete": True,
                "initialize_params": {"source_image": spec.image or image, "disk_size_gb": spec.disk_gib},
            }
        ],
        "tags": {"items": [cluster_id]},  # what the cluster's firewall rules aim at (providers.gcp.firewall)
        "network_interfaces": [
            {"network": firewall.NETWORK, "access_configs": [{"name": "External NAT", "type_": "ONE_TO_ONE_NAT"}]}
        ],
        "scheduling": scheduling,
        "metadata": {"items": metadata},
    }


def node_of(cluster_id: str, zone: str, instance: Any) -> Node:
    """The Node an instance of ``cluster_id`` in ``zone`` is (addresses validated as IPs)."""
    nic = instance.network_interfaces[0] if instance.network_interfaces else None
    public = nic.access_configs[0].nat_i_p if nic and nic.access_configs and nic.access_configs[0].nat_i_p else None
    return Node(
        provider="gcp",
        id=instance.name,
        name=instance.labels.get(NODE_TAG, ""),
        cluster_id=cluster_id,
        status=STATUS.get(instance.status, NodeStatus.PENDING),
        instance_type=leaf(instance.machine_type),
        region=zone_region(zone),
        public_ip=ip_or_none(public),
        private_ip=ip_or_none(nic.network_i_p if nic else None),
        provider_state=instance.status,
        launched_at=provider_time(instance.creation_timestamp or None),
        owner=instance.labels.get(OWNER_TAG),
        lease=instance.labels.get(LEASE_TAG),
        renewed_at=parse_expiry(instance.labels.get(RENEWED_TAG)),
        run=instance.labels.get(RUN_TAG),
    )


def renew(provider: GCPProvider, cluster_id: str, lease: str, owner: str, at: dt.datetime | None) -> int:
    """Set (``at``) or remove (None) the RENEWED_TAG label of the cluster's instances carrying
    ``lease`` and ``owner``: instances.setLabels with the fingerprint the listing showed; one whose
    labels changed meanwhile (412) is read again and set once more. How many were labelled."""
    count = 0
    for zone, instance in provider._members(cluster_id):
        labels = dict(instance.labels)
        if labels.get(LEASE_TAG) != lease or labels.get(OWNER_TAG) != owner or instance.status in GONE:
            continue
        for attempt in range(2):
            labels.pop(RENEWED_TAG, None)
            if at is not None:
                labels[RENEWED_TAG] = expiry_label(at)
            try:
                provider.client.set_labels(zone, instance.name, labels, instance.label_fingerprint)
                break
            except ProviderAPIError as exc:
                if exc.status != 412 or attempt:
                    raise
                instance = provider.client.get_instance(zone, instance.name)
                labels = dict(instance.labels)
        count += 1
    return count


class InstanceLauncher(Launcher):
    """One ``create_nodes`` call: one insert per node, named ``<cluster>-<node>`` (a retried insert
    of the same name finds the instance: HTTP 409)."""

    def __init__(self, provider: GCPProvider, cluster_id: str, bodies: list[tuple[NodeSpec, dict[str, Any]]]) -> None:
        super().__init__(provider.name, cluster_id)
        self.adapter = provider
        self.owner = provider.owner or self.owner
        self.bodies = {spec.name: (str(spec.zone), body) for spec, body in bodies}
        self.zone_of = {body["name"]: str(spec.zone) for spec, body in bodies}

    def members(self) -> list[Member]:
        found = []
        for zone, instance in self.adapter._members(self.cluster_id):
            if instance.status not in GONE:
                self.zone_of[instance.name] = zone
                found.append(
                    Member(
                        instance.name,
                        instance.labels.get(NODE_TAG),
                        leaf(instance.machine_type),
                        zone_region(zone),
                        instance.labels.get(OWNER_TAG),
                        instance.labels.get(LEASE_TAG),
                        run=instance.labels.get(RUN_TAG),
                    )
                )
        return found

    def launch(self, batch: Sequence[NodeSpec]) -> list[str]:
        (spec,) = batch
        zone, body = self.bodies[spec.name]
        self._insert(zone, body)
        return [str(body["name"])]

    def _insert(self, zone: str, body: dict[str, Any]) -> None:
        from google.cloud import compute_v1

        client = self.adapter.client
        try:
            client.insert_instance(zone, compute_v1.Instance(body))
        except ProviderAPIError as exc:
            if exc.status == 409 or exc.status == 0 or exc.status >= 500:
                try:  # the insert may have happened: the name is ours, adopt it if it carries our label
                    found = client.get_instance(zone, body["name"])
                except ProviderAPIError:
                    raise exc from None
                if found.labels.get(CLUSTER_TAG) == body["labels"][CLUSTER_TAG]:
                    return
            raise

    def terminate(self, ids: Sequence[str]) -> list[str]:
        left = []
        for name in ids:
            try:
                self.adapter.client.delete_instance(self.zone_of[name], name)
            except ProviderAPIError as exc:
                if not is_not_found(exc):
                    left.append(name)
            except ProviderError:
                left.append(name)
        return left

    def describe(self, batch: Sequence[NodeSpec]) -> str:
        spec = batch[0]
        return f"1 x {spec.instance_type} in {spec.region} ({spec.zone})"


__all__ = ["GONE", "SETTLING", "STATUS", "InstanceLauncher", "instance_body", "node_of"]
