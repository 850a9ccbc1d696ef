"""AWS in the contract suite: the AWSFake (EC2 answered by moto, Pricing and Service Quotas by
the fake itself) and AWSProvider, over boto3 on a real 127.0.0.1 socket.

The suite's ``api_key`` is the secret access key: the fake checks every SigV4 signature with it,
so a wrong secret is ``AuthFailure`` and the canary test proves the secret never leaks.
"""

from __future__ import annotations

from typing import Any

import boto3
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from provisioner.providers.aws.client import LIMITS
from provisioner.providers.aws.provider import AWSProvider
from provisioner.providers.base import NodeSpec, OfferQuery

from provisioner.testing.fakes.aws_ec2 import DEFAULT_QUOTAS, AWSFake
from tests.providers.harness import Harness
from tests.providers.in_process import on_botocore

SECRET_KEY = "aws-test-secret-key"
ACCESS_KEY_ID = "AKIAPROVISIONERTEST"
IMAGE = "ami-12c6146b"
"""An image moto ships in us-east-1."""
SSH_KEY = Ed25519PrivateKey.generate().public_key().public_bytes(
    serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode() + " contract"
"""A real OpenSSH key: moto's ImportKeyPair refuses malformed material, as EC2 does."""


def node_specs(n: int, prefix: str = "n") -> list[NodeSpec]:
    return [NodeSpec(name=f"{prefix}{i}", instance_type="p5.48xlarge", region="us-east-1", gpus=8, image=IMAGE,
                     ssh_public_key=SSH_KEY, bootstrap="cloud_init", user_data="#cloud-config\n{}\n") for i in range(n)]


def make_provider(*, api_key: str, base_url: str, transport: Any = None, **kwargs: Any) -> AWSProvider:
    session = boto3.Session(aws_access_key_id=ACCESS_KEY_ID, aws_secret_access_key=str(api_key),
                            region_name="us-east-1")
    if transport is not None:
        on_botocore(session, transport)
    return AWSProvider(session, regions=["us-east-1"], endpoint_url=base_url, **kwargs)


ROOMY_QUOTAS = {key: 100_000.0 for key in DEFAULT_QUOTAS}
"""The contract suite buys many p5 nodes, spot ones too: quotas that never refuse (test_aws*.py
covers refusals)."""


def make_harness() -> Harness:
    app = AWSFake(api_key=SECRET_KEY, quotas=ROOMY_QUOTAS)
    return Harness(name="aws", app=app, make_provider=make_provider, api_key=SECRET_KEY, node_specs=node_specs,
                   published_limits=LIMITS, scale=20.0,
                   offer_query=OfferQuery(gpu_models=("H100",), regions=("us-east-1",)),
                   launch_route="RunInstances", list_route="DescribeInstances", offers_route="DescribeInstanceTypes",
                   balance_fault_route="RunInstances",
                   timeout_s=3.0)  # moto builds ~900 instance types per DescribeInstanceTypes
