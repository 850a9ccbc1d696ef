"""Jobs that resume: what ``burst`` submits so a lost node requeues the job instead of failing it.

* Slurm, with a shared filesystem (``storage.shared``): ``sbatch --requeue --wait`` (slurm.conf
  keeps ``JobRequeue=1``), the job's command under ``srun --kill-on-bad-exit=1`` in the batch
  script, its output appended to a file on the shared filesystem that the head follows with
  ``tail -F`` (a requeued run appends to the same file). When a node is lost (the controller
  requeues the jobs of a node it replaces; Slurm itself requeues a batch job whose node fails),
  the job goes back to pending, runs again once the node is back, and loads its last checkpoint.
  Without a shared filesystem a requeued job would find neither its checkpoints nor its output,
  so the command runs as before: ``srun`` in the foreground, and a lost node fails it.
* Kubernetes: a Job with ``backoffLimit`` retries; a pod lost with its node is replaced by the
  Job controller. The script follows each new pod's log and exits with the last pod's status.
* Every job sees ``PROVISIONER_CHECKPOINT_DIR`` (the shared mount, else the node's checkpoint
  path) and ``PROVISIONER_CHECKPOINT_SHARED`` (1 when every node sees the same directory); with a
  ``checkpoint.remote`` in the spec, ``PROVISIONER_CHECKPOINT_REMOTE`` (its s3:// or gs:// URL).

Pure: argv and manifests from a Plan.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence

from provisioner.plan import Plan

K8S_BACKOFF_LIMIT = 3
"""Pod failures (a lost node's pod included) the Kubernetes Job absorbs before it fails."""


def shared_fs(plan: Plan) -> bool:
    return plan.spec.storage.shared.kind.value != "none"


def checkpoint_dir(plan: Plan) -> str:
    """Where the job keeps checkpoints: the shared mount when there is one, else node-local NVMe."""
    storage = plan.spec.storage
    return storage.shared.mount_path if shared_fs(plan) else storage.checkpoint_path


def checkpoint_env(plan: Plan) -> dict[str, str]:
    env = {
        "PROVISIONER_CHECKPOINT_DIR": checkpoint_dir(plan),
        "PROVISIONER_CHECKPOINT_SHARED": "1" if shared_fs(plan) else "0",
    }
    if plan.spec.checkpoint.remote:  # the object store the nodes copy the folder to (render/checkpoint_sync.py)
        env["PROVISIONER_CHECKPOINT_REMOTE"] = plan.spec.checkpoint.remote
    return env


def output_path(plan: Plan, name: str) -> str:
    return f"{plan.spec.storage.shared.mount_path}/.provisioner/{name}.out"


def slurm_requeue_argv(plan: Plan, command: Sequence[str], name: str) -> tuple[str, ...]:
    """``bash -c SCRIPT``: sbatch a requeueable job running ``srun COMMAND``, follow its output, exit
    with its status. Every word of COMMAND stays one word (quoted for the batch script's shell)."""
    out = output_path(plan, name)
    exports = ",".join(f"{key}={value}" for key, value in checkpoint_env(plan).items())
    inner = shlex.join(("srun", "--kill-on-bad-exit=1", "--", *command))
    sbatch = shlex.join(
        (
            "sbatch",
            "--wait",
            "--requeue",
            f"--nodes={len(plan.nodes)}",
            "--ntasks-per-node=1",
            f"--job-name={name}",
            "--open-mode=append",
            f"--output={out}",
            f"--export=ALL,{exports}",
            f"--wrap={inner}",
        )
    )
    q = shlex.quote
    script = (
        f"mkdir -p {q(out.rsplit('/', 1)[0])} && : > {q(out)} || exit 1\n"
        f"{sbatch} >/dev/null &\n"
        "job=$!\n"
        f"tail -n +1 -F --pid=$job {q(out)} 2>/dev/null &\n"
        "follow=$!\n"
        "wait $job; code=$?\n"
        "wait $follow\n"
        "exit $code\n"
    )
    return ("bash", "-c", script)


def k8s_follow_script(name: str, manifest: dict[str, object]) -> str:
    """Apply the Job, follow each new pod's log until the Job is Complete or Failed, exit with the
    last pod's container status (1 when there is none)."""
    q = shlex.quote
    pods = f"kubectl get pods -l job-name={name} --sort-by=.metadata.creationTimestamp -o jsonpath="
    conditions = q('{.status.conditions[?(@.status=="True")].type}')
    exit_code = q("{.items[-1:].status.containerStatuses[0].state.terminated.exitCode}")
    return (
        f"printf '%s' {q(json.dumps(manifest, separators=(',', ':')))} | kubectl apply -f - >/dev/null || exit $?\n"
        "seen=\n"
        "while :; do\n"
        f"  pod=$({pods}{q('{.items[-1:].metadata.name}')})\n"
        '  if [ -n "$pod" ] && [ "$pod" != "$seen" ]; then\n'
        '    kubectl logs -f "pod/$pod" --pod-running-timeout=15m; seen=$pod\n'
        "  fi\n"
        f'  case "$(kubectl get job {name} -o jsonpath={conditions})" in\n'
        "    *Complete* | *Failed*) break ;;\n"
        "  esac\n"
        "  sleep 2\n"
        "done\n"
        f"code=$({pods}{exit_code})\n"
        'exit "${code:-1}"\n'
    )


__all__ = [
    "K8S_BACKOFF_LIMIT",
    "checkpoint_dir",
    "checkpoint_env",
    "k8s_follow_script",
    "output_path",
    "shared_fs",
    "slurm_requeue_argv",
]
