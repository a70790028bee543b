#!/usr/bin/env bash
# Issue 32's GPU acceptance in one device call (one H200), run ON the GPU machine with `.deps` carried
# (scripts/device/fetch_debs.sh) and bitsandbytes' wheel in .deps/wheels (not in the GPU image; make
# it here, on the CPU box, before the call):
#   python3 -m pip download bitsandbytes==0.50.2 --no-deps --only-binary=:all: \
#     --platform manylinux_2_24_x86_64 -d .deps/wheels
#   scripts/device/qlora_check.sh                 # build, GPU tests, the benchmark rows, the floor
#   SKIP_BUILD=1 STEPS=10 scripts/device/qlora_check.sh
# 1. builds lf-train-local, lf-worker and kernels_test (scripts/device/build.sh);
# 2. kernels_test's Dequant4bit tests: the dequantization kernel bit for bit against the exact path
#    at Qwen2.5-7B's projection shapes, a QLoRA projection fused vs ATen, the few-row fused GEMM vs
#    dequantize + cuBLAS, and both paths' times per shape (QGEMM lines: LF_QUANT_GEMM's auto rule);
# 3. 7B QLoRA r16 (NF4, double quantization), packed rows of 2048, micro-batch 4, without and with
#    activation checkpointing: lf-train, then the peer (scripts/bench/hf_reference.py --qlora: peft +
#    bitsandbytes with LLaMA-Factory's settings), back to back;
# 4. the memory floor: Qwen2.5-7B shape, seq 2048, checkpointing, micro-batch 1 (goal: peak <= 8 GiB).
# Prints QLORA lines (tokens/s, peak GiB, lf / peer ratio; goal >= 2x at <= the peer's peak) and
# FLOOR; the runs' logs go to $OUT/train_bench.log, their JSON lines to $OUT/train_results.jsonl.
# Env: STEPS (12), RUN_TIMEOUT (420 s a run), SKIP_BUILD, PEER (1), OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
export OUT=${OUT:-out/device}
export STEPS=${STEPS:-12}
export RUN_TIMEOUT=${RUN_TIMEOUT:-420}
mkdir -p "$OUT"
if [[ ${SKIP_BUILD:-0} != 1 ]]; then
  LF_DEVICE_TARGETS="lf-train-local lf-worker kernels_test" scripts/device/build.sh > "$OUT/qlora_build.log" 2>&1 ||
    { grep -E "error|FAILED" "$OUT/qlora_build.log" | head -20; echo "qlora_check: build failed"; exit 1; }
fi
export BUILD_DIR=${BUILD_DIR:-build-device}
. scripts/bench/bench_common.sh
HF_REF=scripts/bench/hf_reference.py  # the copy with --qlora
# bitsandbytes for the peer, from the carried wheel (the image has peft and transformers).
if ! "$PY" -c "import bitsandbytes" 2>/dev/null; then
  whl=$(ls .deps/wheels/bitsandbytes-*.whl 2>/dev/null | head -1)
  if [[ -n $whl ]]; then
    "$PY" -m pip install --no-deps --quiet --target /tmp/pyext "$whl" && export PYTHONPATH=/tmp/pyext${PYTHONPATH:+:$PYTHONPATH}
  else
    echo "qlora_check: no .deps/wheels/bitsandbytes-*.whl: the peer rows are skipped (see this script's header)"
    PEER=0
  fi
fi
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,memory.total --format=csv,noheader | tee -a "$LOG"

timeout 300 "$BUILD_DIR/tests/kernels/kernels_test" --gtest_filter='Dequant4bit.*' > "$OUT/qlora_kernels_test.log" 2>&1
echo "kernels_test Dequant4bit exit $?"; grep -E "^\[  (PASSED|FAILED) |Failure|QGEMM" "$OUT/qlora_kernels_test.log" | head -30

q="quantization_bit=4 quantization_type=nf4 double_quantization=true"
lf_row() {  # LABEL CKPT MBS
  local ck=true; [[ $2 == 1 ]] && ck=false
  run "$1" $LF $(lf_args 7b lora) $q disable_gradient_checkpointing=$ck per_device_train_batch_size=$3 val_size=0 eval_strategy=no \
    output_dir=$WORK/out/qlora-$1
}
peer_row() {  # LABEL CKPT
  local ck=""; [[ $2 == 1 ]] && ck="--ckpt"
  run "$1" "$PY" "$HF_REF" --model 7b --mode lora --qlora --seq 2048 --mbs 4 --steps "$STEPS" $ck
}
field() { grep "\"label\": \"$1\"" "$RES" | tail -1 | "$PY" -c "import json,sys
d=(json.loads(sys.stdin.read() or '{}').get('data') or {})
print(d.get('$2', d.get('$3', '')))"; }
for ck in 0 1; do
  lf_row "lf-qlora-ckpt$ck" $ck 4
  [[ ${PEER:-1} == 1 ]] && peer_row "peer-qlora-ckpt$ck" $ck
  lt=$(field "lf-qlora-ckpt$ck" tokens_per_s tokens_per_s) lm=$(field "lf-qlora-ckpt$ck" peak_memory_gib peak_mem_gib)
  pt=$(field "peer-qlora-ckpt$ck" tok_s_per_gpu tok_s_per_gpu) pm=$(field "peer-qlora-ckpt$ck" peak_mem_gib peak_mem_gib)
  "$PY" - "$ck" "$lt" "$lm" "$pt" "$pm" <<'PYEOF'
import sys
ck, lt, lm, pt, pm = sys.argv[1:]
f = lambda s: float(s) if s else float("nan")
lt, lm, pt, pm = map(f, (lt, lm, pt, pm))
print(f"QLORA 7b r16 seq 2048 mbs 4 ckpt {ck}: lf-train {lt:.0f} tok/s {lm:.1f} GiB | peft+bnb {pt:.0f} tok/s "
      f"{pm:.1f} GiB | ratio {lt / pt:.2f}x (goal >= 2x) at {lm / pm:.2f}x the peak memory (goal <= 1)")
PYEOF
done
lf_row "lf-qlora-floor" 1 1
fm=$(field "lf-qlora-floor" peak_memory_gib peak_mem_gib)
echo "FLOOR 7b QLoRA seq 2048 ckpt mbs 1: peak ${fm:-?} GiB (goal <= 8)"
grep -h "4-bit base" "$LOG" | tail -1 | cut -c1-200
