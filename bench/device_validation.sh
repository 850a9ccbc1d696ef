#!/usr/bin/env bash
# Issue 17, item 6: `provisioner node check` on a real GPU, alone and while a second process loads
# the same GPU, as ONE prepared run (about 3-4 minutes, at most 6). Everything lands under $OUT.
#
#   OUT=/path/to/empty/dir bash bench/device_validation.sh          # on the GPU machine, repo root
#   DRY_RUN=1 OUT=/tmp/dv PYTHON=/usr/bin/python3 bash bench/device_validation.sh   # no GPU: rehearsal
#
# The machine has torch, numpy, PyYAML, httpx, jinja2 and rich but not pydantic, pydantic-core,
# annotated-types, typing-inspection or platformdirs: their wheels (cp310, cp311, cp312,
# manylinux x86_64) travel in bench/wheels (git-ignored; carry it) and are installed into a
# private folder on PYTHONPATH, never into the machine's site-packages.
#
# Budget: each check has a timeout (150 / 100 / 80 s) and the third runs only when under 250 s
# have gone, so even a hung check leaves the whole script under 6 minutes.
# Runs, in order:
#   1. alone:  the node check with 60 s sustained on an idle GPU (expect healthy)
#   2. loaded: a background bf16 matmul loop on the same GPU (its pid is killed afterwards),
#              then the check with 20 s sustained (expect failed or degraded)
#   3. idle10: the load gone, 20 s idle, then the check with 10 s sustained (expect healthy)
# Outputs: env.txt, nvidia-smi-q.xml, node-check-<run>.json, summary-<run>.json, load.log,
# benchmarks-rows.md (Markdown rows for docs/benchmarks.md), device_validation.log.
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?set OUT to the folder the results go to}"
mkdir -p "$OUT"
exec > >(tee -a "$OUT/device_validation.log") 2>&1
started=$SECONDS
DRY="${DRY_RUN:-0}"
log() { echo "[$(date -u +%H:%M:%S) +$((SECONDS - started))s] $*"; }

# --- an interpreter with torch ------------------------------------------------------------------
PY="${PYTHON:-}"
if [ -z "$PY" ]; then
  for candidate in python3 python; do
    if command -v "$candidate" >/dev/null && "$candidate" -c "import torch" 2>/dev/null; then PY=$candidate; break; fi
  done
fi
PY="${PY:-python3}"
log "python: $(command -v "$PY") ($("$PY" -V 2>&1))"

# --- a fake GPU for the rehearsal ----------------------------------------------------------------
SUSTAINED_S=60; LOADED_S=20; IDLE_S=20; SHORT_S=10; LOAD_DEVICE=cuda; LOAD_N=8192
EXPECT_ALONE=healthy; EXPECT_LOADED=failed,degraded
if [ "$DRY" = "1" ]; then
  fake="$(mktemp -d)"
  fix="$PWD/tests/fixtures/gpu/h200-141gb"
  cat > "$fake/nvidia-smi" <<EOF
#!/bin/sh
case "\$1" in
  -q) cat "$fix/nvidia-smi-q.xml" ;;
  --query-gpu=*) cat "$fix/nvidia-smi-query.csv" ;;
  -L) echo "GPU 0: NVIDIA H200 (UUID: GPU-fake)" ;;
  *) exit 0 ;;
esac
EOF
  printf '#!/bin/sh\ncat "%s/dmesg-nvrm.txt"\n' "$fix" > "$fake/dmesg"
  chmod +x "$fake/nvidia-smi" "$fake/dmesg"
  export PATH="$fake:$PATH"
  SUSTAINED_S=2; LOADED_S=2; IDLE_S=1; SHORT_S=1; LOAD_DEVICE=cpu; LOAD_N=256
  EXPECT_LOADED=healthy  # no GPU: the burn-in is skipped, so nothing can be slow
  log "DRY_RUN: fake nvidia-smi and dmesg from $fix; CPU load; ${SUSTAINED_S} s sustained"
fi

# --- what the machine is --------------------------------------------------------------------------
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "host: $(hostname)"; echo "python: $("$PY" -V 2>&1)"
  "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available())" 2>&1
  nvidia-smi -L 2>&1
  nvidia-smi --query-gpu=name,driver_version,power.limit,clocks.max.sm,memory.total,pcie.link.gen.current,pcie.link.width.current --format=csv 2>&1
  nproc; free -g 2>/dev/null | head -2
} > "$OUT/env.txt"
nvidia-smi -q -x > "$OUT/nvidia-smi-q.xml" 2>&1 || true
cat "$OUT/env.txt"

# --- the project's missing libraries, from bench/wheels -------------------------------------------
DEPS="$(mktemp -d)/pydeps"
mkdir -p "$DEPS"
if ! "$PY" -m pip install -q --no-index --find-links bench/wheels --target "$DEPS" --no-warn-script-location \
      pydantic platformdirs 2>"$OUT/pip.err"; then
  log "pip could not install from bench/wheels ($(tail -1 "$OUT/pip.err")); unpacking the wheels directly"
  "$PY" - "$DEPS" bench/wheels/*.whl <<'EOF'
import sys, zipfile
target, wheels = sys.argv[1], sorted(sys.argv[2:])  # sorted: a newer pure-Python wheel unpacks last
tag = "cp%d%d" % sys.version_info[:2]
for wheel in wheels:
    parts = wheel.rsplit("/", 1)[-1][:-4].split("-")
    if parts[-3] in ("py3", tag) and (parts[-2] in ("none", tag)):
        zipfile.ZipFile(wheel).extractall(target)
EOF
fi
export PYTHONPATH="$DEPS:$PWD${PYTHONPATH:+:$PYTHONPATH}"
if ! "$PY" -c "import pydantic, provisioner.validation.node; print('pydantic', pydantic.VERSION)"; then
  log "the project does not import; giving up (see above)"; exit 1
fi

run_check() {  # label sustained_s expect timeout_s
  log "check '$1': ${2} s sustained (expect $3, at most ${4} s)"
  timeout "$4" "$PY" bench/bench_validation.py --sustained-s "$2" --label "$1" --expect "$3" \
    --out "$OUT/node-check-$1.json" --summary "$OUT/summary-$1.json" > "$OUT/bench-$1.txt" 2>&1
  log "check '$1' done (exit $?)"; cat "$OUT/bench-$1.txt"
  grep '^| ' "$OUT/bench-$1.txt" >> "$OUT/benchmarks-rows.md"
}

# --- 1. alone, on an idle GPU ---------------------------------------------------------------------
run_check alone "$SUSTAINED_S" "$EXPECT_ALONE" 150

# --- 2. while a second process loads the same GPU ---------------------------------------------------
LOAD_PY='
import sys, time, torch
device, n, stop_after, log = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
deadline = time.monotonic() + stop_after  # stops by itself even if nobody kills it
with open(log, "w") as out:
    while time.monotonic() < deadline:
        begin, products = time.perf_counter(), 0
        while time.perf_counter() - begin < 2.0:
            for _ in range(10):
                torch.mm(a, b)
            if device == "cuda":
                torch.cuda.synchronize()
            products += 10
        out.write("%.1f %.1f\n" % (time.monotonic(), 2.0 * n**3 * products / (time.perf_counter() - begin) / 1e12))
        out.flush()
'
"$PY" -c "$LOAD_PY" "$LOAD_DEVICE" "$LOAD_N" 150 "$OUT/load.log" &
LOAD_PID=$!
trap 'kill "$LOAD_PID" 2>/dev/null' EXIT
log "load started (pid $LOAD_PID, bf16 ${LOAD_N}^3 matmuls on $LOAD_DEVICE)"
for _ in $(seq 45); do [ -s "$OUT/load.log" ] && break; kill -0 "$LOAD_PID" 2>/dev/null || break; sleep 1; done
log "load running: $(tail -1 "$OUT/load.log" 2>/dev/null | awk '{print $2}') TFLOP/s on its own"
run_check loaded "$LOADED_S" "$EXPECT_LOADED" 100
kill "$LOAD_PID" 2>/dev/null; wait "$LOAD_PID" 2>/dev/null
log "load stopped (pid $LOAD_PID); its TFLOP/s every 2 s: $(awk '{print $2}' "$OUT/load.log" | tr '\n' ' ')"

# --- 3. idle, then a short check (the burst from idle again) -----------------------------------------
if [ $((SECONDS - started)) -lt 250 ]; then  # keeps the whole run under 6 minutes
  sleep "$IDLE_S"
  run_check idle10 "$SHORT_S" "$EXPECT_ALONE" 80
else
  log "skipping the idle10 check: $((SECONDS - started)) s used"
fi

log "all done in $((SECONDS - started)) s; rows for docs/benchmarks.md:"
cat "$OUT/benchmarks-rows.md"
