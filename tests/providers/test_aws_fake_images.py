"""The AWS fake has moto load its base images only (MOTO_AMIS_PATH), not each region's ~1,260 latest
Amazon Linux and ECS-optimized ones, and still sells nodes that boot aws_ec2.CONTRACT_IMAGE."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from provisioner.testing.fakes.aws_ec2 import CONTRACT_IMAGE
from provisioner.testing.fakes.aws_protocol import base_images_only, reset_moto


def test_each_region_backend_holds_moto_base_images_and_the_contract_image(monkeypatch: pytest.MonkeyPatch) -> None:
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ec2.models import ec2_backends
    from moto.utilities.utils import load_resource

    monkeypatch.delenv("MOTO_AMIS_PATH", raising=False)
    base_images_only()
    written = json.loads(Path(os.environ["MOTO_AMIS_PATH"]).read_text(encoding="utf-8"))
    base = load_resource("ec2/resources/amis.json")
    assert written == base and len(base) == 44  # moto 5's base set, whole
    reset_moto()  # backends made earlier in this worker under another setting are made again
    try:
        for region in ("us-east-1", "us-west-2"):
            images = ec2_backends[DEFAULT_ACCOUNT_ID][region].amis
            assert CONTRACT_IMAGE in images
            assert len(images) == 44, region  # was 1,301 in us-east-1 with the latest and ECS-optimized ones
    finally:
        reset_moto()


def test_a_setting_already_made_is_kept(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MOTO_AMIS_PATH", str(tmp_path / "mine.json"))
    base_images_only()
    assert os.environ["MOTO_AMIS_PATH"] == str(tmp_path / "mine.json")
