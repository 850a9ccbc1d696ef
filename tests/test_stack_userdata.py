"""How user data reaches the nodes: gzip under EC2's 16 KiB, and the managed filesystem's
address as a cloud-init boot hook in front of the rendered cloud-config (read back by the
real cloud-init's user-data processor)."""

from __future__ import annotations

import base64
import gzip
import json
import random
import shutil
import subprocess
from pathlib import Path

import pytest

from provisioner.stacks.aws import USER_DATA_MAX_BYTES, compressed_user_data
from provisioner.stacks.model import with_shared_fs_target
from tests.conftest import need_tool
from tests.test_stack_cluster import _secrets, args_for, example, plan_on

READ_BACK = """
import json, sys
from cloudinit import helpers, user_data
message = user_data.UserDataProcessor(helpers.Paths({})).process(open(sys.argv[1], "rb").read())
print(json.dumps([[p.get_content_type(), p.get_payload(decode=True).decode()]
                  for p in message.walk() if not p.is_multipart()]))
"""


def test_every_rendered_aws_user_data_fits_once_compressed() -> None:
    for name in ("pretrain-h100-slurm.yaml", "lora-a100-k8s.yaml", "h200-dataset-aws.yaml"):
        args = args_for(plan_on(example(name), "aws"), _secrets())
        for text in args.user_data.values():
            assert len(text.encode()) > USER_DATA_MAX_BYTES  # why compression is needed at all
            packed = base64.b64decode(compressed_user_data(text))
            assert len(packed) <= USER_DATA_MAX_BYTES and gzip.decompress(packed).decode() == text
            assert compressed_user_data(text) == compressed_user_data(text)  # no timestamp: no spurious diff


def test_incompressible_user_data_is_refused() -> None:
    noise = base64.b64encode(random.Random(7).randbytes(20_000)).decode()  # base64 of random bytes: ~6 bits/char
    with pytest.raises(ValueError, match="at most 16384"):
        compressed_user_data(noise)


def test_shared_fs_hook_is_deterministic_and_refuses_odd_targets() -> None:
    one = with_shared_fs_target("#cloud-config\n{}\n", "10.0.0.2:/shared")
    assert one == with_shared_fs_target("#cloud-config\n{}\n", "10.0.0.2:/shared")
    assert one != with_shared_fs_target("#cloud-config\n{}\n", "10.0.0.3:/shared")
    for bad in ("10.0.0.2:/x'; rm -rf /", "a b", "$(id)", ""):
        with pytest.raises(ValueError):
            with_shared_fs_target("#cloud-config\n", bad)


def test_cloud_init_reads_the_hook_then_the_rendered_config(tmp_path: Path) -> None:
    need_tool("cloud-init")
    interpreter = Path(str(shutil.which("cloud-init"))).read_text(encoding="utf-8", errors="replace").splitlines()[0]
    rendered = args_for(plan_on(example("h200-dataset-aws.yaml"), "aws"), _secrets()).user_data["h200-big-data-0"]
    composed = tmp_path / "user-data"
    composed.write_text(with_shared_fs_target(rendered, "fs-0abc.fsx.us-east-1.amazonaws.com@tcp:/xyz"))
    done = subprocess.run(
        [interpreter.removeprefix("#!").strip(), "-c", READ_BACK, str(composed)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    parts = json.loads(done.stdout)
    assert [kind for kind, _ in parts] == ["text/cloud-boothook", "text/cloud-config"]
    assert "SHARED_FS_TARGET=%s\\n' 'fs-0abc.fsx.us-east-1.amazonaws.com@tcp:/xyz'" in parts[0][1]
    assert parts[1][1] == rendered
