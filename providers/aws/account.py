"""Service Quotas reads for the AWS adapter: quota values, what running instances use of them,
shortfalls of a purchase and the headroom ``catalog refresh`` records. Read-only.

``AccountQuotas`` holds the adapter's client and its instance-type lookup (for vCPU counts);
``AWSProvider`` delegates to it. The codes and the refusal wording are in ``quotas``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from provisioner.capabilities import Purchase
from provisioner.errors import ProviderAPIError
from provisioner.offer import Offer, QuotaHeadroom
from provisioner.providers.aws.client import AWSClient, is_not_found
from provisioner.providers.aws.models import GpuInstanceType
from provisioner.providers.aws.quotas import QUOTA_NAMES, QuotaShortfall, how_to_request, quota_code

TypeLookup = Callable[[str, list[str] | None], list[GpuInstanceType]]


class AccountQuotas:
    """EC2 vCPU quotas of one account, read through ``client``; ``gpu_types(region, names)``
    gives instance types' vCPUs. Each call reads afresh (no caching across calls)."""

    def __init__(self, client: AWSClient, gpu_types: TypeLookup) -> None:
        self.client = client
        self.gpu_types = gpu_types

    def quota_vcpus(self, region: str, code: str) -> float | None:
        """The quota's value in vCPUs; None when Service Quotas does not know the code there."""
        try:
            return float(self.client.get_service_quota(region, code).get("Value"))  # type: ignore[arg-type]
        except ProviderAPIError as exc:
            if is_not_found(exc):
                return None
            raise
        except TypeError:
            return None

    def used_vcpus(self, region: str) -> dict[tuple[str, bool], int]:
        """vCPUs of pending/running instances in ``region`` by (quota code, spot): what each quota
        already counts (DescribeInstances, and DescribeInstanceTypes for their sizes)."""
        running = [
            i
            for i in self.client.describe_instances(
                region, [{"Name": "instance-state-name", "Values": ["pending", "running"]}]
            )
            if quota_code(str(i.get("InstanceType", "")), False)
        ]
        sizes = (
            {
                t.instance_type: t.vcpus
                for t in self.gpu_types(region, sorted({str(i["InstanceType"]) for i in running}))
            }
            if running
            else {}
        )
        used: dict[tuple[str, bool], int] = {}
        for instance in running:
            kind, spot = str(instance["InstanceType"]), instance.get("InstanceLifecycle") == "spot"
            cpu: dict[str, Any] = instance.get("CpuOptions") or {}
            vcpus = sizes.get(kind) or int(cpu.get("CoreCount", 0)) * int(cpu.get("ThreadsPerCore", 1))
            key = (str(quota_code(kind, spot)), spot)
            used[key] = used.get(key, 0) + vcpus
        return used

    def shortfalls(self, requests: Iterable[tuple[str, str, int, bool]]) -> list[QuotaShortfall]:
        """For (instance type, region, node count, spot) requests, summed per quota code and region,
        those that exceed what the quota leaves after running instances. Unknown codes and
        non-GPU types are no refusal."""
        need: dict[tuple[str, str, bool], dict[str, int]] = {}
        for instance_type, region, count, spot in requests:
            code = quota_code(instance_type, spot)
            kinds = self.gpu_types(region, [instance_type]) if code else []
            if code and kinds:
                types = need.setdefault((region, code, spot), {})
                types[instance_type] = types.get(instance_type, 0) + kinds[0].vcpus * count
        found = []
        used_in: dict[str, dict[tuple[str, bool], int]] = {}
        for (region, code, spot), types in sorted(need.items()):
            limit = self.quota_vcpus(region, code)
            if limit is None:
                continue
            if region not in used_in:
                used_in[region] = self.used_vcpus(region)
            in_use = used_in[region].get((code, spot), 0)
            wanted = sum(types.values())
            if in_use + wanted > limit:
                found.append(QuotaShortfall(", ".join(sorted(types)), region, spot, code, int(limit), wanted, in_use))
        return found

    def headroom(self, offers: Sequence[Offer]) -> list[QuotaHeadroom]:
        """What each P/G/VT vCPU quota leaves in the offers' regions (limit less running instances),
        with the offered instance types it covers. Codes Service Quotas does not know are left out."""
        covered: dict[tuple[str, str, bool], set[str]] = {}
        for offer in (o for o in offers if o.purchase == Purchase.INSTANCE):
            for spot, price in ((False, offer.price_per_hour_usd), (True, offer.spot_price_per_hour_usd)):
                code = quota_code(offer.instance_type, spot)
                if code and price is not None:
                    covered.setdefault((offer.region, code, spot), set()).add(offer.instance_type)
        found = []
        used_in: dict[str, dict[tuple[str, bool], int]] = {}
        for (region, code, spot), types in sorted(covered.items()):
            limit = self.quota_vcpus(region, code)
            if limit is None:
                continue
            if region not in used_in:
                used_in[region] = self.used_vcpus(region)
            found.append(
                QuotaHeadroom(
                    region=region,
                    code=code,
                    name=QUOTA_NAMES.get(code, ""),
                    unit="vcpus",
                    spot=spot,
                    limit=int(limit),
                    available=max(0, int(limit) - used_in[region].get((code, spot), 0)),
                    instance_types=sorted(types),
                    how_to_request=how_to_request(code, region),
                )
            )
        return found


__all__ = ["AccountQuotas"]
