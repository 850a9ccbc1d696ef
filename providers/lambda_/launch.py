"""How the Lambda adapter launches: batches of one shape under a placeholder name, each instance
renamed to its node's name afterwards from a small pool (``BatchLauncher``, the ``orchestrate``
launcher of one ``create_nodes`` call). See ``provider``'s module docstring.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

from provisioner.errors import ProviderError
from provisioner.providers.base import CLUSTER_TAG, LEASE_TAG, OWNER_TAG, RUN_TAG, NodeSpec, tool_tags
from provisioner.providers.lambda_ import firewall
from provisioner.providers.lambda_.client import LambdaClient
from provisioner.providers.lambda_.models import FirewallRulesetEntry, ImageSpec, Instance, LaunchRequest, Tag
from provisioner.providers.orchestrate import Launcher, Member

if TYPE_CHECKING:
    from provisioner.providers.lambda_.provider import LambdaProvider

PLACEHOLDER = "~unassigned"
MAX_BATCH = 16
"""Most instances asked for in one launch call (Lambda publishes no maximum; the fake takes 32).

At the published limits (1 request/s, 1 launch/12 s) renaming a batch of 16 takes longer
than the launch spacing, so renames, not launches, set the pace and larger batches would
not be faster; the remainder batch goes last, so the renames left after the last launch
are as few as possible."""
RENAME_WORKERS = 4
"""Threads renaming instances concurrently; the client's rate limiter spaces their calls."""
GONE = {"terminating", "terminated", "preempted"}
"""Instance statuses that no longer count as the cluster's."""
IMAGE_ID = re.compile(r"^[0-9a-f]{32}$")


class _Renames:
    """Renames issued from a small pool while the caller goes on launching.

    Not shared between threads: one ``create_nodes`` call owns it. ``close`` (or ``abort``,
    which drops renames not started yet) waits for the ones in flight, so nothing touches an
    instance after the caller terminates it.
    """

    def __init__(self, client: LambdaClient) -> None:
        self._client = client
        self._pool: ThreadPoolExecutor | None = None
        self._futures: list[Future[Instance]] = []

    def submit(self, instance_id: str, name: str) -> None:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(RENAME_WORKERS, thread_name_prefix="lambda-rename")
        self._futures.append(self._pool.submit(self._client.rename_instance, instance_id, name))

    def first_error(self) -> ProviderError | None:
        """The first failure among renames already finished (none: they all went well so far)."""
        for future in self._futures:
            if future.done() and not future.cancelled() and isinstance(future.exception(), ProviderError):
                return future.exception()  # type: ignore[return-value]
        return None

    def results(self) -> list[Instance]:
        """Wait for every rename; the renamed instances, or the first failure raised."""
        return [future.result() for future in self._futures]

    def abort(self) -> None:
        self.close(cancel=True)

    def close(self, *, cancel: bool = False) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=cancel)


class BatchLauncher(Launcher):
    """One ``create_nodes`` call: batches of one shape under a placeholder name, renamed after."""

    def __init__(self, provider: LambdaProvider, cluster_id: str) -> None:
        super().__init__(provider.name, cluster_id)
        self.adapter = provider
        self.keys: dict[str | None, str] = {}  # ssh public key -> registered key name
        self.firewalls: dict[str, list[FirewallRulesetEntry] | None] = {}  # region -> rulesets to attach
        self.renames = _Renames(provider.client)

    def members(self) -> list[Member]:
        return [
            Member(
                i.id,
                None if (name := self.adapter._node_name(self.cluster_id, i)) == PLACEHOLDER else name,
                i.instance_type.name if i.instance_type else "",
                i.region.name if i.region else "",
                i.tag(OWNER_TAG),
                i.tag(LEASE_TAG),
                run=i.tag(RUN_TAG),
            )
            for i in self.adapter._members(self.cluster_id)
            if i.status not in GONE
        ]

    def prepare(self, missing: Sequence[NodeSpec]) -> None:
        for spec in missing:
            if spec.ssh_public_key not in self.keys:
                self.keys[spec.ssh_public_key] = self.adapter._key_for(spec)
        for region in dict.fromkeys(spec.region for spec in missing):  # rulesets attach at launch only
            self.firewalls[region] = firewall.launch_entries(self.adapter.client, self.cluster_id, region)

    def batches(self, missing: Sequence[NodeSpec]) -> list[list[NodeSpec]]:
        groups: dict[tuple[object, ...], list[NodeSpec]] = {}
        for spec in missing:
            key = (
                spec.instance_type,
                spec.region,
                spec.image,
                spec.user_data,
                spec.ssh_public_key,
                spec.expires_at,
                tuple(sorted(spec.tags.items())),
            )
            groups.setdefault(key, []).append(spec)
        return [
            group[start : start + MAX_BATCH] for group in groups.values() for start in range(0, len(group), MAX_BATCH)
        ]

    def launch(self, batch: Sequence[NodeSpec]) -> list[str]:
        failed = self.renames.first_error()
        if failed is not None:  # stop launching: the whole call is rolled back anyway
            raise failed
        spec = batch[0]
        single = len(batch) == 1
        image = None
        if spec.image:
            image = ImageSpec(id=spec.image) if IMAGE_ID.match(spec.image) else ImageSpec(family=spec.image)
        tags = {
            **tool_tags(self.cluster_id, spec.expires_at, spec.owner, spec.role, spec.lease, spec.run),
            **{k: v for k, v in spec.tags.items() if k != CLUSTER_TAG},
        }
        request = LaunchRequest(
            region_name=spec.region,
            instance_type_name=spec.instance_type,
            ssh_key_names=[self.keys[spec.ssh_public_key]],
            name=f"{self.cluster_id}-{spec.name if single else PLACEHOLDER}",
            image=image,
            user_data=spec.user_data,
            tags=[Tag(key=k, value=v) for k, v in sorted(tags.items())],
            quantity=len(batch),
            firewall_rulesets=self.firewalls.get(spec.region),
        )
        ids = self.adapter.client.launch(request)
        if not single:
            for node, instance_id in zip(batch, ids, strict=False):
                self.adopt(instance_id, node)
        return ids

    def adopt(self, member_id: str, spec: NodeSpec) -> None:
        self.renames.submit(member_id, f"{self.cluster_id}-{spec.name}")

    def finish(self) -> None:
        try:
            self.renames.results()  # raises the first rename that failed
        finally:
            self.renames.close()

    def abort(self) -> None:
        self.renames.abort()

    def terminate(self, ids: Sequence[str]) -> list[str]:
        try:
            self.adapter._terminate(list(ids))
        except ProviderError:
            return list(ids)
        return []

    def capacity_hint(self) -> str:
        return self.adapter._capacity_hint()


__all__ = ["GONE", "MAX_BATCH", "PLACEHOLDER", "RENAME_WORKERS", "BatchLauncher"]
