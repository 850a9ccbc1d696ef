"""Regional GPU quota reads for the GCP adapter: shortfalls of a purchase and the headroom
``catalog refresh`` records. Read-only (regions.get, and the zones' machine types).

``AccountQuotas`` holds the adapter's client, its machine-type lookup and the project;
``GCPProvider`` delegates to it. Metrics and the refusal wording are in ``quotas``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from provisioner.offer import Offer, QuotaHeadroom
from provisioner.providers.gcp.client import GCPClient
from provisioner.providers.gcp.models import GpuMachineType, zone_region
from provisioner.providers.gcp.quotas import GpuQuotaShortfall, how_to_request, quota_metric


class AccountQuotas:
    """GPU quotas of one project, read through ``client``; ``gpu_machine_types(zone)`` gives the
    zone's GPU machine types. Each call reads afresh."""

    def __init__(
        self, client: GCPClient, gpu_machine_types: Callable[[str], list[GpuMachineType]], project: str
    ) -> None:
        self.client = client
        self.gpu_machine_types = gpu_machine_types
        self.project = project

    def shortfalls(self, requests: Iterable[tuple[str, str, int, bool]]) -> list[GpuQuotaShortfall]:
        """For (machine type, zone, node count, spot) requests, summed per regional GPU metric, those
        that exceed what is left of it (limit minus usage, from regions.get)."""
        need: dict[tuple[str, str], dict[str, int]] = {}
        kinds: dict[str, dict[str, GpuMachineType]] = {}
        for machine_type, zone, count, spot in requests:
            if zone not in kinds:
                kinds[zone] = {m.machine_type: m for m in self.gpu_machine_types(zone)}
            kind = kinds[zone].get(machine_type)
            metric = quota_metric(kind.accelerator, spot) if kind else None
            if kind is None or metric is None:
                continue
            types = need.setdefault((zone_region(zone), metric), {})
            types[machine_type] = types.get(machine_type, 0) + kind.gpus * count
        found = []
        for (region, metric), types in sorted(need.items()):
            quota = next((q for q in self.client.region(region).quotas if q.metric == metric), None)
            if quota is None:
                continue
            left = int(quota.limit - quota.usage)
            if sum(types.values()) > left:
                found.append(
                    GpuQuotaShortfall(
                        ", ".join(sorted(types)),
                        region,
                        metric.startswith("PREEMPTIBLE_"),
                        metric,
                        left,
                        sum(types.values()),
                        self.project,
                    )
                )
        return found

    def headroom(self, offers: Sequence[Offer]) -> list[QuotaHeadroom]:
        """What each regional GPU quota leaves (limit minus usage) in the offers' regions, with the
        offered machine types it covers."""
        accelerators: dict[str, str] = {}
        for zone in sorted({o.zone for o in offers if o.zone}):
            accelerators.update({m.machine_type: m.accelerator for m in self.gpu_machine_types(zone)})
        covered: dict[tuple[str, str, bool], set[str]] = {}
        for offer in offers:
            for spot, price in ((False, offer.price_per_hour_usd), (True, offer.spot_price_per_hour_usd)):
                metric = quota_metric(accelerators.get(offer.instance_type, ""), spot)
                if metric and price is not None:
                    covered.setdefault((offer.region, metric, spot), set()).add(offer.instance_type)
        found = []
        for region in sorted({r for r, _, _ in covered}):
            quotas = {q.metric: q for q in self.client.region(region).quotas}
            for (where, metric, spot), types in sorted(covered.items()):
                quota = quotas.get(metric)
                if where != region or quota is None:
                    continue
                found.append(
                    QuotaHeadroom(
                        region=region,
                        code=metric,
                        unit="gpus",
                        spot=spot,
                        limit=int(quota.limit),
                        available=max(0, int(quota.limit - quota.usage)),
                        instance_types=sorted(types),
                        how_to_request=how_to_request(self.project, metric, region),
                    )
                )
        return found


__all__ = ["AccountQuotas"]
