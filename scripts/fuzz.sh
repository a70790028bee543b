#!/usr/bin/env bash
# Builds the libFuzzer targets with clang + ASan/UBSan and runs the frame
# parser fuzzer. Usage: scripts/fuzz.sh [SECONDS] (default 600).
set -euo pipefail
cd "$(dirname "$0")/.."
SECONDS_TO_RUN=${1:-600}
scripts/install_deps.sh
CC=clang-14 CXX=clang++-14 cmake -S . -B build-fuzz -G Ninja -DLF_FUZZ=ON -DLF_BUILD_TESTS=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined,fuzzer-no-link" >/dev/null
cmake --build build-fuzz --target frame_fuzz
mkdir -p fuzz-corpus/frame
# Seed with real frames, so the fuzzer starts from valid messages.
build-fuzz/tests/fuzz/frame_fuzz -runs=0 fuzz-corpus/frame >/dev/null 2>&1 || true
exec build-fuzz/tests/fuzz/frame_fuzz -max_total_time="$SECONDS_TO_RUN" -print_final_stats=1 -max_len=4096 fuzz-corpus/frame
