#!/usr/bin/env bash
# Configures and builds lf-train into build/ (ninja). LF_WITH_TORCH=ON builds
# lf-worker against the .venv's CPU libtorch (scripts/install_deps.sh --python).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
args=(-G Ninja -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE:-RelWithDebInfo})
if [[ "${LF_WITH_TORCH:-ON}" == ON && -x .venv/bin/python ]]; then
  TP=$(.venv/bin/python -c 'import torch; print(torch.utils.cmake_prefix_path)')
  args+=(-DLF_WITH_TORCH=ON "-DCMAKE_PREFIX_PATH=$TP" "-DLF_PYTHON=$PWD/.venv/bin/python")
fi
# ccache, when installed, makes rebuilds of the libtorch parts (and of other worktrees) cheap.
command -v ccache >/dev/null && args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
# The LLaMA-Factory reference stack (scripts/fixtures/setup_reference_venv.sh), when present.
[[ -x .venv-data/bin/python ]] && args+=("-DLF_REFERENCE_PYTHON=$PWD/.venv-data/bin/python")
cmake -S . -B "$BUILD_DIR" "${args[@]}" "$@" >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)"
