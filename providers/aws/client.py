"""AWS API client: one method per API call, botocore errors mapped in one place (``_call``).

boto3 is imported here and nowhere else in the package. Every call goes through ``_call``:
a client-side token bucket (``LIMITS``; launches also take a launch token), our own retry
loop (botocore's retries are off so the policy, the limiter and the call count are ours),
and ``map_error``, which turns every botocore exception into ``provisioner.errors``:

- ``InsufficientInstanceCapacity`` (and the other ``Insufficient*Capacity``) -> CapacityError
- ``VcpuLimitExceeded``, ``MaxSpotInstanceCountExceeded``, ``InstanceLimitExceeded`` -> QuotaError
- throttling (``RequestLimitExceeded``, ``Throttling``, ``ThrottlingException``, ...) -> RateLimitError
- auth (``AuthFailure``, ``UnauthorizedOperation``, ``SignatureDoesNotMatch``, missing
  credentials, ...) -> CredentialsError
- anything else -> ProviderAPIError(status, "message [Code]"); a timeout or a refused
  connection is status 0.

Retries: throttling always (honouring a ``Retry-After`` header when one comes back), 5xx and
transport errors only for calls that buy nothing. ``RunInstances`` is never retried: the
adapter re-lists by tag after a lost answer and adopts what appeared.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import boto3
import botocore.config
import botocore.exceptions
import botocore.parsers
from botocore.parsers import ResponseParserError

from provisioner.errors import (
    CapacityError,
    CredentialsError,
    ProviderAPIError,
    ProviderError,
    QuotaError,
    RateLimitError,
)
from provisioner.providers.aws import FACTS
from provisioner.providers.base import CLUSTER_TAG
from provisioner.providers.http import RateLimiter, RateLimits, RetryPolicy, parse_retry_after

PROVIDER = "aws"
LIMITS = RateLimits(requests_per_s=10.0, burst=5.0, launches_per_s=2.0, launch_burst=1.0)
"""Our own pacing, below EC2's documented token-bucket refill rates (non-mutating actions
refill 20/s; RunInstances is a resource-intensive action refilling 2/s: UNVERIFIED here,
see docs/aws-gcp.md). Pricing and Service Quotas share the same bucket."""
PRICING_REGION = "us-east-1"
"""The Pricing API answers from us-east-1 (also ap-south-1, eu-central-1)."""

_CAPACITY = frozenset(FACTS.capacity_codes)
_QUOTA = frozenset(
    {
        "VcpuLimitExceeded",
        "MaxSpotInstanceCountExceeded",
        "InstanceLimitExceeded",
        "ServiceQuotaExceededException",
        "PendingVerification",
    }
)
_THROTTLED = frozenset(
    {
        "RequestLimitExceeded",
        "Throttling",
        "ThrottlingException",
        "TooManyRequestsException",
        "RequestThrottled",
        "RequestThrottledException",
        "SlowDown",
        "EC2ThrottledException",
    }
)
_AUTH = frozenset(
    {
        "AuthFailure",
        "UnauthorizedOperation",
        "InvalidClientTokenId",
        "SignatureDoesNotMatch",
        "UnrecognizedClientException",
        "AccessDeniedException",
        "AccessDenied",
        "ExpiredToken",
        "ExpiredTokenException",
        "InvalidAccessKeyId",
        "OptInRequired",
    }
)
NOT_FOUND_CODES = frozenset(
    {
        "InvalidInstanceID.NotFound",
        "InvalidInstanceID.Malformed",
        "NoSuchResourceException",
        "InvalidPlacementGroup.Unknown",
        "InvalidGroup.NotFound",
        "InvalidAllocationID.NotFound",
    }
)


def _one_line(text: str, limit: int = 400) -> str:
    return " ".join(str(text).split())[:limit]


def map_error(exc: Exception) -> ProviderError:
    """A botocore exception -> the project's error tree (see the module docstring)."""
    if isinstance(exc, botocore.exceptions.ClientError):
        error = exc.response.get("Error", {})
        code = str(error.get("Code") or "")
        message = _one_line(str(error.get("Message") or code or "error"))
        meta = exc.response.get("ResponseMetadata", {})
        status = int(meta.get("HTTPStatusCode") or 0)
        text = f"{message} [{code}]" if code else message
        if code in _CAPACITY:
            return CapacityError(PROVIDER, text)
        if code in _QUOTA:
            return QuotaError(PROVIDER, text)
        if code in _THROTTLED or status == 429:
            headers = {k.lower(): v for k, v in (meta.get("HTTPHeaders") or {}).items()}
            return RateLimitError(PROVIDER, text, parse_retry_after(headers.get("retry-after")))
        if code in _AUTH or status in (401, 403):
            return CredentialsError(PROVIDER, text)
        return ProviderAPIError(PROVIDER, status, text)
    if isinstance(
        exc,
        (
            botocore.exceptions.NoCredentialsError,
            botocore.exceptions.PartialCredentialsError,
            botocore.exceptions.CredentialRetrievalError,
            botocore.exceptions.ProfileNotFound,
            botocore.exceptions.TokenRetrievalError,
        ),
    ):
        return CredentialsError(
            PROVIDER,
            f"no usable AWS credentials: {_one_line(str(exc))} (boto3's standard "
            "chain: AWS_PROFILE, environment, SSO, instance role)",
        )
    if isinstance(exc, (botocore.exceptions.ReadTimeoutError, botocore.exceptions.ConnectTimeoutError)):
        return ProviderAPIError(PROVIDER, 0, f"timed out: {_one_line(str(exc))}")
    if isinstance(exc, botocore.parsers.ResponseParserError):
        return ProviderAPIError(PROVIDER, 500, f"unreadable answer: {_one_line(str(exc), 200)}")
    return ProviderAPIError(PROVIDER, 0, f"{type(exc).__name__}: {_one_line(str(exc))}")


def by_cluster(cluster_id: str) -> list[dict[str, Any]]:
    """The EC2 filter for what this tool tagged as part of cluster ``cluster_id``."""
    return [{"Name": f"tag:{CLUSTER_TAG}", "Values": [cluster_id]}]


def is_not_found(error: ProviderError) -> bool:
    """The instance (or quota) named does not exist (delete of a gone node gets this)."""
    return isinstance(error, ProviderAPIError) and any(f"[{code}]" in error.detail for code in NOT_FOUND_CODES)


class AWSClient:
    """boto3 clients per (service, region) behind one limiter and retry policy. Thread-safe.

    ``session`` is a ``boto3.Session`` (default: the standard credential chain);
    ``endpoint_url`` sends every service to one URL (a fake on 127.0.0.1), else AWS's own.
    The session's keys are never stored here nor shown in a repr.
    """

    def __init__(
        self,
        session: Any = None,
        *,
        endpoint_url: str | None = None,
        limits: RateLimits | None = None,
        timeout_s: float = 30.0,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.session = session if session is not None else boto3.Session()
        self.endpoint_url = endpoint_url or None
        self.limits = limits or LIMITS
        self.retry = retry or RetryPolicy()
        self.limiter = RateLimiter.for_requests(self.limits)
        self.launch_limiter = RateLimiter.for_launches(self.limits)
        self._config = botocore.config.Config(
            connect_timeout=timeout_s,
            read_timeout=timeout_s,
            retries={"total_max_attempts": 1},
            user_agent_extra="gpu-provisioner",
        )
        self._clients: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"AWSClient(endpoint_url={self.endpoint_url!r})"

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()

    def _client(self, service: str, region: str) -> Any:
        with self._lock:
            found = self._clients.get((service, region))
            if found is None:
                try:
                    make: Any = self.session.client  # boto3-stubs types it per literal service name
                    found = make(service, region_name=region, endpoint_url=self.endpoint_url, config=self._config)
                except botocore.exceptions.BotoCoreError as exc:
                    raise map_error(exc) from exc
                self._clients[(service, region)] = found
            return found

    def _call(
        self,
        service: str,
        region: str,
        operation: str,
        params: Mapping[str, Any],
        *,
        idempotent: bool = True,
        launch: bool = False,
    ) -> dict[str, Any]:
        """One API call, paced, retried per the module docstring, errors mapped (the one place)."""
        method: Callable[..., dict[str, Any]] = getattr(self._client(service, region), operation)
        attempts = max(self.retry.attempts, 1)
        for attempt in range(attempts):
            self.limiter.acquire()  # one attempt is one HTTP request: botocore's own retries are off
            if launch and self.launch_limiter is not None:
                self.launch_limiter.acquire()
            try:
                return method(**params)
            except (ResponseParserError, RecursionError, ValueError) as exc:  # an answer botocore cannot read
                raise ProviderAPIError(
                    PROVIDER, 0, f"{operation} in {region}: answer refused: unreadable ({type(exc).__name__})"
                ) from None
            except (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError) as exc:
                error = map_error(exc)
                retryable = isinstance(error, RateLimitError) or (
                    idempotent and isinstance(error, ProviderAPIError) and (error.status >= 500 or error.status == 0)
                )
                if not retryable or attempt == attempts - 1:
                    raise error from exc
            retry_after = error.retry_after_s if isinstance(error, RateLimitError) else None
            self.retry.sleep(self.retry.delay(attempt, retry_after))
        raise AssertionError("unreachable")  # pragma: no cover

    def _pages(
        self, service: str, region: str, operation: str, params: Mapping[str, Any], key: str
    ) -> Iterator[dict[str, Any]]:
        """Items under ``key`` across every page (``NextToken``)."""
        request = dict(params)
        while True:
            page = self._call(service, region, operation, request)
            yield from page.get(key, [])
            token = page.get("NextToken")
            if not token:
                return
            request["NextToken"] = token

    # ----- EC2: discovery -------------------------------------------------------------------
    def describe_instance_types(self, region: str, instance_types: list[str] | None = None) -> list[dict[str, Any]]:
        """DescribeInstanceTypes: GPU instance types (``instance-type`` filter on p*/g* families
        when none are named); GpuInfo, NetworkInfo (EFA), InstanceStorageInfo."""
        params: dict[str, Any] = (
            {"InstanceTypes": instance_types}
            if instance_types
            else {"Filters": [{"Name": "instance-type", "Values": ["p*", "g*"]}]}
        )
        return list(self._pages("ec2", region, "describe_instance_types", params, "InstanceTypes"))

    def describe_instance_type_offerings(self, region: str, instance_types: list[str]) -> list[dict[str, Any]]:
        """DescribeInstanceTypeOfferings per availability zone for the named types."""
        params = {"LocationType": "availability-zone", "Filters": [{"Name": "instance-type", "Values": instance_types}]}
        return list(self._pages("ec2", region, "describe_instance_type_offerings", params, "InstanceTypeOfferings"))

    def describe_spot_price_history(
        self, region: str, instance_types: list[str], start_time: Any = None
    ) -> list[dict[str, Any]]:
        """DescribeSpotPriceHistory (Linux/UNIX) for the named types; the latest price per AZ
        comes first in each zone's history."""
        params: dict[str, Any] = {"InstanceTypes": instance_types, "ProductDescriptions": ["Linux/UNIX"]}
        if start_time is not None:
            params["StartTime"] = start_time
        return list(self._pages("ec2", region, "describe_spot_price_history", params, "SpotPriceHistory"))

    # ----- EC2: instances -------------------------------------------------------------------
    def run_instances(self, region: str, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """RunInstances. Takes a launch token; never retried (the adapter reconciles by tag)."""
        answer = self._call("ec2", region, "run_instances", params, idempotent=False, launch=True)
        instances: list[dict[str, Any]] = answer.get("Instances", [])
        return instances

    def describe_instances(self, region: str, filters: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """DescribeInstances with filters; every page, instances flattened out of reservations."""
        reservations = self._pages("ec2", region, "describe_instances", {"Filters": filters}, "Reservations")
        return [instance for reservation in reservations for instance in reservation.get("Instances", [])]

    def terminate_instances(self, region: str, instance_ids: list[str]) -> list[dict[str, Any]]:
        """TerminateInstances (terminating twice buys nothing, so it is retried like a read)."""
        answer = self._call("ec2", region, "terminate_instances", {"InstanceIds": instance_ids})
        changes: list[dict[str, Any]] = answer.get("TerminatingInstances", [])
        return changes

    def create_tags(self, region: str, resource_ids: list[str], tags: Mapping[str, str]) -> None:
        """CreateTags: set (add or overwrite) ``tags`` on ``resource_ids``. Idempotent."""
        pairs = [{"Key": key, "Value": value} for key, value in tags.items()]
        self._call("ec2", region, "create_tags", {"Resources": resource_ids, "Tags": pairs})

    def delete_tags(self, region: str, resource_ids: list[str], keys: list[str]) -> None:
        """DeleteTags: remove the tags named ``keys`` from ``resource_ids``. Idempotent."""
        self._call("ec2", region, "delete_tags", {"Resources": resource_ids, "Tags": [{"Key": k} for k in keys]})

    def describe_key_pairs(self, region: str, names: list[str]) -> list[dict[str, Any]]:
        answer = self._call("ec2", region, "describe_key_pairs", {"Filters": [{"Name": "key-name", "Values": names}]})
        pairs: list[dict[str, Any]] = answer.get("KeyPairs", [])
        return pairs

    def import_key_pair(self, region: str, name: str, public_key: str, tags: list[dict[str, str]]) -> str:
        answer = self._call(
            "ec2",
            region,
            "import_key_pair",
            {
                "KeyName": name,
                "PublicKeyMaterial": public_key.encode(),
                "TagSpecifications": [{"ResourceType": "key-pair", "Tags": tags}],
            },
            idempotent=False,
        )
        return str(answer.get("KeyName", name))

    def describe_images(self, region: str, filters: list[dict[str, Any]], owners: list[str]) -> list[dict[str, Any]]:
        answer = self._call("ec2", region, "describe_images", {"Filters": filters, "Owners": owners})
        images: list[dict[str, Any]] = answer.get("Images", [])
        return images

    def describe_instance_topology(self, region: str, instance_ids: list[str]) -> list[dict[str, Any]]:
        """DescribeInstanceTopology for the named instances (100 per request, every page): each
        with its ``NetworkNodes``, outermost first. Types without topology are left out by EC2."""
        found: list[dict[str, Any]] = []
        for start in range(0, len(instance_ids), 100):
            found += self._pages(
                "ec2",
                region,
                "describe_instance_topology",
                {"InstanceIds": instance_ids[start : start + 100]},
                "Instances",
            )
        return found

    def describe_capacity_block_offerings(
        self, region: str, instance_type: str, count: int, hours: int
    ) -> list[dict[str, Any]]:
        """DescribeCapacityBlockOfferings: Capacity Blocks for ML of ``count`` x ``instance_type`` for
        ``hours`` in ``region`` (every page). Read-only: nothing is purchased."""
        params = {"InstanceType": instance_type, "InstanceCount": count, "CapacityDurationHours": hours}
        return list(self._pages("ec2", region, "describe_capacity_block_offerings", params, "CapacityBlockOfferings"))

    def purchase_capacity_block(self, region: str, offering_id: str, tags: list[dict[str, str]]) -> dict[str, Any]:
        """PurchaseCapacityBlock (Linux/UNIX), tagged: the ``CapacityReservation`` bought. Buys a
        non-refundable block, so it is never retried (the adapter re-lists by tag after a lost answer)."""
        answer = self._call(
            "ec2",
            region,
            "purchase_capacity_block",
            {
                "CapacityBlockOfferingId": offering_id,
                "InstancePlatform": "Linux/UNIX",
                "TagSpecifications": [{"ResourceType": "capacity-reservation", "Tags": tags}],
            },
            idempotent=False,
        )
        reservation: dict[str, Any] = answer.get("CapacityReservation", {})
        return reservation

    def describe_capacity_reservations(self, region: str, filters: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """DescribeCapacityReservations with filters (every page)."""
        return list(
            self._pages("ec2", region, "describe_capacity_reservations", {"Filters": filters}, "CapacityReservations")
        )

    # ----- EC2: network (EFA clusters) -------------------------------------------------------
    def describe_vpcs(self, region: str, filters: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return list(self._pages("ec2", region, "describe_vpcs", {"Filters": filters}, "Vpcs"))

    def describe_subnets(self, region: str, filters: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return list(self._pages("ec2", region, "describe_subnets", {"Filters": filters}, "Subnets"))

    def describe_security_groups(self, region: str, filters: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return list(self._pages("ec2", region, "describe_security_groups", {"Filters": filters}, "SecurityGroups"))

    def create_security_group(
        self, region: str, name: str, description: str, vpc_id: str, tags: list[dict[str, str]]
    ) -> str:
        """CreateSecurityGroup (tagged): the group id. Not retried (the adapter re-lists by tag)."""
        answer = self._call(
            "ec2",
            region,
            "create_security_group",
            {
                "GroupName": name,
                "Description": description,
                "VpcId": vpc_id,
                "TagSpecifications": [{"ResourceType": "security-group", "Tags": tags}],
            },
            idempotent=False,
        )
        return str(answer["GroupId"])

    def authorize_security_group_ingress(self, region: str, group_id: str, permissions: list[dict[str, Any]]) -> None:
        self._call(
            "ec2",
            region,
            "authorize_security_group_ingress",
            {"GroupId": group_id, "IpPermissions": permissions},
            idempotent=False,
        )

    def delete_security_group(self, region: str, group_id: str) -> None:
        self._call("ec2", region, "delete_security_group", {"GroupId": group_id})

    def describe_placement_groups(self, region: str, filters: list[dict[str, Any]]) -> list[dict[str, Any]]:
        answer = self._call("ec2", region, "describe_placement_groups", {"Filters": filters})
        groups: list[dict[str, Any]] = answer.get("PlacementGroups", [])
        return groups

    def create_placement_group(self, region: str, name: str, strategy: str, tags: list[dict[str, str]]) -> None:
        """CreatePlacementGroup (tagged). Not retried (the adapter re-lists by tag)."""
        self._call(
            "ec2",
            region,
            "create_placement_group",
            {
                "GroupName": name,
                "Strategy": strategy,
                "TagSpecifications": [{"ResourceType": "placement-group", "Tags": tags}],
            },
            idempotent=False,
        )

    def delete_placement_group(self, region: str, name: str) -> None:
        self._call("ec2", region, "delete_placement_group", {"GroupName": name})

    def describe_addresses(self, region: str, filters: list[dict[str, Any]]) -> list[dict[str, Any]]:
        answer = self._call("ec2", region, "describe_addresses", {"Filters": filters})
        addresses: list[dict[str, Any]] = answer.get("Addresses", [])
        return addresses

    def allocate_address(self, region: str, tags: list[dict[str, str]]) -> str:
        """AllocateAddress (VPC, tagged): the allocation id. Not retried (the adapter re-lists by tag)."""
        answer = self._call(
            "ec2",
            region,
            "allocate_address",
            {"Domain": "vpc", "TagSpecifications": [{"ResourceType": "elastic-ip", "Tags": tags}]},
            idempotent=False,
        )
        return str(answer["AllocationId"])

    def associate_address(self, region: str, allocation_id: str, network_interface_id: str) -> None:
        self._call(
            "ec2",
            region,
            "associate_address",
            {"AllocationId": allocation_id, "NetworkInterfaceId": network_interface_id},
        )

    def release_address(self, region: str, allocation_id: str) -> None:
        self._call("ec2", region, "release_address", {"AllocationId": allocation_id})

    # ----- Pricing and Service Quotas -------------------------------------------------------
    def get_products(self, filters: list[dict[str, str]]) -> list[str]:
        """pricing.GetProducts for AmazonEC2 with TERM_MATCH filters: the PriceList JSON strings."""
        params = {
            "ServiceCode": "AmazonEC2",
            "FormatVersion": "aws_v1",
            "Filters": [{"Type": "TERM_MATCH", **f} for f in filters],
        }
        return [str(item) for item in self._pages("pricing", PRICING_REGION, "get_products", params, "PriceList")]

    def get_service_quota(self, region: str, quota_code: str) -> dict[str, Any]:
        """service-quotas.GetServiceQuota(ServiceCode=ec2): the ``Quota`` object."""
        answer = self._call(
            "service-quotas", region, "get_service_quota", {"ServiceCode": "ec2", "QuotaCode": quota_code}
        )
        quota: dict[str, Any] = answer.get("Quota", {})
        return quota

    def cost_and_usage(self, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """ce.GetCostAndUsage (Cost Explorer answers in us-east-1): every ``ResultsByTime`` entry, all pages."""
        request, results = dict(params), []
        while True:
            page = self._call("ce", PRICING_REGION, "get_cost_and_usage", request)
            results += page.get("ResultsByTime", [])
            if not page.get("NextPageToken"):
                return results
            request["NextPageToken"] = page["NextPageToken"]

    def caller_identity(self, region: str) -> dict[str, Any]:
        """EC2 DescribeRegions as a cheap signed read: proves the credentials work."""
        return self._call("ec2", region, "describe_regions", {"RegionNames": [region]})


__all__ = ["LIMITS", "NOT_FOUND_CODES", "PRICING_REGION", "AWSClient", "by_cluster", "is_not_found", "map_error"]
