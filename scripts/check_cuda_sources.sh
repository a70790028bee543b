#!/usr/bin/env bash
# Syntax-checks the GPU-only sources (NCCL backend, its test, the comm bench, the worker's
# device code) on a machine without CUDA, before spending device time on a build: the CUDA
# runtime, CCCL, nvcc's crt headers and NCCL come from PyPI wheels (headers only; cached in
# $CACHE), torch's headers from the CPU wheel in .venv. g++ -fsyntax-only, no linking.
#   scripts/check_cuda_sources.sh [FILE...]
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE=${CACHE:-$HOME/.cache/lf-cuda-headers}
if [[ ! -d $CACHE/x/nvidia/nccl/include ]]; then
  mkdir -p "$CACHE"
  python3 -m pip download --no-deps -q -d "$CACHE" nvidia-nccl-cu13 nvidia-cuda-runtime-cu12 nvidia-cuda-nvcc-cu12 \
    nvidia-cuda-cccl-cu12
  for w in "$CACHE"/*.whl; do python3 -m zipfile -e "$w" "$CACHE/x/"; done
fi
# The CPU wheel ships c10/cuda's headers but not the one CMake generates for CUDA builds.
mkdir -p "$CACHE/stub/c10/cuda/impl"
printf '#pragma once\n#define C10_CUDA_BUILD_SHARED_LIBS\n' > "$CACHE/stub/c10/cuda/impl/cuda_cmake_macros.h"
TP=$(.venv/bin/python -c 'import torch, os; print(os.path.join(os.path.dirname(torch.__file__), "include"))')
FMT=$(ls -d build-torch/lf_fmt_shim 2>/dev/null || true)
files=("$@"); [[ ${#files[@]} == 0 ]] && files=(src/comm/nccl_communicator.cpp tests/comm/nccl_comm_test.cpp
  src/comm/comm_bench_main.cpp src/comm/process_group.cpp src/worker/device.cpp src/parallel/host_pinning_cuda.cpp)
rc=0
for f in "${files[@]}"; do
  g++ -std=c++20 -fsyntax-only -Wall -Wextra -DLF_WITH_CUDA -DLF_HAVE_NCCL=1 -Iinclude -Isrc/comm ${FMT:+-I$FMT} -I"$CACHE/stub" -I"$TP" \
    -I"$TP/torch/csrc/api/include" -I"$CACHE/x/nvidia/nccl/include" -I"$CACHE/x/nvidia/cuda_runtime/include" \
    -I"$CACHE/x/nvidia/cuda_nvcc/include" -I"$CACHE/x/nvidia/cuda_cccl/include" "$f" && echo "ok  $f" || { echo "FAIL $f"; rc=1; }
done
exit $rc
