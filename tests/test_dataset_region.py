"""A dataset region the catalog does not know (a typo such as ``aws:us-eats-1``) is priced as
another region of that provider: ``plan`` says so in one located warning line naming the nearest
regions, and goes on (a bucket may sit in a region where the catalog sells no GPUs)."""

from __future__ import annotations

from pathlib import Path

import pytest

from provisioner.cli import main

SPEC = """\
name: ds-typo
gpus: {model: [H100], count: 8}
nodes: {count: 2}
workload:
  hours: 10
  dataset: {size_gb: 1000, location: "%s"%s}
"""


def _plan(tmp_path: Path, capsys: pytest.CaptureFixture[str], location: str, region: str = "") -> list[str]:
    path = tmp_path / "ds.yaml"
    path.write_text(SPEC % (location, f", region: {region}" if region else ""), encoding="utf-8")
    assert main(["plan", str(path), "--top", "1"]) == 0
    captured = capsys.readouterr()
    assert "Cheapest:" in captured.out
    return captured.err.splitlines()


def test_a_misspelled_dataset_region_is_a_located_warning_naming_the_nearest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _plan(tmp_path, capsys, "aws:us-eats-1") == [
        f"warning: {tmp_path / 'ds.yaml'}:6:28: workload.dataset.location: aws region 'us-eats-1' is not in the "
        "catalog (nearest: us-east-1, us-east-2, us-west-2); moving the data is priced as from another aws region"
    ]


def test_a_misspelled_bucket_region_names_the_region_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (line,) = _plan(tmp_path, capsys, "s3://bucket/x", "us-wst-2")
    assert (
        ":6:" in line
        and "workload.dataset.region: aws region 'us-wst-2' is not in the catalog (nearest: us-west-2," in line
    )


@pytest.mark.parametrize(
    ("location", "region"),
    [("aws:us-east-1", ""), ("s3://bucket/x", "us-west-2"), ("internet", ""), ("gcp:us-central1", "")],
)
def test_a_known_region_or_no_region_gives_no_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], location: str, region: str
) -> None:
    assert _plan(tmp_path, capsys, location, region) == []
