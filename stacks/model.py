"""The typed arguments of a ``GpuCluster``, built from a Plan and its rendered bootstrap.

``cluster_args(plan, realized, run)`` is pure: no Pulumi call, no
clock, no environment. Node names and roles come from ``Plan.nodes`` only; the user data a
node boots with is picked by its role and the plan's bootstrap method:

- ``cloud_init``: ``cloud-init/<role>.yaml`` (AWS, GCP, Lambda);
- ``script``: ``bootstrap/<role>.sh``, run as the container entrypoint (RunPod, Vast.ai);
- ``ssh``: none; the lifecycle layer runs ``bootstrap/<role>.sh`` over SSH (Fluence).

``ClusterArgs`` holds the user data as plain text with ``repr=False``; ``GpuCluster`` turns
it into Pulumi secrets before any resource sees it.

Tags: every resource carries ``CLUSTER_TAG`` (cluster id), ``OWNER_TAG`` and ``EXPIRES_TAG``
(providers/base.py) so ``gc`` finds it. AWS takes the expiry as ISO 8601 UTC
(``2026-11-24T01:00:00Z``, ``expiry_text``); GCP label values allow only ``[a-z0-9_-]``, so
labels carry the same instant as ``20261124t010000z`` (``expiry_label``). Neocloud nodes get
``expires_at`` in their NodeSpec and the adapter writes its own tags (or env, or name).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from provisioner.capabilities import Bootstrap
from provisioner.errors import PlanError
from provisioner.plan import Plan, PlanNode
from provisioner.providers import base as _base
from provisioner.providers.base import NodeSpec
from provisioner.providers.registry import facts
from provisioner.realize.inputs import RunFacts, bare_specs
from provisioner.realize.nodes import expiry_for, login_user, user_data_path
from provisioner.spec import SharedFsKind

CLUSTER_TAG, OWNER_TAG, EXPIRES_TAG = _base.CLUSTER_TAG, _base.OWNER_TAG, _base.EXPIRES_TAG
NODE_TAG = _base.NODE_TAG
_LABEL_VALUE = re.compile(r"[^a-z0-9_-]")


@dataclass(frozen=True)
class SharedFs:
    """A managed shared filesystem to create beside the nodes (FSx for Lustre, Filestore)."""

    size_gib: int
    mount_path: str


@dataclass(frozen=True)
class ClusterArgs:
    """Everything ``GpuCluster`` builds from: fixed before any resource exists."""

    cluster_id: str
    provider: str
    region: str
    zone: str | None
    instance_type: str
    gpus_per_node: int
    spot: bool
    bootstrap: Bootstrap
    nodes: tuple[PlanNode, ...]
    allowed_cidrs: tuple[str, ...]
    ssh_public_key: Any
    """The key the provider installs for the login user (a str or a Pulumi Output[str]), or None."""
    owner: str
    expires_at: dt.datetime | None
    ttl_seconds: int | None
    hourly_usd: Decimal
    local_nvme_gib: float
    shared_fs: SharedFs | None = None
    image: str | None = None
    flex_start: bool = False
    capacity_reservation_id: str | None = None
    """The EC2 Capacity Block (capacity reservation id) a Capacity Block plan's nodes launch into."""
    user_data: Mapping[str, Any] = field(default_factory=dict, repr=False)
    """Node name -> bootstrap text (a str or Output[str]; secret). Absent for SSH-bootstrapped nodes."""
    specs: tuple[NodeSpec, ...] = ()
    """Every node's final NodeSpec less boot data and key (``realize.inputs.bare_specs``)."""
    lease: str | None = None
    """The lease mark of the ``up`` that creates the nodes (``providers.ownership.LeaseMark``), or None."""
    run: str | None = None
    """The run id of the bring-up the nodes are bought for (``lifecycle.state.new_run_id``), or None."""

    @property
    def head(self) -> PlanNode:
        return self.nodes[0]

    @property
    def ssh_user(self) -> str:
        return login_user(self.provider)

    @property
    def expires_text(self) -> str:
        return "" if self.expires_at is None else iso_utc(self.expires_at)

    def tags(self, **extra: str) -> dict[str, str]:
        """Cluster, owner and expiry tags (AWS, neoclouds), plus ``extra``."""
        tags = {CLUSTER_TAG: self.cluster_id, OWNER_TAG: self.owner}
        if self.expires_at is not None:
            tags[EXPIRES_TAG] = self.expires_text
        return {**tags, **extra}

    def lease_tags(self) -> dict[str, str]:
        """The lease mark as a node's tag or label (the direct engine's adapters write the same), or {}."""
        return {} if self.lease is None else {_base.LEASE_TAG: self.lease}

    def run_tags(self) -> dict[str, str]:
        """The run id as a node's tag or label (the direct engine's adapters write the same), or {}."""
        return {} if self.run is None else {_base.RUN_TAG: self.run}

    @staticmethod
    def kept_marks(prop: str) -> list[str]:
        """The property paths in ``prop`` (``tags``, ``labels``) of the marks a later ``up`` of the stack
        leaves as they are (``ignore_changes``): the lease and the run mark name the ``up`` and the run
        that bought the instance (another machine's ``up`` of the stack has another run id: the instance
        keeps its buyer's, as a neocloud node does), and the lease renewal mark is written outside Pulumi
        (lifecycle.lease_renewal), so a refreshed state would otherwise plan to remove it. A change of a
        tag or label updates an instance in place, never replaces it; ignoring these, none is planned."""
        return [f'{prop}["{key}"]' for key in (_base.LEASE_TAG, _base.RUN_TAG, _base.RENEWED_TAG)]

    def description(self) -> str:
        """The same facts as text, for GCP resources that take no labels (networks, firewalls, policies)."""
        expires = f"; expires {self.expires_text}" if self.expires_at is not None else ""
        return f"provisioner cluster {self.cluster_id}; owner {self.owner}{expires}"

    def labels(self, **extra: str) -> dict[str, str]:
        """The same as GCP labels: lowercase ``[a-z0-9_-]`` values of at most 63 characters."""
        labels = {CLUSTER_TAG: self.cluster_id, OWNER_TAG: label_value(self.owner)}
        if self.expires_at is not None:
            labels[EXPIRES_TAG] = _base.expiry_label(self.expires_at)
        return {**labels, **{k: label_value(v) for k, v in extra.items()}}


def iso_utc(when: dt.datetime) -> str:
    return _base.expiry_text(when)


def label_value(text: str) -> str:
    """``text`` as a GCP label value: lowercased, other characters as ``-``, at most 63 long."""
    return _LABEL_VALUE.sub("-", text.lower())[:63]


def parse_expiry(text: str) -> dt.datetime:
    """An expiry tag or label (either form) as an aware UTC datetime. ValueError otherwise."""
    parsed = _base.parse_expiry(text)
    if parsed is None:
        raise ValueError(f"not an expiry tag value: {text!r}")
    return parsed


SHARED_FS_ENV = "/etc/provisioner/shared-fs.env"


def with_shared_fs_target(user_data: str, target: str) -> str:
    """``user_data`` with a boot hook that writes ``SHARED_FS_TARGET=<target>`` to
    ``/etc/provisioner/shared-fs.env`` first. Pure.

    The managed filesystem exists only after render, so its address cannot be in the rendered
    cloud-config; the rendered ``provisioner-shared-fs`` script waits for this file. A MIME
    multi-part message keeps the rendered part byte for byte: a ``cloud-boothook`` part runs
    before any cloud-config module. ValueError for a target with characters an address or
    export path never has.
    """
    if not re.fullmatch(r"[A-Za-z0-9.@:/_-]+", target):
        raise ValueError(f"not a filesystem address: {target!r}")
    from email.mime.multipart import MIMEMultipart
    from email.mime.text import MIMEText

    hook = (
        f"#cloud-boothook\n#!/bin/sh\nmkdir -p /etc/provisioner\n"
        f"printf 'SHARED_FS_TARGET=%s\\n' '{target}' > {SHARED_FS_ENV}\n"
    )
    # A fixed boundary: the same inputs give the same bytes, so `pulumi up` sees no change.
    boundary = "provisioner-" + hashlib.sha256(f"{hook}\0{user_data}".encode()).hexdigest()[:32]
    message = MIMEMultipart(boundary=boundary)
    for text, subtype in ((hook, "cloud-boothook"), (user_data, "cloud-config")):
        # ASCII parts travel as 7bit (verbatim): base64 would spend a third of AWS's 16 KiB.
        part = MIMEText(text, subtype, "us-ascii" if text.isascii() else "utf-8")
        part.add_header("Content-Disposition", "attachment", filename=f"{subtype}.txt")
        message.attach(part)
    return message.as_string()


def _field(realized: Any, name: str, field_name: str) -> Any:
    """Node ``name``'s ``field_name`` in ``realized`` (a RealizeInput, or an Output of one)."""
    if hasattr(realized, "apply"):
        return realized.apply(lambda found: getattr(found.spec(name), field_name))
    return getattr(realized.spec(name), field_name)


def cluster_args(
    plan: Plan,
    realized: Any,
    run: RunFacts,
    *,
    image: str | None = None,
    flex_start: bool = False,
    capacity_reservation_id: str | None = None,
) -> ClusterArgs:
    """The component's arguments for ``plan``. Pure.

    ``realized`` is the realize input (``realize.inputs.realize_input(plan, secrets, run)``, what the
    direct engine builds from too), or an Output of it when the secrets arrive as secret stack
    config: each node's boot data and the login key come from its specs, the node list
    (``ClusterArgs.specs``) from ``realize.inputs.bare_specs(plan, run)``, the same specs less those.
    Raises PlanError when flex-start is asked off GCP, and when a Capacity Block plan has no
    ``capacity_reservation_id`` (the stack never buys a block: it is bought first, through the AWS
    adapter or ``aws ec2 purchase-capacity-block``) or another plan has one.
    """
    option = plan.option
    user_data = {
        node.name: _field(realized, node.name, "user_data")
        for node in plan.nodes
        if user_data_path(node.bootstrap, node.role) is not None
    }
    key = _field(realized, plan.head.name, "ssh_public_key")
    if hasattr(key, "apply"):
        import pulumi

        key = pulumi.Output.unsecret(key)  # a public key: the Output is secret only for its source
    owner, expires_at = run.owner, run.expires_at
    if flex_start and not facts()[option.provider].flex_start:
        offered = ", ".join(name for name, found in facts().items() if found.flex_start)
        raise PlanError(f"flex-start provisioning is offered on {offered} only; this plan is on {option.provider}")
    if option.offer.block_hours and not capacity_reservation_id:
        raise PlanError(
            f"the plan is an EC2 Capacity Block ({option.offer.block_hours} h, paid upfront): buy it "
            "first (provisioner up --engine direct buys and uses it; or aws ec2 purchase-capacity-block) "
            "and set provisioner:capacityReservationId to its reservation id"
        )
    if capacity_reservation_id and not option.offer.block_hours:
        raise PlanError("provisioner:capacityReservationId is set but the plan is not a Capacity Block")
    shared = plan.spec.storage.shared
    ttl = plan.spec.lifetime.ttl_hours
    return ClusterArgs(
        cluster_id=plan.cluster_id,
        provider=option.provider,
        region=option.region,
        zone=option.zone,
        instance_type=option.instance_type,
        gpus_per_node=option.gpus_per_node,
        spot=option.spot,
        bootstrap=option.bootstrap,
        nodes=plan.nodes,
        allowed_cidrs=tuple(plan.spec.access.allowed_cidrs),
        ssh_public_key=key,
        owner=owner,
        expires_at=expires_at,
        ttl_seconds=None if ttl is None else math.ceil(ttl * 3600),
        hourly_usd=option.hourly_usd,
        local_nvme_gib=option.offer.local_nvme_gib,
        shared_fs=SharedFs(math.ceil(shared.size_gib), shared.mount_path)
        if shared.kind is SharedFsKind.MANAGED
        else None,
        image=image,
        flex_start=flex_start,
        capacity_reservation_id=capacity_reservation_id,
        user_data=user_data,
        specs=tuple(bare_specs(plan, run)),
        lease=run.lease,
        run=run.run,
    )


__all__ = [
    "CLUSTER_TAG",
    "EXPIRES_TAG",
    "NODE_TAG",
    "OWNER_TAG",
    "ClusterArgs",
    "SharedFs",
    "cluster_args",
    "expiry_for",
    "iso_utc",
    "label_value",
    "parse_expiry",
    "user_data_path",
    "with_shared_fs_target",
]
