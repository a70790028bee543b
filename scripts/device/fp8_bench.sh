#!/usr/bin/env bash
# Issue 33's GPU acceptance (FP8 training), run ON the GPU machine (one H200) with `.deps` carried
# (scripts/device/fetch_debs.sh) and torchao's wheel in .deps/fp8 for the peer (not in the GPU image; its own
# folder, so lf_peer_wheels' installs of .deps/wheels never put it beside peft; make it here, on the CPU box):
#   python3 -m pip download torchao==0.18.0 --no-deps --only-binary=:all: -d .deps/fp8
#   scripts/device/fp8_bench.sh                     # build, GPU tests, every shape (~8 min warm)
#   SKIP_BUILD=1 SHAPES="7b lora" scripts/device/fp8_bench.sh   # one shape (SHAPES: "7b lora,1.5b full,7b full")
# 1. builds lf-train-local, lf-worker and kernels_test (scripts/device/build.sh);
# 2. kernels_test's Fp8Gpu tests: the fused cast kernel bit for bit against ATen's (itself torchao's), each
#    recipe's GEMMs through cuBLASLt against the CPU emulation, FP8GEMM throughput lines;
# 3. LLaMA-Factory's fp8 example (tests/fixtures/train/lf_examples, 2 steps of the tiny model) trains;
# 4. the issue-15 shapes (packed rows of 2048, micro-batch 4): 7B LoRA r16, 1.5B full, 7B full (ZeRO-3 on one
#    rank, checkpointing): lf-train bf16, lf-train fp8 (RECIPE, rowwise), and the peer with torchao float8 +
#    torch.compile (scripts/bench/hf_reference.py --fp8 RECIPE --compile), back to back.
# Prints FP8 lines per shape (tok/s, peak GiB, the ratios: goals >= 1.35x bf16 for 7B LoRA, >= 1.2x for the
# full shapes, >= 1.2x the peer; MFU against the dense FP8 peak 1979 TFLOP/s) for docs/BENCHMARKS.md; the
# runs' logs go to $OUT/train_bench.log, their JSON lines to $OUT/train_results.jsonl.
# The 200-step loss curves are scripts/device/fp8_curve.sh's.
# Env: STEPS (8), RUN_TIMEOUT (300 s a run), SKIP_BUILD, PEER (1), RECIPE (rowwise), SHAPES, OUT, GPU_TESTS (1; 0 skips
# step 2-3 when an earlier step of the lease ran them); LF_ROWS=0 runs the peer
# alone (its compile takes minutes: a call of its own, the lf-train rows from an earlier step of the lease); TRACE=1 adds a
# profiled 4-step FP8 run a shape (steps 3-4) and its top kernels with their aten ops (trace_summary.py --ops).
set -uo pipefail
cd "$(dirname "$0")/../.."
export OUT=${OUT:-out/device}
export STEPS=${STEPS:-8}
export RUN_TIMEOUT=${RUN_TIMEOUT:-300}
RECIPE=${RECIPE:-rowwise}
mkdir -p "$OUT"
if [[ ${SKIP_BUILD:-0} != 1 ]]; then
  LF_DEVICE_TARGETS="lf-train-local lf-worker kernels_test" scripts/device/build.sh > "$OUT/fp8_build.log" 2>&1 ||
    { grep -E "error|FAILED" "$OUT/fp8_build.log" | head -20; echo "fp8_bench: build failed"; exit 1; }
fi
export BUILD_DIR=${BUILD_DIR:-build-device}
SHAPES=${SHAPES:-7b lora,1.5b full,7b full}
. scripts/bench/bench_common.sh
HF_REF=scripts/bench/hf_reference.py  # the copy with --fp8
if [[ ${PEER:-1} == 1 ]] && ! "$PY" -c "import torchao.float8" 2>/dev/null; then
  whl=$(ls .deps/fp8/torchao-*.whl .deps/wheels/torchao-*.whl 2>/dev/null | head -1)
  if [[ -n $whl ]]; then  # on LF_TORCHAO_PATH, not PYTHONPATH: hf_reference.py imports it after peft
    "$PY" -m pip install --no-deps --quiet --target /tmp/torchao "$whl" && export LF_TORCHAO_PATH=/tmp/torchao
  else
    echo "fp8_bench: no .deps/wheels/torchao-*.whl: the peer rows are skipped (see this script's header)"; PEER=0
  fi
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,memory.total --format=csv,noheader | tee -a "$LOG"

if [[ ${LF_ROWS:-1} == 1 && ${GPU_TESTS:-1} == 1 ]]; then  # the GPU tests and LF's example: not in a peer-only step
  timeout 300 "$BUILD_DIR/tests/kernels/kernels_test" --gtest_filter='Fp8Gpu.*:Fp8CastKernel.*:Fp8OutputScale.*:Transpose.*:SwigluFp8.*:SwigluFp8Backward.*' > "$OUT/fp8_kernels_test.log" 2>&1
  echo "kernels_test Fp8Gpu/Fp8CastKernel/SwigluFp8(Backward) exit $?"; grep -E "^\[  (PASSED|FAILED) |Failure|FP8GEMM|FP8DGRAD|TRANSPOSE" "$OUT/fp8_kernels_test.log" | head -20

  ex=tests/fixtures/train/lf_examples/fp8__llama3_fp8_deepspeed_sft.yaml
  timeout 120 $LF $ex output_dir=$WORK/out/fp8-example max_steps=2 save_strategy=no > "$OUT/fp8_example.log" 2>&1
  echo "LF example fp8 (tiny, 2 steps): exit $? | $(grep -ohE "FP8 \([a-z]+\): .{0,160}" "$OUT/fp8_example.log" | head -1)"
fi

shape_args() {  # SIZE MODE: lf-train's keys for the shape
  if [[ $1 == 7b && $2 == full ]]; then
    echo "$(lf_args 1.5b full) model_name_or_path=$WORK/models/7b zero_stage=3 disable_gradient_checkpointing=false \
output_dir=$WORK/out/7b-full"
  else
    lf_args "$1" "$2"
  fi
}
field() { grep "\"label\": \"$1\"" "$RES" | tail -1 | "$PY" -c "import json,sys
d=(json.loads(sys.stdin.read() or '{}').get('data') or {})
print(d.get('$2', d.get('$3', '')))"; }
for shape in "${SHAPE_LIST[@]}"; do
  read -r size mode <<< "$shape"
  tag="$size-$mode"
  if [[ ${LF_ROWS:-1} == 1 ]]; then
    run "lf-bf16-$tag" $LF $(shape_args $size $mode) val_size=0 eval_strategy=no
    run "lf-fp8-$tag" $LF $(shape_args $size $mode) val_size=0 eval_strategy=no fp8=true fp8_recipe=$RECIPE
  fi
  if [[ ${TRACE:-0} == 1 ]]; then  # where the FP8 step's time goes: each top kernel and its launching aten op
    rm -rf "$WORK/trace-$tag"
    LF_PROFILE_TRACE=$WORK/trace-$tag LF_PROFILE_TRACE_STEPS=3:4 STEPS=4 run "lf-fp8-$tag-trace" $LF \
      $(STEPS=4 shape_args $size $mode) val_size=0 eval_strategy=no fp8=true fp8_recipe=$RECIPE
    "$PY" scripts/bench/trace_summary.py --label "fp8 $tag" --top 16 --ops "$WORK/trace-$tag/trace-rank0.json" |
      tail -70 | tee -a "$LOG"
  fi
  if [[ ${PEER:-1} == 1 ]]; then
    ck=""; [[ $size == 7b && $mode == full ]] && ck="--ckpt"
    run "peer-fp8-$tag" "$PY" "$HF_REF" --model $size --mode $mode --seq 2048 --mbs 4 --steps "$STEPS" $ck \
      --compile --fp8 "$RECIPE"
  fi
  "$PY" - "$tag" "$RECIPE" "$(field lf-bf16-$tag tokens_per_s tokens_per_s)" "$(field lf-bf16-$tag peak_memory_gib peak_mem_gib)" \
    "$(field lf-fp8-$tag tokens_per_s tokens_per_s)" "$(field lf-fp8-$tag peak_memory_gib peak_mem_gib)" \
    "$(field lf-fp8-$tag model_tflops_per_s model_tflops_per_s)" "$(field peer-fp8-$tag tok_s_per_gpu tok_s_per_gpu)" \
    "$(field peer-fp8-$tag peak_mem_gib peak_mem_gib)" <<'PYEOF'
import sys
tag, recipe, *v = sys.argv[1:]
bt, bm, ft, fm, tf, pt, pm = [float(x) if x else float("nan") for x in v]
goal = 1.35 if tag == "7b-lora" else 1.2
print(f"FP8 {tag} seq 2048 mbs 4 ({recipe}): lf bf16 {bt:.0f} tok/s {bm:.1f} GiB | lf fp8 {ft:.0f} tok/s {fm:.1f} GiB "
      f"({ft / bt:.2f}x bf16, goal >= {goal}; memory {fm / bm:.2f}x) | peer torchao fp8 + compile {pt:.0f} tok/s "
      f"{pm:.1f} GiB ({ft / pt:.2f}x, goal >= 1.2) | MFU vs FP8 dense 1979: {tf / 1979:.3f}")
PYEOF
done
grep -h "FP8 (" "$LOG" | tail -1 | cut -c1-240
