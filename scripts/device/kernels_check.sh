#!/usr/bin/env bash
# Issue 15's fused kernels in ONE device call. Run ON the GPU machine, `.deps` carried:
#   scripts/device/kernels_check.sh
# 1. builds kernels_test, lf-train-local and lf-worker (scripts/device/build.sh: sm_90a, Release);
# 2. kernels_test: every kernel against the model's ATen path at the Qwen2.5 0.5B/1.5B/7B shapes;
# 3. its microbenchmark (KBENCH lines: each op forward+backward, ATen vs fused, 4 x 2048 rows);
# 4. lf-train-local on each shape of SHAPES with LF_FUSED_KERNELS=1 and =0 back to back
#    (train_bench.sh's command lines: seq 2048 packed, micro-batch 4, bf16, no checkpointing);
# 5. LF_PROFILE_TRACE of the first shape with the kernels on (steps 6:7) and
#    scripts/bench/trace_summary.py --top 15 on it, to choose the next step from the trace;
# 6. bf16 logits against transformers with the kernels on (lf-worker check-logits).
# Prints the kernel test summary, the KBENCH lines, the A/B table and the logits check last.
# Raw: $OUT/{kernels_test,kernels_bench,build}.log, train_bench.log, train_results.jsonl,
# trace_summary.txt, trace-*.json.gz, check_logits.log.
# Env: SHAPES ("1.5b full,0.5b lora"), STEPS (15), ROUNDS (1: on/off pairs per shape),
#      RUN_TIMEOUT (180 s per training run), SKIP_BUILD=1, SKIP_TESTS=1,
#      TINY=1 (CPU dry run of steps 4-5 against the CPU build in build/, tiny model, no GPU).
set -uo pipefail
cd "$(dirname "$0")/../.."
export OUT=${OUT:-out/device}
mkdir -p "$OUT"
TINY=${TINY:-0}
t0=$(date +%s)
if [[ $TINY == 1 ]]; then
  export BUILD_DIR=${BUILD_DIR:-build} STEPS=${STEPS:-2}
else
  [[ -f scripts/device/env.sh ]] && . scripts/device/env.sh
  export BUILD_DIR=${BUILD_DIR:-build-device-last}
fi
export RUN_TIMEOUT=${RUN_TIMEOUT:-180} STEPS=${STEPS:-15}

if [[ $TINY != 1 && ${SKIP_BUILD:-0} != 1 ]]; then
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,memory.total --format=csv | tee "$OUT/gpu.txt"
  LF_DEVICE_TARGETS="kernels_test lf-train-local lf-worker" LF_DEVICE_SKIP_TESTS=1 \
    scripts/device/build.sh > "$OUT/build.log" 2>&1
  brc=$?
  grep -E "device/build|warning: |error" "$OUT/build.log" | head -30
  if [[ $brc != 0 ]]; then tail -40 "$OUT/build.log"; echo "kernels_check: build failed (rc $brc)"; exit 1; fi
fi
KT=$BUILD_DIR/tests/kernels/kernels_test
summary_tests="(not run)"
if [[ $TINY != 1 && ${SKIP_TESTS:-0} != 1 ]]; then
  echo "=== kernels_test ($(( $(date +%s) - t0 )) s)"
  timeout 400 "$KT" --gtest_output=json:"$OUT/kernels_test.json" > "$OUT/kernels_test.log" 2>&1
  trc=$?
  grep -E "^\[  (FAILED|PASSED|  OK) |Failure|error|note:" "$OUT/kernels_test.log" | head -40
  summary_tests="rc=$trc, $(grep -cE '^\[       OK \]' "$OUT/kernels_test.log") ok, $(grep -cE '^\[  FAILED  \] .*\(' "$OUT/kernels_test.log") failed"
  echo "=== kernels bench ($(( $(date +%s) - t0 )) s)"
  timeout 200 "$KT" --gtest_filter='*Bench*' --gtest_also_run_disabled_tests > "$OUT/kernels_bench.log" 2>&1
  grep KBENCH "$OUT/kernels_bench.log" || tail -5 "$OUT/kernels_bench.log"
fi

# Steps 4-5: bench_common.sh's run() / lf_args() / print_table (RES = $OUT/train_results.jsonl).
. scripts/bench/bench_common.sh
IFS=, read -ra AB <<< "${SHAPES:-1.5b full,0.5b lora}"
for r in "${AB[@]}"; do
  set -- $r
  for ((i = 0; i < ${ROUNDS:-1}; ++i)); do
    run "lf $1 $2 fused" env LF_FUSED_KERNELS=1 $LF $(lf_args $1 $2)
    run "lf $1 $2 aten" env LF_FUSED_KERNELS=0 $LF $(lf_args $1 $2)
  done
done
set -- ${AB[0]}
TR=$WORK/trace-$1-$2
rm -rf "$TR"
run "trace $1 $2 fused" env LF_FUSED_KERNELS=1 LF_PROFILE_TRACE="$TR" LF_PROFILE_TRACE_STEPS=${TRACE_STEPS:-6:7} \
  $LF $(STEPS=$(( STEPS > 8 ? STEPS : 8 )) lf_args $1 $2)
if ls "$TR"/trace-rank*.json > /dev/null 2>&1; then
  "$PY" scripts/bench/trace_summary.py --label "$1 $2 fused" --top 15 "$TR"/trace-rank0.json > "$OUT/trace_summary.txt" 2>&1
  gzip -c "$TR"/trace-rank0.json > "$OUT/trace-$1-$2-fused.json.gz"
else
  echo "kernels_check: no trace in $TR" | tee "$OUT/trace_summary.txt"
fi

# Step 6: logits vs transformers through the fused path (bf16 and fp32).
check_line="(not run)"
if [[ $TINY != 1 ]]; then
  W=$BUILD_DIR/src/worker/lf-worker
  { LF_FUSED_KERNELS=1 timeout 200 "$W" check-logits --model-config configs/models/qwen2.5-0.5b.json --out /tmp/lf_check05 \
      --batch 2 --seq 512 && timeout 200 "$PY" scripts/bench/model_check_logits.py /tmp/lf_check05; } > "$OUT/check_logits.log" 2>&1
  check_line=$(grep -E "^CHECK " "$OUT/check_logits.log" | tail -1)
  [[ -z $check_line ]] && check_line="(failed: $(tail -2 "$OUT/check_logits.log" | tr '\n' ' '))"
fi

echo "=== trace summary ($1 $2, kernels on)"
head -60 "$OUT/trace_summary.txt"
echo "=== kernels_test: $summary_tests"
[[ -f $OUT/kernels_bench.log ]] && grep KBENCH "$OUT/kernels_bench.log"
echo "=== logits vs transformers (kernels on): $check_line"
echo "=== A/B (LF_FUSED_KERNELS=1 vs 0), $(( $(date +%s) - t0 )) s in all"
print_table
"$PY" - "$RES" <<'PYEOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
best = {}
for r in rows:
    parts = r["label"].split()
    if parts[0] != "lf" or len(parts) != 4 or not r["data"]:
        continue
    best.setdefault((parts[1], parts[2]), {}).setdefault(parts[3], []).append(r["data"])
for (size, mode), by in best.items():
    if "fused" in by and "aten" in by:
        f = max(d["tokens_per_s"] for d in by["fused"]); a = max(d["tokens_per_s"] for d in by["aten"])
        mf = min(d.get("peak_memory_gib", 0) for d in by["fused"]); ma = min(d.get("peak_memory_gib", 0) for d in by["aten"])
        print(f"AB {size} {mode}: fused {f:,.0f} tok/s vs aten {a:,.0f} = x{f / a:.3f}; peak {mf:.1f} vs {ma:.1f} GiB")
PYEOF
