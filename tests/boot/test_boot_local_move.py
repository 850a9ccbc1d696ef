"""``provisioner burst SPEC --local --recover anywhere`` as a user runs it (the installed CLI, root, a
HOME of its own): the lab serves every node-backed fake; the toy training loop of
tests/boot/toy_move.py runs as a Slurm job on two Lambda-fake VMs and checkpoints to moto's S3
server, started by the test inside the lab's network namespace on the namespace's own address (the
spec names it: the namespace is new, so the port is free). Once step 10 is written the head gets a spot
reclaim notice (the file its node watch writes; the rendered path unit copies to the bucket at once).
Once step 10's copy is in the bucket, the
test withdraws Lambda's capacity (``POST /_fake/faults`` capacity_after 0) and reclaims the worker
(``POST /_fake/reclaim``), both through the fake's control routes from outside the CLI; the CLI moves the
run to a RunPod Instant Cluster in the same lab, restores the checkpoint and runs the job again from
step 10 (read through ``provisioner ssh mv-m1``, the moved cluster finding the run's lab). burst exits
0 and leaves no lab, namespace or node. The store's keys reach the nodes as a user's would:
``checkpoint.credentials_env`` from the CLI's environment, over the SSH pass. Run as root.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from provisioner.local.lab import NETWORK, OPERATOR
from provisioner.render.checkpoint_sync import CHECKPOINT_NOW
from tests.boot.test_boot_local import User
from tests.boot.toy_move import BUCKET, STORE_KEYS, TOY, catalog
from tests.conftest import need_tool

pytestmark = [pytest.mark.boot, pytest.mark.system, pytest.mark.slow, pytest.mark.timeout(1500)]

STORE = f"http://{OPERATOR}:9000"
SPEC = f"""\
name: mv
gpus: {{model: [H100], count: 16}}
nodes: {{count: 2}}
control_plane: slurm
providers: {{allow: [lambda, runpod]}}
workload: {{hours: 1, checkpoint_interval_minutes: 2, restart_overhead_minutes: 1}}
storage: {{checkpoint_nvme_gib_per_node: 0, shared: {{kind: none}}}}
checkpoint:
  remote: s3://{BUCKET}/toy
  endpoint_url: {STORE}
  size_gb: 3
  egress_usd_per_gb: 0.07
  credentials_env: {{access_key_id: MOVE_STORE_KEY, secret_access_key: MOVE_STORE_SECRET}}
"""


LIST = (
    "import boto3\n"
    f"s3 = boto3.client('s3', endpoint_url='{STORE}', region_name='us-east-1', aws_access_key_id='k', "
    "aws_secret_access_key='s')\n"
    f"for o in s3.list_objects_v2(Bucket='{BUCKET}').get('Contents', []): print(o['Key'], o['Size'])\n"
)


READ = (
    "import boto3\n"
    f"s3 = boto3.client('s3', endpoint_url='{STORE}', region_name='us-east-1', aws_access_key_id='k', "
    "aws_secret_access_key='s')\n"
    f"print(s3.get_object(Bucket='{BUCKET}', Key='toy/mv-0/toy.ckpt')['Body'].read().decode().strip())\n"
)


def _in_lab(netns: str, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", netns, *argv], capture_output=True, text=True, timeout=timeout)


def _post(netns: str, url: str, body: dict[str, Any]) -> dict[str, Any]:
    done = _in_lab(
        netns, "curl", "-sS", "-X", "POST", "-H", "content-type: application/json", "-d", json.dumps(body), url
    )
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    assert answer.get("ok"), answer
    return answer


def _log(user: User, cluster: str, failures: list[str] | None = None) -> str:
    done = user.run("ssh", cluster, "--", "cat", "/var/tmp/toy.log", timeout=120)
    if done.returncode != 0 and failures is not None:
        failures.append(f"{time.strftime('%H:%M:%S')} {done.returncode}: {done.stderr.strip()[-300:]}")
    return done.stdout if done.returncode == 0 else ""


def test_burst_local_moves_the_run_to_the_other_fake_and_resumes_from_the_store(
    node_image: Path, host_resources: tuple[int, int]
) -> None:
    need_tool("rclone", "curl")
    home = Path(tempfile.mkdtemp(prefix="provisioner-localmove-", dir="/var/tmp"))
    user = User(home, node_image)
    user.env.update(STORE_KEYS)
    (home / "spec.yaml").write_text(SPEC)
    (home / "catalog.json").write_text(json.dumps(catalog(*host_resources)))
    out = home / "burst.jsonl"
    job = ["sbatch", "--nodes=2", "--output=/var/tmp/toy.out", "--open-mode=append", f"--wrap={TOY}"]
    cli = str(Path(sys.executable).parent / "provisioner")
    argv = [cli, "burst", "spec.yaml", "--local", "--recover", "anywhere", "--catalog", "catalog.json"]
    with out.open("w") as stdout, (home / "burst.err").open("w") as stderr:
        burst = subprocess.Popen(
            [*argv, "--skip-validation", "--json", "--", *job], env=user.env, cwd=home, stdout=stdout, stderr=stderr
        )
    moto: subprocess.Popen[bytes] | None = None
    seen: dict[str, Any] = {}
    failures: list[str] = []  # why the new cluster's log could not be read, when it could not
    try:
        deadline = time.monotonic() + 1200
        while not user.lab("mv").get("fakes") and burst.poll() is None and time.monotonic() < deadline:
            time.sleep(1)
        record = user.lab("mv")
        assert sorted(record.get("fakes", {})) == ["fluence", "lambda", "runpod"], (record, user.lab_log("mv"))
        netns = record["netns"]
        moto = subprocess.Popen(
            ["ip", "netns", "exec", netns, sys.executable, "-m", "moto.server", "-H", OPERATOR, "-p", "9000"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        make_bucket = (
            "import boto3,sys,time\n"
            "for _ in range(60):\n"
            "    try:\n"
            f"        boto3.client('s3', endpoint_url='{STORE}', region_name='us-east-1', aws_access_key_id='k', "
            f"aws_secret_access_key='s').create_bucket(Bucket='{BUCKET}'); sys.exit(0)\n"
            "    except Exception: time.sleep(1)\n"
            "sys.exit(1)\n"
        )
        assert _in_lab(netns, sys.executable, "-c", make_bucket, timeout=120).returncode == 0

        while burst.poll() is None and time.monotonic() < deadline and "fault" not in seen:
            text = _log(user, "mv")
            seen["old"] = text or seen.get("old", "")
            steps = [int(s) for s in re.findall(r"^step (\d+) ", text, re.M)]
            if "copied" not in seen and "ckpt 10" in text:
                # A spot reclaim notice on the head, as its node watch writes it: the path unit copies at once.
                notice = user.run(
                    "ssh",
                    "mv",
                    "--",
                    "sudo",
                    "-n",
                    "sh",
                    "-c",
                    f"'mkdir -p /run/provisioner && date > {CHECKPOINT_NOW}'",
                )
                assert notice.returncode == 0, notice.stdout + notice.stderr
                for _ in range(45):
                    listed = _in_lab(netns, sys.executable, "-c", LIST, timeout=120)
                    if "toy/mv-0/toy.ckpt 3" in listed.stdout.splitlines():  # "10\n"
                        break
                    time.sleep(2)
                assert "toy/mv-0/toy.ckpt 3" in listed.stdout.splitlines(), listed.stdout + listed.stderr
                seen["copied"] = 10
            elif "copied" in seen and steps and steps[-1] >= 13:
                status = user.run("status", "mv", "--json", timeout=120)
                worker = next(n["id"] for n in json.loads(status.stdout)["live"] if n["name"] == "mv-1")
                lam = record["fakes"]["lambda"]
                _post(netns, f"{lam}/_fake/faults", {"kind": "capacity_after", "k": 0, "times": None})
                _post(netns, f"{lam}/_fake/reclaim", {"instance_id": worker})
                seen["fault"] = (time.time(), steps[-1])
            time.sleep(2)
        while burst.poll() is None and time.monotonic() < deadline:  # the new cluster's log, through its lab
            text = _log(user, "mv-m1", failures)
            if text:
                seen["new"] = text
            time.sleep(2)
        code = burst.wait(max(deadline - time.monotonic(), 1))
        # What the move restored: the old head's copy in the store (the new cluster copies under its own names).
        # The lab's namespace went with the lab; moto's process still holds it.
        read = ["nsenter", f"--net=/proc/{moto.pid}/ns/net", sys.executable, "-c", READ]
        seen["restored"] = subprocess.run(read, capture_output=True, text=True, timeout=120).stdout.strip()
    finally:
        if burst.poll() is None:
            burst.terminate()
            burst.wait(300)
        if moto is not None:
            moto.terminate()
            moto.wait(30)
    (home / "seen.json").write_text(json.dumps({**seen, "failures": failures}, indent=1))  # for a failure's reader
    events = [json.loads(line) for line in out.read_text().splitlines() if line.startswith("{")]
    kinds = [e["event"] for e in events]
    said = (home / "burst.err").read_text()[-3000:] + user.lab_log("mv")[-3000:]
    assert code == 0 and "fault" in seen, (kinds, said, seen)
    move = next(e for e in events if e["event"] == "move")
    assert "no capacity for mv-1 at lambda" in move["reason"] and (move["provider"], move["to_cluster"]) == (
        "runpod",
        "mv-m1",
    ), move
    # Priced before it was made: the download (3 GB at $0.07) and 2 minutes of the two RunPod nodes
    # ($3.10/h each) redone, each rounded once: $0.21 + $0.21.
    assert Decimal(str(move["move_usd"])) == Decimal("0.42"), move
    assert [e["node"] for e in events if e["event"] == "restore"] == ["mv-m1-0", "mv-m1-1"], kinds
    starts = re.findall(r"^start (\d+) ([\d.]+) (.*)$", seen.get("new", ""), re.M)
    # Resumed from the store's step: 10 (the notice's copy), or a later one when the fault came later on
    # a loaded machine and the notice's second copy took it; never a checkpoint the job wrote after the
    # fault (the head alone takes no step: toy_move.TOY), and one the new cluster had steps left after.
    assert seen["restored"] in ("10", "20", "30", "40", "50"), seen
    assert int(seen["restored"]) <= seen["fault"][1] + 9, seen
    assert len(starts) == 1 and starts[0][0] == seen["restored"], (seen, failures[-5:])
    assert sorted(starts[0][2].split()) == ["mv-m1-0", "mv-m1-1"], seen
    # Nothing left: no lab record, lab process, namespace or node.
    assert list(user.labs.glob("*.json")) == [], list(user.labs.iterdir())
    assert (
        f"netns pvl{record['pid']}"
        not in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    )
    assert not Path(f"/proc/{record['pid']}").exists()
    assert NETWORK.startswith("10.80.")
    fault_at, fault_step = seen["fault"]
    print(
        f"local move (installed CLI): fault -> job running again {float(starts[0][1]) - fault_at:.0f} s; "
        f"steps redone {fault_step - int(seen['restored'])}; move ${move['move_usd']}"
    )
    if os.environ.get("KEEP_LOCALMOVE_HOME") is None:
        import shutil

        shutil.rmtree(home, ignore_errors=True)
