#!/usr/bin/env bash
# One test binary of the device build with a gtest filter, ON the GPU machine (after queue.sh's `build`):
#   scripts/device/gtest.sh kernels_test 'Transpose.*:Fp8OutputScale.*'
#   scripts/device/gtest.sh model_test 'HostCopies.*'
# Writes $OUT/<binary>.log; prints the binary's name with its PASSED / FAILED lines (queue.sh keeps them).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out/device}
BUILD=${BUILD_DIR:-build-device}
bin=${1:?"usage: gtest.sh BINARY FILTER"} filter=${2:?"usage: gtest.sh BINARY FILTER"}
mkdir -p "$OUT"
path=$(find "$BUILD/tests" -type f -name "$bin" -perm -u+x | head -1)
[[ -n $path ]] || { echo "$bin: not built under $BUILD/tests (queue.sh's QUEUE_TARGETS)"; exit 2; }
timeout 300 "$path" --gtest_filter="$filter" > "$OUT/$bin.log" 2>&1
rc=$?
grep -E "^\[  (PASSED|FAILED) |Failure|^[A-Z0-9_]+ " "$OUT/$bin.log" | sed "s/^/$bin: /" | head -20
echo "$bin '$filter': exit $rc"
exit $rc
