#!/usr/bin/env bash
# Issue 15's table rows in one device call, each change A/B'd beside its peer. Run ON the GPU
# machine, `.deps` carried:
#   KNOB=LF_FUSED_LORA CKPT=1 SHAPES="7b lora" scripts/device/speed_row.sh
# 1. scripts/device/graphs_check.sh with KNOB: lf-train-local with KNOB=1 (the defaults: the
#    table's lf-train figure) and KNOB=0 back to back, per-step losses compared (builds first
#    unless SKIP_BUILD=1);
# 2. the compile peer on the same shapes (../shared/bench/hf_reference.py --compile, and --ckpt
#    with CKPT=1), unless PEER=0.
# Appends to $OUT/train_bench.log and $OUT/train_results.jsonl (bench_common.sh); prints the
# GRAPHS_AB lines and the peers' RESULT lines.
# Env: KNOB, SHAPES, CKPT, PEER (1), SKIP_BUILD, STEPS (15), RUN_TIMEOUT (420 s per run), TRACE=1.
set -uo pipefail
cd "$(dirname "$0")/../.."
export OUT=${OUT:-out/device}
export RUN_TIMEOUT=${RUN_TIMEOUT:-420}
scripts/device/graphs_check.sh | grep -E "^GRAPHS_AB|graphs_check: build failed|^top kernels|^RESULT|ms  " | cut -c1-300
[[ ${PEER:-1} == 1 ]] || exit 0
. scripts/bench/bench_common.sh
IFS=, read -ra ROWS <<< "${SHAPES:-0.5b lora}"
for r in "${ROWS[@]}"; do
  set -- $r
  ck=""; [[ ${CKPT:-0} == 1 ]] && ck="--ckpt"
  run "hf-compile$ck $1 $2" "$PY" "$HF_REF" --model $1 --mode $2 --seq 2048 --mbs 4 --compile $ck > /dev/null
  grep -h "^RESULT" "$OUTD/cur.log" | cut -c1-400
done
rm -f "$OUTD/cur.log"
