#!/usr/bin/env bash
# Issue 6's GPU acceptance in ONE device call on nvidia-h200-x2 (carry .deps):
#   LF_DEVICE_TARGETS="lf-train lf-worker lf-comm-bench nccl_comm_test" LF_DEVICE_SKIP_TESTS=1 \
#     scripts/device/build.sh && scripts/bench/ddp_bench.sh [comm] [startup] [equiv] [scale] [compile]
# comm    : nccl_comm_test; all-reduce bus bandwidth through lf-train's comm layer (lf-comm-bench
#           under lf-train launch) vs ../shared/bench/ceilings.py (raw NCCL through torch), 16 MiB/1 GiB
# startup : launch -> first all-reduce, 2 workers: lf-train + lf-comm-bench vs torchrun + torchrun_startup.py
# equiv   : bf16, 0.5B full, 20 steps, global batch 8 (1 GPU x mbs 4 x accum 2 vs 2 GPUs x 2 x 2, and
#           2 nodes on one host: two agents with one GPU each, NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1):
#           per-step loss relative differences (tolerance EQUIV_REL, provisional)
# scale   : 1.5B full and 7B LoRA, seq 2048 packed, mbs 4: lf-train on 1 and 2 GPUs (and 2 GPUs over
#           the network transport, also with bf16 gradients on the wire) vs torchrun hf_reference.py
#           eager on 1 and 2 GPUs; scaling efficiency
# lf      : only lf-train's rows of scale (1 GPU, 2 GPUs, 2 GPUs with bf16 on the wire)
# phases  : lf-train 1 vs 2 GPUs with LF_PROFILE_PHASES=1 (device synced between phases): backward
#           with communication vs without, and what stays exposed after backward (ddp_finish)
# trace   : lf-train 1 vs 2 GPUs with LF_PROFILE_TRACE (Kineto, steps 8-9, no added syncs), summarised
#           by scripts/bench/trace_summary.py (compute vs NCCL streams, idle gaps, exposed tail);
#           the gzipped traces go to $OUT/traces.tgz when they fit the device tool's 16 MiB
# envs    : lf-train on 2 GPUs once per setting in ENVS (";"-separated, e.g.
#           ENVS="NCCL_MAX_NCHANNELS=8;NCCL_MAX_NCHANNELS=16"): NCCL tuning without a rebuild
# peer    : the peer (hf_reference.py eager) alone on 1 and 2 GPUs (torchrun), for same-lease ratios
# compile : the peer with --compile on 1 and 2 GPUs (minutes per model: last)
# SHAPES="1.5b full,7b lora" (the default) picks the shapes of scale and compile, so the GPU
# batch can be split over several device calls.
# TINY=1 runs the lf side on the CPU with the tiny model (2 workers over the TCP backend).
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/bench/bench_common.sh
EQUIV_REL=${EQUIV_REL:-0.02}
parts=("$@"); [[ ${#parts[@]} == 0 ]] && parts=(comm startup equiv scale compile)

# lf_ddp NPROC SIZE MODE [key=value ...]: one node, NPROC workers, through the real launcher;
# LF_ENV: extra environment, TAG: what sets its output folder apart.
lf_ddp() {
  local n=$1 size=$2 mode=$3; shift 3
  env ${LF_ENV:-} NPROC_PER_NODE=$n MASTER_PORT=0 $LAUNCH $(lf_args $size $mode) \
    output_dir=$WORK/out/ddp$n${TAG:+-$TAG}-$size-$mode "$@"
}
lf_ddp_net() { LF_ENV="$NET" TAG=net lf_ddp "$@"; }
lf_ddp_phases() { LF_ENV="LF_PROFILE_PHASES=1" TAG=phases lf_ddp "$@"; }
lf_one_and_two() {  # SIZE MODE: the 1-GPU and 2-GPU rows every scaling comparison starts from
  run "lf 1 GPU $1 $2" lf_ddp 1 $1 $2
  run "lf 2 GPUs $1 $2 (per rank)" lf_ddp 2 $1 $2
}

compare_losses() {  # REF_DIR DIR...: per-step relative loss difference vs REF
  "$PY" - "$EQUIV_REL" "$@" <<'PYEOF'
import json, sys
tol, ref, others = float(sys.argv[1]), sys.argv[2], sys.argv[3:]
load = lambda d: [json.loads(l)["loss"] for l in open(d + "/trainer_log.jsonl") if '"loss"' in l]
a = load(ref)
runs = []
for d in others:
    b = load(d)
    rel = [abs(x - y) / abs(x) for x, y in zip(a, b)] or [float("inf")]
    runs.append({"run": d, "steps": len(b), "max_rel_diff": max(rel), "mean_rel_diff": sum(rel) / len(rel),
                 "pass": len(a) == len(b) and max(rel) <= tol})
print("EQUIV " + json.dumps({"reference": ref, "tolerance": tol, "pass": all(r["pass"] for r in runs),
                             "max_rel_diff": max(r["max_rel_diff"] for r in runs),
                             "mean_rel_diff": max(r["mean_rel_diff"] for r in runs), "runs": runs}))
PYEOF
}

[[ ${TINY:-0} != 1 ]] && nvidia-smi --query-gpu=name,clocks.sm,power.limit,memory.total --format=csv | tee -a "$LOG"
for part in "${parts[@]}"; do
  case $part in
    comm)
      [[ -x $BUILD/tests/comm/nccl_comm_test ]] && run "nccl_comm_test" $BUILD/tests/comm/nccl_comm_test
      run "lf comm busbw" $LAUNCH launch --nproc-per-node 2 --master-port 0 -- $COMM_BENCH --sizes-mib 16,256,1024
      run "lf comm busbw (network)" env $NET $LAUNCH launch --nproc-per-node 2 --master-port 0 -- $COMM_BENCH --sizes-mib 16,1024
      run "torch ceilings" torchrun --nproc_per_node 2 "$SHARED_BENCH/ceilings.py" ;;
    startup)
      run "lf launch->first all-reduce" env T0=$(date +%s.%N) $LAUNCH launch --nproc-per-node 2 --master-port 0 -- \
        $COMM_BENCH --sizes-mib 1 --iters 1
      run "torchrun launch->first all-reduce" env T0=$(date +%s.%N) torchrun --nproc_per_node 2 \
        "$SHARED_BENCH/torchrun_startup.py" ;;
    equiv)
      E="max_steps=20 save_strategy=no gradient_accumulation_steps=2 learning_rate=1e-4"
      run "equiv 1 GPU" lf_ddp 1 0.5b full $E per_device_train_batch_size=4
      run "equiv 2 GPUs" lf_ddp 2 0.5b full $E per_device_train_batch_size=2
      run "equiv 2 nodes" two_nodes lf 2 0.5b full $E per_device_train_batch_size=2 output_dir=$WORK/out/equiv-2node
      run "equiv compare" compare_losses $WORK/out/ddp1-0.5b-full $WORK/out/ddp2-0.5b-full $WORK/out/equiv-2node ;;
    scale)
      for r in "${SHAPE_LIST[@]}"; do
        set -- $r
        lf_one_and_two $1 $2
        run "lf 2 GPUs network $1 $2 (per rank)" lf_ddp_net 2 $1 $2
        run "lf 2 GPUs network bf16 wire $1 $2 (per rank)" lf_ddp_net 2 $1 $2 ddp_reduce_dtype=bf16 \
          output_dir=$WORK/out/ddp2-net-bf16-$1-$2
        run "hf eager 1 GPU $1 $2" "$PY" "$HF_REF" --model $1 --mode $2 --seq 2048 --mbs 4
        run "hf eager 2 GPUs $1 $2" torchrun --nproc_per_node 2 "$HF_REF" --model $1 --mode $2 --seq 2048 --mbs 4
      done ;;
    lf)  # lf-train's side of scale alone (1 vs 2 GPUs, fp32 and bf16 wire): re-measure after a change
      for r in "${SHAPE_LIST[@]}"; do
        set -- $r
        lf_one_and_two $1 $2
        run "lf 2 GPUs bf16 wire $1 $2 (per rank)" lf_ddp 2 $1 $2 ddp_reduce_dtype=bf16
      done ;;
    phases)  # LF_PROFILE_PHASES=1: forward / backward / DDP finish / optimizer medians, 1 vs 2 GPUs
      for r in "${SHAPE_LIST[@]}"; do
        set -- $r
        run "lf phases 1 GPU $1 $2" lf_ddp_phases 1 $1 $2
        run "lf phases 2 GPUs $1 $2" lf_ddp_phases 2 $1 $2
      done ;;
    trace)
      T=$WORK/traces; rm -rf "$T"
      for r in "${SHAPE_LIST[@]}"; do
        set -- $r
        for n in 1 2; do
          dir=$T/$1-$2-gpus$n
          LF_ENV="LF_PROFILE_TRACE=$dir LF_PROFILE_TRACE_STEPS=8:9" TAG=trace run "lf trace $n GPU $1 $2" lf_ddp $n $1 $2
          run "trace summary $n GPU $1 $2" "$PY" scripts/bench/trace_summary.py --top 12 --label "$n GPU $1 $2" \
            "$dir"/trace-rank*.json
        done
      done
      gzip -r -9 "$T" && tar -C "$WORK" -cf "$OUTD/traces.tar" traces
      [[ $(stat -c %s "$OUTD/traces.tar") -lt 16000000 ]] || { echo "traces.tar is over 16 MB: left out"; rm "$OUTD/traces.tar"; } ;;
    envs)
      IFS=';' read -ra SETTINGS <<< "${ENVS:-NCCL_MAX_NCHANNELS=8}"
      for setting in "${SETTINGS[@]}"; do
        for r in "${SHAPE_LIST[@]}"; do
          set -- $r
          LF_ENV="$setting" TAG=env run "lf 2 GPUs $setting $1 $2 (per rank)" lf_ddp 2 $1 $2
        done
      done ;;
    peer)
      for r in "${SHAPE_LIST[@]}"; do
        set -- $r
        run "hf eager 1 GPU $1 $2" "$PY" "$HF_REF" --model $1 --mode $2 --seq 2048 --mbs 4
        run "hf eager 2 GPUs $1 $2" torchrun --nproc_per_node 2 "$HF_REF" --model $1 --mode $2 --seq 2048 --mbs 4
      done ;;
    compile)
      for r in "${SHAPE_LIST[@]}"; do
        set -- $r
        run "hf compile 1 GPU $1 $2" "$PY" "$HF_REF" --model $1 --mode $2 --seq 2048 --mbs 4 --compile
        run "hf compile 2 GPUs $1 $2" torchrun --nproc_per_node 2 "$HF_REF" --model $1 --mode $2 --seq 2048 --mbs 4 --compile
      done ;;
    *) echo "unknown part $part"; exit 2 ;;
  esac
done
print_table
echo "lf rows marked (per rank) report one rank's tokens/s: total = 2 x that; scaling = total / (2 x 1-GPU)."
