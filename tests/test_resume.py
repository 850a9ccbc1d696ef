"""Jobs that resume (lifecycle/resume.py): the scripts burst runs on the head, run by bash against
stand-in ``sbatch`` and ``kubectl`` that play a node lost mid-job.

Slurm: the stand-in appends a first run's lines to the --output file, "requeues" (a second run
appends, loading the checkpoint the first left in PROVISIONER_CHECKPOINT_DIR) and exits with the
job's status; the head follows the file with the real ``tail``. Kubernetes: the first pod is lost
with its node, the Job controller's second pod completes; the script follows both and exits with
the second's status.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from provisioner.lifecycle.burst import job_argv
from provisioner.lifecycle.resume import checkpoint_env
from tests.test_lifecycle_support import LAMBDA_SPEC, plans_for

SHARED_SPEC = LAMBDA_SPEC + "storage: {shared: {kind: nfs, size_gib: 100, mount_path: /shared}}\n"


def _stand_in(folder: Path, name: str, body: str) -> None:
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(f"#!{sys.executable}\nimport json, os, sys, time\nargs = sys.argv[1:]\n{body}", encoding="utf-8")
    path.chmod(0o755)


def _run(argv: tuple[str, ...], bin_dir: Path, root: Path) -> subprocess.CompletedProcess[str]:
    # The job's paths live under ROOT here (the script's absolute paths are the spec's).
    script = argv[2].replace("/shared/", f"{root}/shared/")
    return subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"},
    )


def test_slurm_job_is_requeueable_and_its_output_is_followed_across_the_requeue(tmp_path: Path) -> None:
    plan = plans_for(SHARED_SPEC, tmp_path)[0]
    hostile = ["python", "-c", "print('$(reboot)')", "it's; rm -rf /"]
    argv = job_argv(plan, hostile, "img")
    assert argv[:2] == ("bash", "-c")
    sbatch_line = next(line for line in argv[2].splitlines() if line.startswith("sbatch "))
    words = shlex.split(sbatch_line.removesuffix(" >/dev/null &"))
    assert words[:4] == ["sbatch", "--wait", "--requeue", "--nodes=2"]
    assert "--export=ALL,PROVISIONER_CHECKPOINT_DIR=/shared,PROVISIONER_CHECKPOINT_SHARED=1" in words
    wrap = next(w for w in words if w.startswith("--wrap="))
    assert shlex.split(wrap.removeprefix("--wrap=")) == ["srun", "--kill-on-bad-exit=1", "--", *hostile]
    output = next(w for w in words if w.startswith("--output=")).removeprefix("--output=")
    assert output == "/shared/.provisioner/burst-lc-lambda.out"

    root = tmp_path / "root"
    _stand_in(
        tmp_path / "bin",
        "sbatch",
        """
out = next(a for a in args if a.startswith("--output=")).split("=", 1)[1]
assert "--requeue" in args and "--wait" in args
with open(out, "a") as f:
    f.write("step 1\\nstep 2 checkpoint saved\\n"); f.flush()
    time.sleep(1.5)  # node lost; Slurm requeues the job; it runs again and appends
    f.write("resumed from step 2\\nstep 3\\n")
sys.exit(7)
""",
    )
    done = _run(argv, tmp_path / "bin", root)
    assert done.returncode == 7
    assert done.stdout == "step 1\nstep 2 checkpoint saved\nresumed from step 2\nstep 3\n"


def test_without_a_shared_filesystem_the_job_runs_under_srun(tmp_path: Path) -> None:
    plan = plans_for(LAMBDA_SPEC, tmp_path)[0]
    assert job_argv(plan, ["python", "t.py"], "img")[0] == "srun"
    assert checkpoint_env(plan) == {
        "PROVISIONER_CHECKPOINT_DIR": "/mnt/checkpoints",
        "PROVISIONER_CHECKPOINT_SHARED": "0",
    }


@pytest.mark.parametrize(("last_exit", "expected"), [("0", 0), ("5", 5), ("", 1)])
def test_kubernetes_script_follows_the_replacement_pod_and_exits_with_its_status(
    tmp_path: Path, last_exit: str, expected: int
) -> None:
    plan = plans_for(SHARED_SPEC.replace("control_plane: slurm", "control_plane: kubernetes"), tmp_path)[0]
    argv = job_argv(plan, ["python", "train.py"], "img")
    state = tmp_path / "polls"
    _stand_in(
        tmp_path / "bin",
        "kubectl",
        f"""
state = {str(state)!r}
polls = int(open(state).read()) if os.path.exists(state) else 0
if args[:3] == ["apply", "-f", "-"]:
    json.loads(sys.stdin.read())
elif args[:1] == ["logs"]:
    print("log of " + args[2])
elif args[:2] == ["get", "pods"] and "metadata.name" in args[-1]:
    open(state, "w").write(str(polls + 1))
    print("pod-a" if polls < 2 else "pod-b")  # pod-a was lost with its node; the Job made pod-b
elif args[:2] == ["get", "pods"]:
    print({last_exit!r})
elif args[:2] == ["get", "job"]:
    print("Complete" if polls >= 3 else "")
""",
    )
    slept = tmp_path / "slept"  # the script's pauses between polls, taken by a stand-in sleep at once
    (tmp_path / "bin" / "sleep").write_text(f'#!/bin/sh\necho "$@" >> {shlex.quote(str(slept))}\n', encoding="utf-8")
    (tmp_path / "bin" / "sleep").chmod(0o755)
    done = subprocess.run(
        list(argv),
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}"},
    )
    assert done.returncode == expected
    assert done.stdout == "log of pod/pod-a\nlog of pod/pod-b\n"
    assert slept.read_text(encoding="utf-8") == "2\n2\n"  # one pause after each poll that found the Job running


def test_the_kubernetes_job_passes_the_strict_kubernetes_schema(tmp_path: Path) -> None:
    import kubernetes_validate

    from provisioner.lifecycle.burst import k8s_job
    from tests.test_render_kubernetes import K8S_VERSION

    plan = plans_for(SHARED_SPEC.replace("control_plane: slurm", "control_plane: kubernetes"), tmp_path)[0]
    job = k8s_job(plan, ["python", "train.py"], "nvcr.io/nvidia/pytorch:25.01-py3")
    kubernetes_validate.validate(job, K8S_VERSION, strict=True)
    spec = job["spec"]
    assert isinstance(spec, dict)
    rule = spec["podFailurePolicy"]["rules"][0]
    rule["onPodCondition"] = rule.pop("onPodConditions")  # a misspelt field: strict validation refuses it
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, K8S_VERSION, strict=True)
