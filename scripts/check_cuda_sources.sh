#!/usr/bin/env bash
# Checks the GPU-only sources on a machine without a GPU, before spending device time on a build:
#  1. every .cu under src/ compiles with nvcc for sm_90a (what the device build targets), with
#     ptxas' register / spill report (a spill fails the check: the kernels are meant to keep
#     everything in registers);
#  2. every LF_WITH_CUDA .cpp (NCCL backend, its test, the comm bench, the worker's device code,
#     the fused kernels' ops and tests, the model's dispatch) passes g++ -fsyntax-only.
# CUDA headers: the toolkit of the nvcc on PATH (CUDA 13 here), else PyPI wheels; NCCL's from
# its wheel (cached in $CACHE); torch's from the CPU wheel in .venv. No linking.
#   scripts/check_cuda_sources.sh [FILE...]     (.cu and .cpp files; default: all of them)
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${CACHE:-$HOME/.cache/lf-cuda-headers}
NVCC=$(command -v nvcc || true)
CUDA_INC=""
if [[ -n $NVCC ]]; then  # nvcc may be a wrapper script: also try CUDA_HOME and /usr/local/cuda
  for d in "${CUDA_HOME:-/nonexistent}/include" "$(dirname "$(readlink -f "$NVCC")")/../include" /usr/local/cuda/include; do
    if [[ -f $d/cuda_runtime.h ]]; then CUDA_INC=$d; break; fi
  done
fi
wheels=(nvidia-nccl-cu13)
[[ -z $CUDA_INC ]] && wheels+=(nvidia-cuda-runtime-cu12 nvidia-cuda-nvcc-cu12 nvidia-cuda-cccl-cu12)
if [[ ! -d $CACHE/x/nvidia/nccl/include || ( -z $CUDA_INC && ! -d $CACHE/x/nvidia/cuda_runtime/include ) ]]; then
  mkdir -p "$CACHE"
  python3 -m pip download --no-deps -q -d "$CACHE" "${wheels[@]}"
  for w in "$CACHE"/*.whl; do python3 -m zipfile -e "$w" "$CACHE/x/"; done
fi
if [[ -n $CUDA_INC ]]; then
  cuda_flags=(-I"$CUDA_INC" -I"$CUDA_INC/cccl")
else
  cuda_flags=(-I"$CACHE/x/nvidia/cuda_runtime/include" -I"$CACHE/x/nvidia/cuda_nvcc/include"
              -I"$CACHE/x/nvidia/cuda_cccl/include")
fi
# The CPU wheel ships c10/cuda's headers but not the one CMake generates for CUDA builds.
mkdir -p "$CACHE/stub/c10/cuda/impl"
printf '#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n' > "$CACHE/stub/c10/cuda/impl/cuda_cmake_macros.h"
TP=$(.venv/bin/python -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "include"))')
FMT=$(ls -d build-torch/lf_fmt_shim build/lf_fmt_shim 2>/dev/null | head -1 || true)

files=("$@")
if [[ ${#files[@]} == 0 ]]; then
  files=(src/comm/nccl_communicator.cpp tests/comm/nccl_comm_test.cpp src/comm/comm_bench_main.cpp
    src/comm/process_group.cpp src/worker/device.cpp src/model/fused_dispatch.cpp src/model/fp8_linear.cpp src/train/fp8_device.cpp src/parallel/host_pinning_cuda.cpp src/parallel/offload_copies_cuda.cpp src/train/step_graph_cuda.cpp
    tests/kernels/kernels_test.cpp tests/kernels/test_device_cuda.cpp tests/kernels/fp8_gpu_test.cpp)
  files+=($(ls src/kernels/*.cpp) $(find src -name '*.cu' | sort))
fi
rc=0
for f in "${files[@]}"; do
  if [[ $f == *.cu ]]; then
    if [[ -z $NVCC ]]; then echo "skip $f (no nvcc on PATH)"; continue; fi
    log=$(mktemp)
    if nvcc -std=c++20 -gencode=arch=compute_90a,code=sm_90a -Iinclude -Xptxas -v -Xcompiler=-Wall,-Wextra \
        -c "$f" -o /dev/null > "$log" 2>&1; then
      regs=$( (grep -oE "Used [0-9]+ registers" "$log" || true) | awk '{print $2}' | sort -n | tail -1)
      kernels=$(grep -c "Compiling entry function" "$log" || true)
      if grep -qE "[1-9][0-9]* bytes spill (stores|loads)|[1-9][0-9]* bytes stack frame" "$log"; then
        grep -B2 -E "[1-9][0-9]* bytes (spill|stack)" "$log" | head -12
        echo "FAIL $f (spills or stack frames above)"; rc=1
      else
        echo "ok  $f (nvcc sm_90a: $kernels kernels, at most ${regs:-?} registers, no spills)"
      fi
      grep -E "warning" "$log" | head -5 || true
    else
      grep -E "error|warning" "$log" | head -20
      echo "FAIL $f"; rc=1
    fi
    rm -f "$log"
    continue
  fi
  g++ -std=c++20 -fsyntax-only -Wall -Wextra -Wno-unused-parameter -DLF_WITH_CUDA -DLF_HAVE_NCCL=1 \
    -DLF_HAVE_FUSED_KERNELS -Iinclude -Isrc/comm -Isrc/kernels -Itests/kernels ${FMT:+-I$FMT} -I"$CACHE/stub" -I"$TP" \
    -I"$TP/torch/csrc/api/include" -I"$CACHE/x/nvidia/nccl/include" "${cuda_flags[@]}" "$f" \
    && echo "ok  $f" || { echo "FAIL $f"; rc=1; }
done
exit $rc
