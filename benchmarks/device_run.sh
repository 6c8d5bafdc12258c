#!/usr/bin/env bash
# One short session on a machine with two GPUs (run through the device machine): the fabric probe
# with NCCL, normal and forced onto sockets, then torch.compile cold and warm. Results under $OUT.
set -Euo pipefail
OUT=${OUT:-/tmp/sparkc-device}
mkdir -p "$OUT"
cd "$(dirname "$0")/.." || exit 2
python3 -c 'import torch, sys; print(torch.__version__, torch.cuda.device_count(), sys.version.split()[0])' | tee "$OUT/versions.txt"
python3 -c 'import transformers; print("transformers", transformers.__version__)' >>"$OUT/versions.txt" 2>&1 || true

probe() { # LABEL PORT [VAR=VALUE ...]: two ranks, one per GPU, on this host
  local label=$1 port=$2 r
  shift 2
  for r in 0 1; do
    env "$@" RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
      SPARKC_PROBE_TIMEOUT=90 SPARKC_PROBE_BYTES=268435456 SPARKC_PROBE_ITERS=10 \
      timeout 120 python3 runtime/probe.py >"$OUT/probe-$label.$r.out" 2>"$OUT/probe-$label.$r.err" &
  done
  wait
  grep -h SPARKC_PROBE "$OUT/probe-$label".*.out
  grep -h 'via \|Using network' "$OUT/probe-$label".*.err | head -4
}
probe default 29611
probe socket 29612 NCCL_IB_DISABLE=1 NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1 NCCL_SOCKET_IFNAME=lo

cache=$(mktemp -d)
export TORCHINDUCTOR_CACHE_DIR=$cache/inductor TRITON_CACHE_DIR=$cache/triton
timeout 240 python3 benchmarks/compile_warm.py cold | tee "$OUT/compile-cold.json"
timeout 240 python3 benchmarks/compile_warm.py warm | tee "$OUT/compile-warm.json"
du -sh "$cache"/* | tee "$OUT/cache-size.txt"
