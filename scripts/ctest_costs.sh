#!/usr/bin/env bash
# Refreshes tests/ctest_costs.txt (the test durations scripts/test.sh seeds ctest's scheduler with)
# from the output of a ctest run of every test, e.g. a fresh-clone CI run's log:
#   bash .ci/run > ci.log 2>&1; scripts/ctest_costs.sh ci.log
# Each test's seconds in that run (ctest's own cost file averages over earlier runs, which is not
# what a fresh clone will see).
set -euo pipefail
LOG=${1:?usage: scripts/ctest_costs.sh CTEST_OUTPUT_LOG}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
# "  7/104 Test  #14: tokenizer_fixture_check ......   Passed   13.65 sec"
sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([A-Za-z0-9_.-]+) .* ([0-9.]+) sec$/\1 1 \2/p' "$LOG" | sort > "$ROOT/tests/ctest_costs.txt"
[[ -s $ROOT/tests/ctest_costs.txt ]] || { echo "ctest_costs: no test lines in $LOG"; exit 2; }
echo "ctest_costs: $(wc -l < "$ROOT/tests/ctest_costs.txt") tests written to tests/ctest_costs.txt"
