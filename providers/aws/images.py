"""Which AMI a node of the direct AWS adapter boots: its own, the adapter's, else the newest
Amazon-owned GPU image of its region (looked up once per region)."""

from __future__ import annotations

from provisioner.errors import PlanError
from provisioner.providers.aws.client import AWSClient
from provisioner.providers.base import NodeSpec

DEFAULT_IMAGE_NAME = "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) *"
"""Amazon-owned GPU image looked up when a node names none (dstack uses the same family)."""


class Images:
    """The image lookup of one adapter; ``image_id`` (when set) is used for every node naming none."""

    def __init__(self, client: AWSClient, image_id: str | None = None) -> None:
        self.client = client
        self.image_id = image_id
        self._by_region: dict[str, str] = {}

    def for_node(self, spec: NodeSpec) -> str:
        """The node's image, else ``image_id``, else the newest default GPU image of its region (looked
        up once per region). PlanError when there is none."""
        if spec.image or self.image_id:
            return str(spec.image or self.image_id)
        if spec.region not in self._by_region:
            images = self.client.describe_images(
                spec.region,
                [{"Name": "name", "Values": [DEFAULT_IMAGE_NAME]}, {"Name": "state", "Values": ["available"]}],
                ["amazon"],
            )
            if not images:
                raise PlanError(
                    f"aws: no GPU image named {DEFAULT_IMAGE_NAME!r} in {spec.region}; set the node's "
                    "image or PROVISIONER_AWS_IMAGE_ID"
                )
            self._by_region[spec.region] = str(max(images, key=lambda i: str(i.get("CreationDate", "")))["ImageId"])
        return self._by_region[spec.region]


__all__ = ["DEFAULT_IMAGE_NAME", "Images"]
