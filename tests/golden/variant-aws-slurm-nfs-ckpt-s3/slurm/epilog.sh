#!/bin/bash
# Slurm epilog for cluster llm-pretrain: runs as root on each node after every job.
# If a node validator is installed and reports a fault, drain this node so no further job lands
# on bad hardware. The epilog itself always exits 0: a failing epilog would drain the node with
# a less useful reason.
VALIDATOR="${PROVISIONER_VALIDATOR:-/usr/local/bin/provisioner-validate-node}"
SCONTROL="${PROVISIONER_SCONTROL:-scontrol}"
NODE="${SLURMD_NODENAME:-$(hostname -s)}"

if [ -x "$VALIDATOR" ]; then
    if ! output=$(timeout 300 "$VALIDATOR" --after-job "${SLURM_JOB_ID:-0}" 2>&1); then
        reason=$(printf '%s' "$output" | tail -n 1 | tr -cd '[:alnum:] ._:=/-' | cut -c1-120)
        "$SCONTROL" update nodename="$NODE" state=drain reason="validator failed: ${reason:-unknown}"
        logger -t provisioner-epilog "drained $NODE after job ${SLURM_JOB_ID:-?}: ${reason:-unknown}"
    fi
fi
exit 0
