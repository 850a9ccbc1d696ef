"""The toy training run a move carries (tests/boot/test_boot_local_move.py): its checkpoint bucket, the
store's keys in the environment the CLI runs in, the toy loop, and a two-offer catalog the size of this
host's nodes (Lambda's 8x H100 instances ranked first, RunPod's Instant Cluster second)."""

from __future__ import annotations

from typing import Any

from tests.boot.cli_lab import FACTS, OFFERS, host_offer

BUCKET = "ckpt-move"
STORE_KEYS = {"MOVE_STORE_KEY": "move-test-key", "MOVE_STORE_SECRET": "move-test-secret"}
"""The store's keys in the environment burst runs in (``checkpoint.credentials_env`` names them)."""
LAMBDA_TYPE = "gpu_8x_h100_sxm5"
# The toy training loop (the batch script, on the head): it starts from the checkpoint in its folder
# (restored there after a move), proves both nodes with srun, takes a step a second and writes a
# checkpoint every 10 steps. Its log stays on the head (/var/tmp), outside the copied folder. Like a
# data-parallel run, every step needs both nodes (an srun over both): once the worker is reclaimed
# the head alone takes no step, so no checkpoint newer than the fault reaches the store while the move
# is under way (the reclaim notice's second copy comes a minute after the first).
TOY = r"""d=${PROVISIONER_CHECKPOINT_DIR:?}; log=/var/tmp/toy.log
sudo -n mkdir -p "$d" && sudo -n chown -R "$(id -u):$(id -g)" "$d"
step=$(cat "$d/toy.ckpt" 2>/dev/null || echo 0)
echo "start $step $(date +%s.%N) $(srun -N2 hostname | sort | tr '\n' ' ')" >> $log
while [ $step -lt 60 ]; do
  until srun -N2 true 2>/dev/null; do sleep 1; done
  sleep 0.5; step=$((step + 1)); echo "step $step $(date +%s.%N)" >> $log
  if [ $((step % 10)) -eq 0 ]; then
    echo $step > "$d/toy.ckpt.tmp" && mv "$d/toy.ckpt.tmp" "$d/toy.ckpt" && echo "ckpt $step" >> $log
  fi
done
echo "done $(date +%s.%N)" >> $log"""


def catalog(cpus: int, memory_mib: int) -> dict[str, Any]:
    """Lambda's 8x H100 instances (cheaper: ranked first) and RunPod's 8x H100 Instant Cluster (the
    offer the CLI boot tests buy), each the size of this host's nodes (slurmd drains a node reporting
    less than its slurm.conf says)."""
    h100 = {"instance_type": LAMBDA_TYPE, "region": "us-west-3", "gpu_model": "H100", "gpus": 8, "gpu_memory_gib": 80}
    return {
        "as_of": "2026-11-20",
        "providers": {"lambda": FACTS, "runpod": FACTS},
        "offers": [
            host_offer({**OFFERS["lambda"], **h100}, cpus, memory_mib, price_per_hour_usd=2.40),
            host_offer(OFFERS["runpod"], cpus, memory_mib, price_per_hour_usd=3.10),
        ],
    }
