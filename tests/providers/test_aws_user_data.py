"""EC2 takes at most 16 KiB of user data: the rendered cloud-init (19-28 KiB) goes gzip-compressed."""

from __future__ import annotations

import gzip
import os

import pytest

from provisioner.errors import PlanError
from provisioner.providers.aws.provider import EC2_USER_DATA_MAX_BYTES, ec2_user_data


def test_small_user_data_goes_as_written() -> None:
    assert ec2_user_data("#cloud-config\nruncmd: [true]\n") == "#cloud-config\nruncmd: [true]\n"


def test_large_user_data_is_gzipped_deterministically_and_round_trips() -> None:
    text = "#cloud-config\n" + "".join(f"# line {i}: the rendered bootstrap\n" for i in range(2000))
    assert len(text.encode()) > EC2_USER_DATA_MAX_BYTES
    packed = ec2_user_data(text)
    assert isinstance(packed, bytes) and len(packed) <= EC2_USER_DATA_MAX_BYTES
    assert gzip.decompress(packed).decode() == text
    assert ec2_user_data(text) == packed  # a retried create sends the same bytes


def test_user_data_too_big_even_compressed_is_refused_before_buying() -> None:
    noise = os.urandom(20_000).hex()  # incompressible past 16 KiB
    with pytest.raises(PlanError, match="EC2 accepts at most 16384"):
        ec2_user_data(noise)
