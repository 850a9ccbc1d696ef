"""A cluster that heals, on booted nodes: ``burst`` on two Lambda-fake nodes that are systemd-nspawn
machines (tests/boot/backed.py) runs a toy training loop as a requeueable Slurm job that checkpoints
every 10 steps (1 step a second) on the batch node; then two faults hit the worker, one after the
other in the same job (the cluster is bought and booted once for both):

* ``xid``: its stand-in kernel log gets an XID 79 line and its stand-in ``nvidia-smi`` reads a
  volatile uncorrectable ECC error; the node's own health watch (``provisioner node watch``, started
  by the rendered bootstrap; the image gets the package and the stand-ins at launch, as the k3s
  stand-in is given) drains it with the code;
* ``preempt``: the fake marks the instance ``preempted`` and its machine powers off.

Each time the heal loop inside burst replaces the worker under its name, the job is requeued and
resumes from its last checkpoint; after the second it completes, and burst exits 0 with nothing left at the fake or
running. The figures (fault -> job running again, the replacement's boot, steps redone) are printed
for docs/benchmarks.md. Run as root under the guide's lock and image cache.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from werkzeug.wrappers import Request, Response

from provisioner.lifecycle import realize
from provisioner.plan import Plan
from provisioner.realize.remote import SshRemote
from provisioner.testing.fakes.base import serve
from tests.boot.backed import BackedLambdaFake, Machines
from tests.boot.inprocess import API_KEY, Lab, lab, lambda_plan  # noqa: F401
from tests.boot.nodes import left_running

pytestmark = [pytest.mark.boot, pytest.mark.system, pytest.mark.slow, pytest.mark.timeout(900)]

GPU = Path(__file__).parents[1] / "fixtures" / "gpu"
STAND_INS = "/var/lib/provisioner-test"
NVIDIA_SMI = f"""#!/bin/sh
# Stand-in nvidia-smi: one H100 from the captures in {STAND_INS} (tests/fixtures/gpu).
case " $* " in
    *" -q -x "*) cat {STAND_INS}/smi.xml ;;
    *" --query-gpu="*) cat {STAND_INS}/query.csv ;;
    *" -L "*) echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-f8f07b0d-4134-3160-9145-eb3b695fff83)" ;;
    *) exit 0 ;;
esac
"""
DMESG = f"#!/bin/sh\n# Stand-in kernel log.\ncat {STAND_INS}/kmsg\n"
PROVISIONER = """#!/bin/sh
# The provisioner package the test copied in (the image's python3 is the same minor version). The
# health watch looks every 5 s here (the rendered script says 30 s; a later option wins), as burst's
# heal loop polls every 5 s in this test: a fault is seen in seconds, not half a minute.
export PYTHONPATH=/opt/provisioner-test/python
[ "$1 $2" = "node watch" ] && set -- "$@" --interval-s 5
exec python3 -c 'import sys; from provisioner.cli import main; sys.exit(main())' "$@"
"""
XID79 = "[ 3812.554131] NVRM: Xid (PCI:0000:00:06): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
# The toy training loop: the batch script (on the first node, the head) loads the last checkpoint,
# proves both nodes with srun, takes a step a second and saves a checkpoint every 10 steps.
TOY = r"""ck=/var/tmp/toy.ckpt; log=/var/tmp/toy.log
step=$(cat $ck 2>/dev/null || echo 0)
echo "start $step $(date +%s.%N) $(srun -N2 hostname | sort | tr '\n' ' ')" >> $log
while [ $step -lt 50 ]; do
  sleep 1; step=$((step + 1)); echo "step $step $(date +%s.%N)" >> $log
  if [ $((step % 10)) -eq 0 ]; then echo $step > $ck.tmp && mv $ck.tmp $ck && echo "ckpt $step" >> $log; fi
done
echo "done $(date +%s.%N)" >> $log"""
PACKAGES = ("provisioner", "pydantic", "pydantic_core", "annotated_types", "typing_extensions", "typing_inspection")


def _package_dir(workdir: Path) -> Path:
    """What ``provisioner node watch`` imports, copied from this interpreter (no pulumi, no SDKs)."""
    target = workdir / "node-python"
    if target.exists():
        return target
    target.mkdir()
    for name in PACKAGES:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None, name
        origin = Path(spec.origin)
        if origin.name == "__init__.py":
            shutil.copytree(origin.parent, target / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(origin, target / origin.name)
    # The watch reads the providers' facts (metadata service, spot notices); in a source checkout
    # provisioner.providers lives in ./providers (setup.py maps it), so it is copied into place.
    providers = importlib.util.find_spec("provisioner.providers")
    assert providers is not None and providers.origin is not None
    if not (target / "provisioner" / "providers").exists():
        shutil.copytree(
            Path(providers.origin).parent,
            target / "provisioner" / "providers",
            ignore=shutil.ignore_patterns("__pycache__"),
        )
    return target


class StandInLambdaFake(BackedLambdaFake):
    """Every VM gets the provisioner package, a stand-in nvidia-smi (a healthy H100) and kernel log."""

    def __init__(self, machines: Machines, package: Path, **kwargs: Any) -> None:
        super().__init__(machines, **kwargs)
        self.package = package

    def launch(self, request: Request) -> Response:
        before = set(self.machines.nodes)
        response = super().launch(request)
        for instance_id in [i for i in self.machines.nodes if i not in before]:
            root = self.machines.nodes[instance_id].root
            shutil.copytree(self.package, root / "opt" / "provisioner-test" / "python")
            state = root / STAND_INS.lstrip("/")
            state.mkdir(parents=True, exist_ok=True)
            (state / "smi.xml").write_text((GPU / "h100-sxm-80gb" / "nvidia-smi-q.xml").read_text())
            query = (GPU / "h100-sxm-80gb" / "nvidia-smi-query.csv").read_text().splitlines()
            kept = [line for line in query if not line.startswith(("$ ", "[exit "))]  # the capture's own lines
            (state / "query.csv").write_text("\n".join(kept) + "\n")
            (state / "kmsg").write_text("")
            for name, text in (("nvidia-smi", NVIDIA_SMI), ("dmesg", DMESG), ("provisioner", PROVISIONER)):
                path = root / "usr" / "local" / "bin" / name
                path.write_text(text)
                path.chmod(0o755)
        return response


def h100_plan(host_resources: tuple[int, int]) -> Plan:
    return lambda_plan(
        host_resources, instance_type="gpu_1x_h100_pcie", region="us-west-3", gpu_model="H100", gpu_memory_gib=80
    )


def _instance(fake: BackedLambdaFake, node: str) -> str:
    return next(
        iid for iid, body in fake.instances.items() if body["name"] == f"fb-{node}" and iid in fake.machines.nodes
    )


FAULTS = ("xid", "preempt")  # in this order, on the worker (fb-1)


def _hit(fake: StandInLambdaFake, fault: str) -> None:
    worker = _instance(fake, "fb-1")
    if fault == "xid":
        state = fake.machines.nodes[worker].root / STAND_INS.lstrip("/")
        with (state / "kmsg").open("a") as kmsg:
            kmsg.write(XID79)
        (state / "smi.xml").write_text((GPU / "degraded" / "ecc-error.xml").read_text())
    else:
        fake.set_status(worker, "preempted")
        fake.machines.stop(worker)


def test_two_faults_mid_job_are_healed_and_the_job_resumes_from_its_checkpoint_each_time(
    lab: Lab,  # noqa: F811
    host_resources: tuple[int, int],
) -> None:
    """One burst, one job, two faults on the worker one after the other (an XID, then a
    preemption), so the cluster is bought and booted once for both heals. The job keeps running
    on the batch node until the heal requeues it (~20 s after an XID, ~7 s after a preemption,
    measured), so 50 steps leave it unfinished when each requeue comes."""
    from provisioner.lifecycle.burst import BurstOptions, run_burst
    from provisioner.providers.http import RetryPolicy
    from provisioner.providers.lambda_.client import LambdaClient
    from provisioner.providers.lambda_.provider import LambdaProvider

    plan = h100_plan(host_resources)
    fake = StandInLambdaFake(lab.machines, _package_dir(lab.workdir), api_key=API_KEY)
    events: list[tuple[float, str, dict[str, Any]]] = []
    seen: dict[str, Any] = {"log": "", "faults": []}  # faults: (time, step at the fault) of each one
    finished = threading.Event()

    def emit(event: str, /, *, message: str, **fields: Any) -> None:
        events.append((time.time(), event, {"message": message, **fields}))

    def head_log() -> str:
        try:
            machine = fake.machines.nodes.get(_instance(fake, "fb-0"))
        except StopIteration:  # not launched yet, or gone
            return ""
        if machine is None or machine.leader() is None:  # its nspawn started, its init not yet
            return ""
        out = machine.exec("cat", "/var/tmp/toy.log", timeout=20)
        return out.stdout if out is not None and out.returncode == 0 else ""

    def inject() -> None:
        """The first fault once checkpoint 10 is written and the job is 3 steps past it; the second
        once the job's run after the requeue has taken 3 steps."""
        try:
            while not finished.is_set() and len(seen["faults"]) < len(FAULTS):
                text = head_log()
                if text:
                    seen["log"] = text
                runs = text.split("\nstart ")  # the job's runs: each requeue starts one
                this_run = re.findall(r"^step (\d+) ", runs[-1], re.M)
                if not seen["faults"]:
                    due = "ckpt 10" in text and bool(this_run) and int(this_run[-1]) >= 13
                else:
                    due = len(runs) == len(seen["faults"]) + 1 and len(this_run) >= 3
                if due:
                    seen["faults"].append((time.time(), int(this_run[-1])))
                    _hit(fake, FAULTS[len(seen["faults"]) - 1])
                time.sleep(0.5)
            while not finished.is_set():  # the log to the end
                seen["log"] = head_log() or seen["log"]
                time.sleep(0.5)
        except Exception as exc:  # reported by the assertions below
            seen["error"] = repr(exc)

    with serve(fake) as server:
        # At 100x Lambda's published limits (tests.fast_limits): its
        # 12 s launch spacing would add ~19 s to each replacement here, and its pacing has its
        # own contract tests.
        adapter = LambdaProvider(
            API_KEY,
            base_url=server.url,
            poll_interval_s=0.5,
            limits=LambdaClient.default_limits.scaled(100.0),
            retry=RetryPolicy(base_delay_s=0.01, max_delay_s=0.1),
        )
        key = lab.key(realize.cluster_secrets(plan.cluster_id))
        runtime = realize.Runtime(
            remote=SshRemote(key, lab.workdir / "known_hosts", ssh=str(lab.ssh_wrapper())),
            provider_for=lambda name: adapter,
            emit=emit,
            timeouts=realize.Timeouts(running_s=120, ready_s=120, deleted_s=120, interval_s=1, max_interval_s=2),
        )
        watcher = threading.Thread(target=inject, name="inject-fault", daemon=True)
        watcher.start()
        job = ["sbatch", "--nodes=2", "--output=/var/tmp/toy.out", "--open-mode=append", f"--wrap={TOY}"]
        try:
            # No GPUs here: the validation gate is skipped, as --skip-validation does; the health watch runs.
            code = run_burst([plan], job, BurstOptions(skip_validation=True, heal_poll_s=5), runtime)
        except BaseException:
            print(lab.node_logs())
            raise
        finally:
            finished.set()
            watcher.join(30)
        assert fake.instance_count() == 0
    lab.machines.settle()
    assert lab.machines.running() == [] and left_running(lab.machines.stopped) == []
    log = seen["log"]
    kinds = [event for _, event, _ in events]
    assert "error" not in seen, seen.get("error")
    assert code == 0, (kinds, log)
    replace = [fields for _, event, fields in events if event == "replace"]
    assert [r["node"] for r in replace] == ["fb-1", "fb-1"], (kinds, log)
    assert "xid.79" in replace[0]["reason"] or "ecc." in replace[0]["reason"], replace[0]
    assert "preempted" in replace[1]["reason"], replace[1]
    starts = re.findall(r"^start (\d+) ([\d.]+) (.*)$", log, re.M)
    assert len(starts) == 3 and starts[0][0] == "0" and re.search(r"^done ", log, re.M), log
    steps = [(int(s), float(t)) for s, t in re.findall(r"^step (\d+) ([\d.]+)$", log, re.M)]
    created = [t for t, event, f in events if event == "create" and f.get("node") == "fb-1"]
    replaced = [t for t, event, _ in events if event == "replaced"]
    assert len(created) == 2 and len(replaced) == 2, kinds
    for n, fault in enumerate(FAULTS):
        resumed_from, resumed_at = int(starts[n + 1][0]), float(starts[n + 1][1])
        assert sorted(starts[n + 1][2].split()) == ["fb-0", "fb-1"]  # the replacement took its name back
        before_requeue = [s for s, t in steps if float(starts[n][1]) < t < resumed_at]
        redone = max(before_requeue) - resumed_from
        assert resumed_from >= max(10, int(starts[n][0])) and 0 <= redone < 10, log  # lost: under one checkpoint
        fault_at = seen["faults"][n][0]
        for when, event, fields in events:  # the timeline, from the fault
            if fault_at - 1 <= when <= resumed_at and event not in ("job-output", "wait-running", "wait-ready"):
                print(f"  {when - fault_at:+7.1f} s {event}: {fields['message'][:150]}")
        print(
            f"heal[{fault}]: fault -> job running again {resumed_at - fault_at:.0f} s; replacement "
            f"create -> rejoined {replaced[n] - created[n]:.0f} s; steps redone {redone} (checkpoint every 10); "
            f"resumed from step {resumed_from}"
        )
