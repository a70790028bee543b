#!/usr/bin/env bash
# Issue 28's GPU acceptance (and install_gpu.sh's), run ON the GPU machine with `.deps` carried
# (scripts/device/fetch_debs.sh, plus .deps/base-src.tar.gz = `git archive BASE`):
#   scripts/device/plan_check.sh build      # install_gpu.sh --offline into /tmp/lf-head (timed), the
#                                           # head's kernels_test, the base build in /tmp/build-base
#   scripts/device/plan_check.sh gpu        # kernels_test, fp16's scaler, neat_packing varlen vs mask
#   scripts/device/plan_check.sh ab         # base vs head, 7B LoRA and 1.5B full, alternating
# Everything under /tmp survives between calls while the machine stays warm.
set -uo pipefail
cd "$(dirname "$0")/../.."
export OUT=${OUT:-out/device}
mkdir -p "$OUT"
export LF_DEPS=${LF_DEPS:-/tmp/lfdeps}
HEAD=/tmp/lf-head BASE_BUILD=/tmp/build-base
case "${1:-}" in
  build)
    t0=$(date +%s)
    BUILD_DIR=/tmp/build-head scripts/install_gpu.sh --offline --python python3 --prefix $HEAD 2>&1 |
      tee "$OUT/install_gpu.log" | grep -E "install_gpu|lf-train [0-9]|error" | head -20
    echo "INSTALL_GPU $(( $(date +%s) - t0 )) s (unpack of .deps/debs included)"
    . scripts/device/env.sh
    ninja -C /tmp/build-head -j16 kernels_test > "$OUT/kernels_build.log" 2>&1 || grep -E "error|FAILED" "$OUT/kernels_build.log" | head
    rm -rf /tmp/base-src; mkdir -p /tmp/base-src; tar xzf .deps/base-src.tar.gz -C /tmp/base-src
    ( cd /tmp/base-src && BUILD_DIR=$BASE_BUILD LF_DEVICE_TARGETS="lf-train-local lf-worker lf-train" \
        scripts/device/build.sh > "$OUT/base_build.log" 2>&1 ) || tail -20 "$OUT/base_build.log"
    ls -la $HEAD/bin $BASE_BUILD/src/train/lf-train-local ;;
  gpu)
    . scripts/device/env.sh
    nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader
    timeout 300 /tmp/build-head/tests/kernels/kernels_test > "$OUT/kernels_test.log" 2>&1; echo "kernels_test exit $?"
    grep -E "^\[  (PASSED|FAILED) " "$OUT/kernels_test.log"
    LF=$HEAD/bin/lf-train scripts/device/fp16_scaler_check.sh
    LF_TRAIN=$HEAD/bin/lf-train-local SHAPES="0.5b lora" STEPS=${STEPS:-15} scripts/bench/neat_bench.sh | tail -8 ;;
  ab)
    BASE_LF=$BASE_BUILD/src/train/lf-train-local HEAD_LF=$HEAD/bin/lf-train-local REPS=${REPS:-2} \
      scripts/device/commit_ab.sh | grep -E "^AB|rc=[1-9]" ;;
  *) echo "usage: $0 build|gpu|ab" >&2; exit 2 ;;
esac
