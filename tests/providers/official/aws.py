"""Witness: boto3, AWS's official client, for every operation the AWS adapter makes, against the
AWS fake on 127.0.0.1 (EC2 answered by moto server's app, Pricing, Service Quotas and Cost
Explorer by the fake, every request and answer checked against botocore's shapes).

The adapter is built on boto3, so its calls are the official client's: the test runs a cluster's
whole life through the adapter with a hook on the boto3 session that records each operation and
its HTTP status, then pins the list (docs/providers.md's AWS rows) and that every one succeeded.
Dummy keys and AWS_EC2_METADATA_DISABLED (tests/conftest.py): boto3 never looks for credentials
on the network.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pytest

from provisioner.testing.fakes.base import FakeApp, RunningServer
from tests.conftest import ROOT
from tests.providers.official.support import need_client

# (service, operation) the adapter calls in a cluster's life: offers, credentials, create,
# list, delete, billing. docs/providers.md lists the same.
AWS_OPERATIONS = {
    ("ec2", "DescribeInstanceTypes"),
    ("ec2", "DescribeInstanceTypeOfferings"),
    ("ec2", "DescribeSpotPriceHistory"),
    ("pricing", "GetProducts"),
    ("ec2", "DescribeRegions"),
    ("ec2", "DescribeSecurityGroups"),
    ("service-quotas", "GetServiceQuota"),
    ("ec2", "ImportKeyPair"),
    ("ec2", "DescribeKeyPairs"),
    ("ec2", "RunInstances"),
    ("ec2", "DescribeInstances"),
    ("ec2", "TerminateInstances"),
    ("ec2", "CreateTags"),
    ("ec2", "DeleteTags"),
    ("ce", "GetCostAndUsage"),
}


def test_boto3_answers_every_call_the_aws_adapter_makes(
    serve_fake: Callable[[FakeApp], RunningServer], monkeypatch: pytest.MonkeyPatch
) -> None:
    need_client("boto3")
    import boto3

    from provisioner.providers.aws.client import LIMITS
    from provisioner.providers.aws.provider import AWSProvider
    from provisioner.providers.base import owner_id
    from provisioner.testing.fakes.aws_ec2 import CONTRACT_ACCESS_KEY_ID, CONTRACT_SECRET_KEY, contract_harness

    harness = contract_harness()
    for name, value in harness.env:
        monkeypatch.setenv(name, value)
    url = serve_fake(harness.app).url
    session = boto3.Session(
        aws_access_key_id=CONTRACT_ACCESS_KEY_ID, aws_secret_access_key=CONTRACT_SECRET_KEY, region_name="us-east-1"
    )
    seen: list[tuple[str, str, int]] = []

    def record(http_response: Any, model: Any, **_: Any) -> None:
        seen.append((model.service_model.service_name, model.name, http_response.status_code))

    session.events.register("after-call.*.*", record)
    aws = AWSProvider(session, regions=["us-east-1"], endpoint_url=url, limits=LIMITS.scaled(100), timeout_s=10.0)
    offers = aws.list_offers(harness.offer_query)
    aws.check_credentials()
    lease = "witness-4242-20261126t100000z"
    nodes = aws.create_nodes("c1", [s.model_copy(update={"lease": lease}) for s in harness.node_specs(1)])
    assert aws.renew_lease("c1", lease, owner_id(), dt.datetime.now(dt.UTC)) == 1  # renewed, then released
    assert aws.renew_lease("c1", lease, owner_id(), None) == 1
    assert [n.name for n in aws.get_nodes("c1")] == ["n0"]
    aws.delete_nodes("c1")
    now = dt.datetime.now(dt.UTC)
    aws.billed("c1", {"n0": nodes[0].id}, now - dt.timedelta(hours=1), now)
    assert offers and {o.instance_type for o in offers} >= {"p5.48xlarge"}
    assert [s for s in seen if not 200 <= s[2] < 300] == []
    made = {(service, operation) for service, operation, _ in seen}
    assert made == AWS_OPERATIONS, (sorted(made - AWS_OPERATIONS), sorted(AWS_OPERATIONS - made))


def test_docs_name_every_aws_operation() -> None:
    text = (ROOT / "docs" / "providers.md").read_text(encoding="utf-8")
    aws = text[text.index("## AWS") : text.index("## GCP")]
    assert [op for op in sorted(AWS_OPERATIONS) if f"{op[0]} {op[1]}" not in aws and op[1] not in aws] == []


__all__ = [
    "AWS_OPERATIONS",
    "test_boto3_answers_every_call_the_aws_adapter_makes",
    "test_docs_name_every_aws_operation",
]
