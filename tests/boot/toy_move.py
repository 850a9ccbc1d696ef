"""The toy training run a move carries (tests/boot/test_boot_local_move.py): its checkpoint bucket, the
store's keys in the environment the CLI runs in, the toy loop, and a two-offer catalog the size of this
host's nodes (Lambda's 8x H100 instances ranked first, RunPod's Instant Cluster second)."""

from __future__ import annotations

from typing import Any

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


def offer(provider: str, cpus: int, memory_mib: int, **fields: Any) -> dict[str, Any]:
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


def catalog(cpus: int, memory_mib: int) -> dict[str, Any]:
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
    lambda_offer = offer(
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
    runpod_offer = offer(
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
