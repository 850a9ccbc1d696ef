"""A run that outlives its provider, on booted nodes (issue 30 item 4): ``burst --recover anywhere``
on two Lambda-fake nodes (systemd-nspawn machines, tests/boot/backed.py) runs a toy training loop as
a Slurm job that checkpoints every 10 steps (1 step a second) into ``PROVISIONER_CHECKPOINT_DIR``;
the nodes copy that folder to ``checkpoint.remote``, an S3 bucket on moto's server listening inside
the test's network namespace (where the nodes reach it), with rclone as the rendered sync script runs
it. Then Lambda's capacity is withdrawn and the worker is reclaimed: the heal loop cannot buy it
again, so the run is re-planned over the same two-offer catalog the burst started from, the Lambda
cluster is torn down, a RunPod Instant Cluster (two pods, the other fake, same machines) is brought
up, the checkpoint is restored from the bucket and the job starts again there from the copied step,
and completes. burst exits 0 with nothing left at either fake or running.

The copy to the store is the one a spot reclaim notice starts (the rendered path unit, on the file the
node watch writes): the test writes that file on the head once step 10's checkpoint is written (the
timer's copy comes every 5 minutes, after this test is over). The nodes have no credentials of their
own: the spec names the store's keys (``checkpoint.credentials_env``), read from burst's environment
and written on each node of both clusters by the SSH pass. The figures (fault -> job running again,
the new cluster's bring-up, the restore) are printed for docs/benchmarks.md. Run as root.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml

from provisioner.lifecycle import realize
from provisioner.realize.remote import SshRemote
from provisioner.render.checkpoint_sync import CHECKPOINT_NOW
from provisioner.spec import ClusterSpec
from provisioner.testing.fakes.base import serve
from tests.boot.backed import BackedLambdaFake, BackedRunPodFake
from tests.boot.inprocess import API_KEY, OPERATOR, Lab, lab  # noqa: F401
from tests.boot.nodes import left_running
from tests.conftest import need_tool

pytestmark = [pytest.mark.boot, pytest.mark.system, pytest.mark.slow, pytest.mark.timeout(1200)]

BUCKET = "ckpt-move"
STORE_KEYS = {"MOVE_STORE_KEY": "move-test-key", "MOVE_STORE_SECRET": "move-test-secret"}
"""The store's keys in the environment burst runs in (``checkpoint.credentials_env`` names them)."""
LAMBDA_TYPE = "gpu_8x_h100_sxm5"
# The toy training loop (the batch script, on the head): it starts from the checkpoint in its folder
# (restored there after a move), proves both nodes with srun, takes a step a second and writes a
# checkpoint every 10 steps. Its log stays on the head (/var/tmp), outside the copied folder.
TOY = r"""d=${PROVISIONER_CHECKPOINT_DIR:?}; log=/var/tmp/toy.log
sudo -n mkdir -p "$d" && sudo -n chown -R "$(id -u):$(id -g)" "$d"
step=$(cat "$d/toy.ckpt" 2>/dev/null || echo 0)
echo "start $step $(date +%s.%N) $(srun -N2 hostname | sort | tr '\n' ' ')" >> $log
while [ $step -lt 60 ]; do
  sleep 1; step=$((step + 1)); echo "step $step $(date +%s.%N)" >> $log
  if [ $((step % 10)) -eq 0 ]; then
    echo $step > "$d/toy.ckpt.tmp" && mv "$d/toy.ckpt.tmp" "$d/toy.ckpt" && echo "ckpt $step" >> $log
  fi
done
echo "done $(date +%s.%N)" >> $log"""


def _offer(provider: str, cpus: int, memory_mib: int, **fields: Any) -> dict[str, Any]:
    return {
        "provider": provider,
        "gpu_model": "H100",
        "gpus": 8,
        "gpu_memory_gib": 80,
        "vcpus": cpus,
        "memory_gib": memory_mib // 1024,
        "local_nvme_gib": 0,
        "spot_price_per_hour_usd": None,
        "billing_increment_s": 60,
        "billing_minimum_s": 0,
        "egress_usd_per_gb": 0.0,
        "ingress_usd_per_gb": 0.0,
        "disk_usd_per_gib_hour": 0.0,
        "interruptions_per_node_hour": 0.0002,
        "spot_interruptions_per_node_hour": None,
        "interruption_basis": "test",
        "reliability": 0.995,
        "max_nodes": 4,
        "available": True,
        **fields,
    }


def _catalog(cpus: int, memory_mib: int) -> dict[str, Any]:
    """Lambda's 8x H100 instances (cheaper: ranked first) and RunPod's 8x H100 Instant Cluster, each the
    size of this host's nodes (slurmd drains a node reporting less than its slurm.conf says)."""
    facts = {
        "source": "boot test",
        "internet_egress_tiers": [],
        "free_egress_gb": 0,
        "inter_region_usd_per_gb": 0,
        "shared_storage_usd_per_gib_month": 0.2,
        "shared_storage_kind": "NFS",
        "boot_minutes": 6,
        "egress_note": "none",
    }
    lambda_offer = _offer(
        "lambda",
        cpus,
        memory_mib,
        instance_type=LAMBDA_TYPE,
        region="us-west-3",
        price_per_hour_usd=2.40,
        fabric="ethernet",
        fabric_gbps=100,
        purchase="instance",
        bootstrap="cloud_init",
        network="private",
        min_nodes=1,
    )
    runpod_offer = _offer(
        "runpod",
        cpus,
        memory_mib,
        instance_type="cluster_8x_H100-SXM",
        region="US-KS-2",
        price_per_hour_usd=3.10,
        fabric="infiniband",
        fabric_gbps=3200,
        purchase="cluster",
        bootstrap="script",
        network="cluster_fabric",
        min_nodes=2,
    )
    return {
        "as_of": "2026-11-20",
        "providers": {"lambda": facts, "runpod": facts},
        "offers": [lambda_offer, runpod_offer],
    }


def _spec(store_url: str) -> ClusterSpec:
    return ClusterSpec.model_validate(
        yaml.safe_load(
            f"""
name: mv
gpus: {{model: [H100], count: 16}}
nodes: {{count: 2}}
control_plane: slurm
providers: {{allow: [lambda, runpod]}}
workload: {{hours: 1, checkpoint_interval_minutes: 2, restart_overhead_minutes: 1}}
storage: {{checkpoint_nvme_gib_per_node: 0, shared: {{kind: none}}}}
access: {{allowed_cidrs: ["{OPERATOR}/32"]}}
checkpoint:
  remote: s3://{BUCKET}/toy
  endpoint_url: {store_url}
  size_gb: 3
  egress_usd_per_gb: 0.07
  credentials_env: {{access_key_id: MOVE_STORE_KEY, secret_access_key: MOVE_STORE_SECRET}}
"""
        )
    )


@pytest.fixture
def store(lab: Lab) -> Iterator[str]:  # noqa: F811
    """moto's S3 server on the namespace's own address (the nodes reach it over the bridge)."""
    from moto.server import ThreadedMotoServer

    with lab.netns.entered():  # its serving thread is made here, so its socket is in the namespace
        server = ThreadedMotoServer(ip_address=OPERATOR, port=0, verbose=False)
        server.start()
    host, port = server.get_host_and_port()
    url = f"http://{host}:{port}"
    with lab.netns.entered():
        _s3(url).create_bucket(Bucket=BUCKET)
    try:
        yield url
    finally:
        server.stop()


def _s3(url: str):  # type: ignore[no-untyped-def]
    return boto3.client("s3", endpoint_url=url, region_name="us-east-1", **_keys())


def _keys() -> dict[str, str]:
    keys = STORE_KEYS
    return {"aws_access_key_id": keys["MOVE_STORE_KEY"], "aws_secret_access_key": keys["MOVE_STORE_SECRET"]}


def _stored(lab: Lab, url: str) -> dict[str, bytes]:  # noqa: F811
    with lab.netns.entered():
        s3 = _s3(url)
        listing = s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])
        return {o["Key"]: s3.get_object(Bucket=BUCKET, Key=o["Key"])["Body"].read() for o in listing}


def test_a_run_whose_provider_has_no_capacity_moves_to_the_other_provider_and_resumes_from_the_store(
    lab: Lab,  # noqa: F811
    store: str,
    host_resources: tuple[int, int],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    need_tool("rclone")
    from provisioner.lifecycle.burst import BurstOptions, run_burst
    from provisioner.lifecycle.burst_recover import catalog_planner
    from provisioner.providers.http import RetryPolicy
    from provisioner.providers.lambda_.client import LambdaClient
    from provisioner.providers.lambda_.provider import LambdaProvider
    from provisioner.providers.runpod.provider import RunPodProvider

    monkeypatch.chdir(tmp_path)
    catalog = tmp_path / "catalog.json"
    catalog.write_text(json.dumps(_catalog(*host_resources)))
    planner = catalog_planner(catalog)
    spec = _spec(store)
    plans = list(planner(spec))
    assert [p.option.provider for p in plans] == ["lambda", "runpod"], [p.option.provider for p in plans]

    lambda_fake = BackedLambdaFake(lab.machines, api_key=API_KEY)
    runpod_fake = BackedRunPodFake(lab.machines, api_key=API_KEY)
    events: list[tuple[float, str, dict[str, Any]]] = []
    seen: dict[str, Any] = {"logs": {}, "copied": None, "fault": None, "heads": {}}
    finished = threading.Event()

    def emit(event: str, /, *, message: str, **fields: Any) -> None:
        events.append((time.time(), event, {"message": message, **fields}))

    def head_log(fake: Any) -> str:
        """The toy's log on whichever running node of ``fake`` has one (the head: the batch node)."""
        for iid, machine in list(lab.machines.nodes.items()):
            if iid not in getattr(fake, "instances", {}) and iid not in getattr(fake, "pods", {}):
                continue
            if machine.leader() is None:  # its nspawn started, its init not yet
                continue
            out = machine.exec("cat", "/var/tmp/toy.log", timeout=20)
            if out is not None and out.returncode == 0 and out.stdout:
                seen["heads"][fake.provider] = machine
                return out.stdout
        return ""

    def lambda_instance(node: str) -> str:
        return next(
            iid
            for iid, body in lambda_fake.instances.items()
            if body["name"].endswith(node) and iid in lambda_fake.machines.nodes
        )

    def inject() -> None:
        """Once step 10's checkpoint is written: a reclaim notice on the head (its copy lands in the
        store); 3 steps later Lambda's capacity goes and the worker is reclaimed."""
        try:
            while not finished.is_set() and seen["fault"] is None:
                text = head_log(lambda_fake)
                seen["logs"]["mv-0"] = text or seen["logs"].get("mv-0", "")
                steps = [int(s) for s in re.findall(r"^step (\d+) ", text, re.M)]
                if seen["copied"] is None and "ckpt 10" in text:
                    # What the node watch writes on a spot reclaim notice: the path unit copies at once.
                    notice = f"mkdir -p {CHECKPOINT_NOW.rsplit('/', 1)[0]} && date > {CHECKPOINT_NOW}"
                    seen["heads"]["lambda"].exec("sh", "-c", notice, timeout=30)
                    deadline = time.monotonic() + 90
                    while "toy/mv-0/toy.ckpt" not in (objects := _stored(lab, store)):
                        assert time.monotonic() < deadline, f"no copy in the store 90 s after the notice: {objects}"
                        time.sleep(0.5)
                    seen["copied"] = (time.time(), objects)
                    seen["copied_step"] = int(open_ckpt(objects))
                elif seen["copied"] is not None and steps and steps[-1] >= seen["copied_step"] + 3:
                    lambda_fake.capacity[LAMBDA_TYPE] = set()  # no more 8x H100 at Lambda, anywhere
                    worker = lambda_instance("mv-1")
                    seen["fault"] = (time.time(), steps[-1])
                    lambda_fake.set_status(worker, "preempted")
                    lambda_fake.machines.stop(worker)
                time.sleep(0.5)
            while not finished.is_set():  # the new cluster's log, to the end
                text = head_log(runpod_fake)
                if text:
                    seen["logs"]["mv-m1-0"] = text
                time.sleep(0.5)
        except Exception as exc:  # reported by the assertions below
            seen["error"] = repr(exc)

    def open_ckpt(objects: dict[str, bytes]) -> str:
        return objects["toy/mv-0/toy.ckpt"].decode().strip()

    with serve(lambda_fake) as lambda_server, serve(runpod_fake) as runpod_server:
        fast = {"poll_interval_s": 0.5, "retry": RetryPolicy(base_delay_s=0.01, max_delay_s=0.1)}
        adapters: dict[str, Any] = {
            "lambda": LambdaProvider(
                API_KEY, base_url=lambda_server.url, limits=LambdaClient.default_limits.scaled(100.0), **fast
            ),
            "runpod": RunPodProvider(API_KEY, base_url=runpod_server.url, **fast),
        }
        key = lab.key(realize.cluster_secrets(plans[0].cluster_id))
        runtime = realize.Runtime(
            remote=SshRemote(key, lab.workdir / "known_hosts", ssh=str(lab.ssh_wrapper())),
            provider_for=lambda name: adapters[name],
            emit=emit,
            timeouts=realize.Timeouts(running_s=180, ready_s=180, deleted_s=120, interval_s=1, max_interval_s=2),
            environ=STORE_KEYS,
        )
        watcher = threading.Thread(target=inject, name="inject-fault", daemon=True)
        watcher.start()
        job = ["sbatch", "--nodes=2", "--output=/var/tmp/toy.out", "--open-mode=append", f"--wrap={TOY}"]
        options = BurstOptions(skip_validation=True, heal_poll_s=5, recover="anywhere", planner=planner)
        try:
            code = run_burst(plans, job, options, runtime)
        except BaseException:
            print(lab.node_logs())
            raise
        finally:
            finished.set()
            watcher.join(30)
        assert (lambda_fake.instance_count(), runpod_fake.instance_count()) == (0, 0)
        assert runpod_fake.cluster_routes.clusters == {} and lambda_fake.firewall.rulesets == {}
        assert lambda_fake.validation_errors == [] and runpod_fake.validation_errors == []
    lab.machines.settle()
    assert lab.machines.running() == [] and left_running(lab.machines.stopped) == []
    kinds = [event for _, event, _ in events]
    assert "error" not in seen, seen.get("error")
    assert code == 0, (kinds, seen["logs"])
    old, new = seen["logs"]["mv-0"], seen["logs"].get("mv-m1-0", "")
    assert seen["copied"] is not None and seen["fault"] is not None, kinds
    copied_step = seen["copied_step"]
    assert copied_step == 10, seen["copied"][1]
    # The move, said with its reason and its money: the download (3 GB at $0.07) and 2 minutes of the
    # two RunPod nodes ($3.10/h each) redone, each rounded once: $0.21 + $0.21.
    move = next(f for _, e, f in events if e == "move")
    assert "no capacity for mv-1 at lambda" in move["reason"], move
    assert (move["provider"], move["to_cluster"]) == ("runpod", "mv-m1"), move
    assert move["move_usd"] == Decimal("0.42"), move
    assert [f["node"] for _, e, f in events if e == "restore"] == ["mv-m1-0", "mv-m1-1"], kinds
    assert kinds.index("move") < kinds.index("move-left") < kinds.index("moved"), kinds
    # The job ran again on the new cluster, from the store's checkpoint, to the end.
    starts = re.findall(r"^start (\d+) ([\d.]+) (.*)$", new, re.M)
    assert len(starts) == 1 and starts[0][0] == str(copied_step), new
    assert open_ckpt(_stored(lab, store)) == str(copied_step)  # what the store held is what was restored
    assert sorted(starts[0][2].split()) == ["mv-m1-0", "mv-m1-1"], new
    assert re.search(r"^done ", new, re.M), new
    assert re.findall(r"^start (\d+) ", old, re.M)[0] == "0", old
    fault_at, fault_step = seen["fault"]
    resumed_at = float(starts[0][1])
    moved = next(f for _, e, f in events if e == "moved")
    t = {e: w for w, e, _ in reversed(events)}  # the first time of each event
    for when, event, fields in events:
        if fault_at - 1 <= when <= resumed_at and event not in ("job-output", "wait-running", "wait-ready"):
            print(f"  {when - fault_at:+7.1f} s {event}: {fields['message'][:160]}")
    print(
        f"move: fault -> job running again {resumed_at - fault_at:.0f} s (move -> moved {moved['seconds']:.0f} s: "
        f"teardown, RunPod bring-up, restore; restore -> job start {resumed_at - t['restore']:.0f} s); "
        f"steps redone {fault_step - copied_step} (store copy at step {copied_step}); move ${move['move_usd']}"
    )
