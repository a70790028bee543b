#!/usr/bin/env bash
# Issue 7's sweep in ONE device call on a machine of 4 or 8 GPUs (kind nvidia-h200-x4 / -x8;
# carry .deps):
#   LF_DEVICE_TARGETS="lf-train lf-worker lf-comm-bench" LF_DEVICE_SKIP_TESTS=1 \
#     scripts/device/build.sh && scripts/bench/scale_sweep.sh
# For each shape (SHAPES, default "1.5b full,7b lora") and each GPU count in GPU_COUNTS (default
# 1 2 4 8, capped at the visible GPUs): lf-train DDP vs torchrun hf_reference.py (eager; with
# SWEEP_COMPILE=1 also --compile); then a 2-node run on this host (two agents x half the GPUs,
# NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1: the network transport) for both stacks; then all-reduce
# bus bandwidth through lf-train's comm layer vs ../shared/bench/ceilings.py at every count.
# Prints tokens/s totals and scaling efficiency (total / (N x the same stack's 1-GPU figure)).
# TINY=1: CPU dry run of the lf side (tiny model, GPU_COUNTS="1 2 4", workers over TCP).
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/bench/bench_common.sh
if [[ ${TINY:-0} == 1 ]]; then
  visible=4; default_counts="1 2 4"; export OMP_NUM_THREADS=1
else
  visible=$(nvidia-smi -L | wc -l); default_counts="1 2 4 8"
  nvidia-smi --query-gpu=name,clocks.sm,power.limit,memory.total --format=csv | tee -a "$LOG"
  nvidia-smi topo -m | tee -a "$LOG"
fi
COUNTS=()
for n in ${GPU_COUNTS:-$default_counts}; do (( n <= visible )) && COUNTS+=("$n"); done
echo "GPU counts: ${COUNTS[*]} (visible: $visible)" | tee -a "$LOG"

lf_run() {  # N SIZE MODE [key=value...]: one node, N workers
  local n=$1 size=$2 mode=$3; shift 3
  env NPROC_PER_NODE=$n MASTER_PORT=0 $LAUNCH $(lf_args $size $mode) output_dir=$WORK/out/sweep$n-$size-$mode "$@"
}
peer_run() {  # N SIZE MODE [--compile]
  local n=$1 size=$2 mode=$3; shift 3
  if (( n == 1 )); then "$PY" "$HF_REF" --model $size --mode $mode --seq 2048 --mbs 4 "$@"
  else torchrun --nproc_per_node $n "$HF_REF" --model $size --mode $mode --seq 2048 --mbs 4 "$@"; fi
}
for r in "${SHAPE_LIST[@]}"; do
  set -- $r
  for n in "${COUNTS[@]}"; do
    run "lf $n GPUs $1 $2" lf_run $n $1 $2
    [[ ${TINY:-0} == 1 ]] && continue
    run "peer $n GPUs $1 $2" peer_run $n $1 $2
    [[ ${SWEEP_COMPILE:-0} == 1 ]] && run "peer-compile $n GPUs $1 $2" peer_run $n $1 $2 --compile
  done
  top=${COUNTS[-1]}
  if (( top >= 2 )); then
    run "lf 2nodes $top GPUs $1 $2" two_nodes lf $top $1 $2
    [[ ${TINY:-0} != 1 ]] && run "peer 2nodes $top GPUs $1 $2" two_nodes peer $top $1 $2
  fi
done
for n in "${COUNTS[@]}"; do
  (( n < 2 )) && continue
  run "lf busbw $n GPUs" $LAUNCH launch --nproc-per-node $n --master-port 0 -- $COMM_BENCH --sizes-mib 16,256,1024
  [[ ${TINY:-0} != 1 ]] && run "torch busbw $n GPUs" torchrun --nproc_per_node $n "$SHARED_BENCH/ceilings.py"
done

# The summary: totals (lf-train reports one rank's tokens/s) and scaling vs the same stack's 1 GPU.
"$PY" - "$RES" <<'PYEOF'
import json, re, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
base, out = {}, []
for r in rows:
    m = re.match(r"(lf|peer|peer-compile) (2nodes )?(\d+) GPUs (.+)", r["label"])
    d = r["data"] or {}
    if not m:
        if "busbw" in r["label"]:
            keys = sorted(k for k in d if k.endswith("busbw_GBs"))
            out.append(f"{r['label']:34s} rc={r['rc']} " + " ".join(f"{k.split('_')[1]}={d[k]}" for k in keys))
        continue
    stack, two, n, shape = m.group(1), m.group(2), int(m.group(3)), m.group(4)
    if stack == "lf":
        total = d.get("tokens_per_s", 0) * n
    else:
        total = d.get("tok_s_total", 0)
    if n == 1 and not two:
        base[(stack, shape)] = total
    one = base.get((stack, shape))
    eff = f"{total / (n * one):.1%}" if one and total else "-"
    out.append(f"{r['label']:34s} rc={r['rc']:<3} total tok/s {total:>10,.0f}  scaling {eff}")
print("\n".join(out))
PYEOF
