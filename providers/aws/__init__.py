"""AWS adapter: ``AWSProvider`` over EC2, the Pricing API and Service Quotas (boto3).

``CAPABILITIES`` is what the adapter can create today, each proven by the contract suite
against the AWS fake (``provisioner.testing.fakes.aws_ec2``, EC2 answered by moto):

- on-demand and spot instances (``InstanceMarketOptions`` spot, one-time, terminate);
- several instances per cluster in the region's default VPC: they reach each other at
  their private addresses;
- nodes in an EC2 Capacity Block for ML bought for the cluster first (``RESERVATION``);
- cloud-init user data and an imported SSH key pair at launch; tags at launch
  (``TagSpecifications``) carrying the cluster id, node name, owner and expiry;
- EFA clusters (``FABRIC_EFA``): several nodes of a type with an EFA layout (``efa``) launch
  with one EFA interface per network card, in a cluster placement group and a security group
  open only to itself, both tagged with the cluster and deleted with it (``network``).

Not declared (no proof in the contract suite yet, see docs/aws-gcp.md): ``PLACEMENT`` (the
placement group comes with EFA only; a NodeSpec cannot ask for one), self-termination.
Credentials come from boto3's standard chain (environment, profile, SSO, instance role), never
from an API key. boto3 is imported by ``client.py`` only, so importing this package stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from provisioner.capabilities import Capability
from provisioner.providers.descriptor import InstanceMetadata, ProviderDocs, ProviderFacts, SdkCredentials, Teardown

CAPABILITIES: frozenset[Capability] = frozenset(
    {
        Capability.ON_DEMAND,
        Capability.SPOT,
        Capability.MULTI_NODE,
        Capability.PRIVATE_NETWORK,
        Capability.USER_DATA,
        Capability.SSH_BOOTSTRAP,
        Capability.TAGS,
        Capability.RESERVATION,
        Capability.FABRIC_EFA,
    }
)

FACTS = ProviderFacts(
    "aws",
    fake="provisioner.testing.fakes.aws_ec2:AWSFake",
    refresh="cloud",
    stack="pulumi_aws",
    capacity_codes=(
        "InsufficientInstanceCapacity",
        "InsufficientHostCapacity",
        "InsufficientCapacity",
        "InsufficientReservedInstanceCapacity",
        "InsufficientCapacityOnHost",
    ),
    run_mark="`provisioner-run` tag",
    docs=ProviderDocs(
        offers="p4d/p4de (A100 40/80 GB), p5 (H100), p5e and p5en (H200), p6-b200 (B200), g5 xlarge/12xlarge/48xlarge"
        " (A10G), g6e xlarge/12xlarge/48xlarge (L40S). On-demand and spot.",
        regions="us-east-1, us-east-2, us-west-2, eu-west-1, eu-north-1",
        notes=(
            (Capability.PRIVATE_NETWORK, "(VPC)"),
            (Capability.SCRIPT_BOOTSTRAP, "(as cloud-init user data)"),
            (Capability.CLUSTER_PRODUCT, "(Capacity Blocks are quotes)"),
        ),
    ),
    private_cidrs=("10.42.0.0/16",),
    storage_scheme="s3",
    metadata=InstanceMetadata("imds", "http://169.254.169.254"),
    shared_fs="lustre",
    sdk_credentials=SdkCredentials(
        ("AWS_ACCESS_KEY_ID", "AWS_PROFILE", "AWS_WEB_IDENTITY_TOKEN_FILE"),
        (("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials", ""), ("AWS_CONFIG_FILE", ".aws/config", "")),
        "no AWS credentials (AWS_ACCESS_KEY_ID, AWS_PROFILE or ~/.aws/credentials)",
    ),
    teardown=Teardown(
        "aws",
        "poweroff",
        True,
        ttl="node timer powers off; the adapter launches with InstanceInitiatedShutdownBehavior=terminate, "
        "so the instance is terminated",
        idle="node idle check powers off, which terminates the instance",
        client_dies="nothing is lost: the nodes end themselves; `provisioner gc` finds any leftovers by tag",
    ),
)

if TYPE_CHECKING:
    from provisioner.providers.aws.provider import AWSProvider


def __getattr__(name: str) -> Any:
    if name == "AWSProvider":  # imported on first use: the package itself stays light
        from provisioner.providers.aws.provider import AWSProvider

        return AWSProvider
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["CAPABILITIES", "FACTS", "AWSProvider"]
