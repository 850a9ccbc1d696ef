"""The move's cost term (cost_terms.move_term): a re-plan after a lost cluster prices the checkpoint's
download from its store and the work lost since its last copy, and that changes the ranking.

Expected figures are worked by hand from the bundled catalog's facts: AWS internet egress $0.09/GB
after 100 free GB, $0.02/GB between its regions; GCP $0.12/GB for the first TiB, $0.02 between
regions; RunPod charges no ingress. Cluster prices: AWS p5.48xlarge $55.04/h, RunPod 8x H100 SXM
$21.52/h, GCP a3-highgpu-8g $87.8325/h.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import pytest

from provisioner.plan import Plan
from tests.test_lifecycle_support import plans_for

SPEC = """\
name: mv-term
gpus: {{model: [H100], count: 8}}
nodes: {{count: 1}}
control_plane: none
providers: {{allow: [aws, gcp, runpod]}}
workload: {{hours: 1}}
checkpoint: {{{checkpoint}}}
access: {{allowed_cidrs: [198.51.100.0/24]}}
"""


def best_per_provider(checkpoint: str, tmp_path: Path) -> dict[str, Plan]:
    plans = plans_for(SPEC.format(checkpoint=checkpoint), tmp_path, count=40)
    best: dict[str, Plan] = {}
    for plan in plans:
        best.setdefault(plan.option.provider, plan)
    return best


def moves(best: dict[str, Plan]) -> dict[str, tuple[Decimal, Decimal]]:
    return {name: (plan.option.hourly_usd, plan.option.cost.move) for name, plan in best.items()}


@pytest.mark.parametrize(
    ("checkpoint", "expected"),
    [
        # s3://: AWS pays inter-region ($20.00) + 7.5 min x $55.04/h ($6.88); RunPod the internet egress of
        # 900 GB ($81.00) + 7.5 min x $21.52/h ($2.69); GCP the same $81.00 + $10.97906 -> $10.98.
        (
            "remote: s3://ckpt-bucket/run, size_gb: 1000, restore: {lost_minutes: 7.5}",
            {"aws": "26.88", "runpod": "83.69", "gcp": "91.98"},
        ),
        # gs://: GCP's first TiB at $0.12/GB (no free allowance) for the others, its inter-region for itself.
        (
            "remote: gs://ckpt-bucket/run, size_gb: 1000, restore: {lost_minutes: 7.5}",
            {"aws": "126.88", "runpod": "122.69", "gcp": "30.98"},
        ),
        # An S3-compatible store with its own rate: 1000 GB x $0.015 for every candidate.
        (
            "remote: s3://ckpt-bucket/run, endpoint_url: 'https://minio.example:9000', size_gb: 1000, "
            "egress_usd_per_gb: 0.015, restore: {lost_minutes: 7.5}",
            {"aws": "21.88", "runpod": "17.69", "gcp": "25.98"},
        ),
        # Seconds with a fraction: 0.05 min = 3 s; $21.52/h x 3 s = $0.017933 -> $0.02; $55.04 -> $0.045866 -> $0.05.
        (
            "remote: s3://ckpt-bucket/run, restore: {lost_minutes: 0.05}",
            {"aws": "0.05", "runpod": "0.02", "gcp": "0.07"},
        ),
        # No restore (a first bring-up): no move term, whatever the checkpoint's size.
        ("remote: s3://ckpt-bucket/run, size_gb: 1000", {"aws": "0", "runpod": "0", "gcp": "0"}),
    ],
)
def test_the_move_term_prices_the_download_and_the_lost_work(
    checkpoint: str, expected: dict[str, str], tmp_path: Path
) -> None:
    best = best_per_provider(checkpoint, tmp_path)
    assert {name: move for name, (_, move) in moves(best).items()} == {k: Decimal(v) for k, v in expected.items()}
    assert {name: hourly for name, (hourly, _) in moves(best).items()} == {
        "aws": Decimal("55.04"),
        "runpod": Decimal("21.52"),
        "gcp": Decimal("87.8325"),
    }
    for plan in best.values():  # the move is part of the total the ranking sorts by
        cost = plan.option.cost
        assert cost.total == cost.compute + cost.storage + cost.egress + cost.interruption + cost.move


def test_the_checkpoints_store_reorders_the_ranking(tmp_path: Path) -> None:
    plain = plans_for(SPEC.format(checkpoint="remote: s3://ckpt-bucket/run, size_gb: 1000"), tmp_path)
    moved = plans_for(
        SPEC.format(checkpoint="remote: s3://ckpt-bucket/run, size_gb: 1000, restore: {lost_minutes: 7.5}"), tmp_path
    )
    assert plain[0].option.provider == "runpod"  # cheapest per hour, no move to pay for
    assert moved[0].option.provider == "aws"  # the checkpoint is in S3: leaving AWS costs $81.00 more


def test_a_plan_without_a_move_serializes_as_before(tmp_path: Path) -> None:
    plain = plans_for(SPEC.format(checkpoint="remote: s3://ckpt-bucket/run"), tmp_path)[0]
    data = json.loads(plain.model_dump_json())
    assert data["spec"]["checkpoint"] == {"remote": "s3://ckpt-bucket/run", "endpoint_url": None}
    assert "move" not in data["option"]["cost"]
    moved = plans_for(SPEC.format(checkpoint="remote: s3://b-1/r, restore: {lost_minutes: 1}"), tmp_path)[0]
    again = Plan.model_validate_json(moved.model_dump_json())
    assert again.option.cost.move == moved.option.cost.move > 0
    assert again.spec.checkpoint.restore is not None and again.spec.checkpoint.restore.lost_minutes == 1


def test_a_restore_without_a_remote_is_refused(tmp_path: Path) -> None:
    from provisioner.errors import SpecError

    with pytest.raises(SpecError, match="checkpoint"):
        plans_for(SPEC.format(checkpoint="restore: {lost_minutes: 1}"), tmp_path)


# The bucket's region (checkpoint.region): 1234.25 GB leaving a store. Same provider and region: free;
# same provider, another region or no region given: $0.02/GB, 24.685 -> $24.68 (half-even; binary float
# makes it 24.685000000000002 -> $24.69); another provider: S3's 1134.25 GB past the free 100 at $0.09 =
# $102.0825 -> $102.08, GCS's first 1024 GB at $0.12 + 210.25 at $0.11 = $146.0075 -> $146.01. An explicit
# egress_usd_per_gb wins everywhere: 1234.25 x $0.01 = $12.3425 -> $12.34. No lost work: the download alone.
S3 = "remote: s3://ckpt-bucket/run, size_gb: 1234.25, restore: {lost_minutes: 0}"
GS = "remote: gs://ckpt-bucket/run, size_gb: 1234.25, restore: {lost_minutes: 0}"


@pytest.mark.parametrize(
    ("checkpoint", "home", "in_region", "elsewhere", "others"),
    [
        (S3 + ", region: us-east-1", "aws:us-east-1", "0", "24.68", {"runpod": "102.08", "gcp": "102.08"}),
        (S3 + ", region: us-west-2", "aws:us-west-2", "0", "24.68", {"runpod": "102.08", "gcp": "102.08"}),
        (S3, None, None, "24.68", {"runpod": "102.08", "gcp": "102.08"}),  # no region: the cautious rate
        (GS + ", region: us-central1", "gcp:us-central1", "0", "24.68", {"runpod": "146.01", "aws": "146.01"}),
        (GS, None, None, "24.68", {"runpod": "146.01", "aws": "146.01"}),
        (
            S3 + ", region: us-east-1, egress_usd_per_gb: 0.01",
            "aws:us-east-1",
            "12.34",
            "12.34",
            {"runpod": "12.34", "gcp": "12.34"},
        ),
    ],
)
def test_the_buckets_region_prices_a_move_within_its_provider(
    checkpoint: str,
    home: str | None,
    in_region: str | None,
    elsewhere: str,
    others: dict[str, str],
    tmp_path: Path,
) -> None:
    store = "aws" if checkpoint.startswith("remote: s3") else "gcp"
    plans = plans_for(SPEC.format(checkpoint=checkpoint), tmp_path, count=200)
    seen: dict[str, Decimal] = {}
    for plan in plans:  # every row: its move is fixed by its provider and whether it is in the bucket's region
        where = f"{plan.option.provider}:{plan.option.region}"
        if plan.option.provider != store:
            expected = others[plan.option.provider]
        else:
            expected = in_region if where == home else elsewhere
        assert (where, plan.option.cost.move) == (where, Decimal(str(expected)))
        seen[where] = plan.option.cost.move
    assert home is None or home in seen  # the bucket's region sells the GPU: its rows were priced
    assert sum(1 for where in seen if where.startswith(store) and where != home) >= 2  # and other regions


def test_a_checkpoint_region_is_checked_and_kept_out_of_plan_json_when_unset(tmp_path: Path) -> None:
    from provisioner.errors import SpecError

    for bad in ("US East", "us_east_1", "-us-east-1", "us-east-1; rm -rf /", "x" * 64):
        with pytest.raises(SpecError, match=r"checkpoint\.region"):
            plans_for(SPEC.format(checkpoint=f"remote: s3://b-1/r, region: {json.dumps(bad)}"), tmp_path)
    with pytest.raises(SpecError, match="region is the bucket's"):
        plans_for(SPEC.format(checkpoint="region: us-east-1"), tmp_path)
    unset = plans_for(SPEC.format(checkpoint="remote: s3://b-1/r"), tmp_path)[0]
    assert "region" not in json.loads(unset.model_dump_json())["spec"]["checkpoint"]
    kept = plans_for(SPEC.format(checkpoint="remote: s3://b-1/r, region: eu-north-1"), tmp_path)[0]
    assert json.loads(kept.model_dump_json())["spec"]["checkpoint"]["region"] == "eu-north-1"
    assert Plan.model_validate_json(kept.model_dump_json()).spec.checkpoint.region == "eu-north-1"
