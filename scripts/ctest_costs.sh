#!/usr/bin/env bash
# Refreshes tests/ctest_costs.txt (the test durations scripts/test.sh seeds ctest's scheduler with)
# from a build folder whose ctest ran every test, e.g. a fresh-clone CI run:
#   scripts/ctest_costs.sh /tmp/ci-check/build
# Only each test's last measured seconds are kept (count 1), the failed-tests list is dropped.
set -euo pipefail
BUILD=${1:?usage: scripts/ctest_costs.sh BUILD_DIR}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SRC=$BUILD/Testing/Temporary/CTestCostData.txt
[[ -f $SRC ]] || { echo "ctest_costs: $SRC not found (run ctest in $BUILD first)"; exit 2; }
awk '/^---/ {exit} NF == 3 {printf "%s 1 %.1f\n", $1, $3}' "$SRC" | sort > "$ROOT/tests/ctest_costs.txt"
echo "ctest_costs: $(wc -l < "$ROOT/tests/ctest_costs.txt") tests written to tests/ctest_costs.txt"
