#!/usr/bin/env bash
# Several device scripts in one device call, ON the GPU machine, within the call's time:
#   BUDGET=560 scripts/device/queue.sh build "fp8_bench.sh SHAPES=7b+lora" "generate_bench.sh"
# Each argument is a step: `build` (every binary the device scripts run, or QUEUE_TARGETS; no tests), or a script
# under scripts/device/ followed by its VAR=value settings and its arguments ('+' in a value reads as a space:
# SHAPES=7b+lora is "7b lora"). A step starts only if the call has EST seconds left for it (EST=s
# before the script name, e.g. "300:fp8_bench.sh ...", default 120), so a call ends inside the device
# tool's limit with what it finished. Each step writes under its own folder; all of them come back
# as one $OUT/queue.tgz (the tool returns at most 8 files a call) beside $OUT/queue.log.
set -uo pipefail
cd "$(dirname "$0")/../.."
REAL_OUT=${OUT:-out/device}
BUDGET=${BUDGET:-560}
WORKDIR=${QUEUE_DIR:-/tmp/queue-out}
rm -rf "$WORKDIR"; mkdir -p "$WORKDIR" "$REAL_OUT"
t0=$(date +%s)
log() { echo "queue [$(( $(date +%s) - t0 )) s] $*" | tee -a "$REAL_OUT/queue.log"; }
n=0
for step in "$@"; do
  n=$((n + 1))
  est=120; [[ $step =~ ^([0-9]+):(.*)$ ]] && { est=${BASH_REMATCH[1]}; step=${BASH_REMATCH[2]}; }
  left=$(( BUDGET - ($(date +%s) - t0) ))
  if (( left < est )); then log "skipped '$step' ($left s left, it needs ~$est)"; continue; fi
  read -r -a words <<< "$step"
  dir=$WORKDIR/$n-${words[0]%.sh}; mkdir -p "$dir"
  s0=$(date +%s)
  if [[ ${words[0]} == build ]]; then
    LF_DEVICE_SKIP_TESTS=1 LF_DEVICE_TARGETS="${QUEUE_TARGETS:-lf-train lf-worker lf-train-local kernels_test lf-generate-bench}" \
      scripts/device/build.sh > "$dir/build.log" 2>&1
    rc=$?; tail -3 "$dir/build.log" | tee -a "$REAL_OUT/queue.log"
    # a built tree's log is ~400 KB of compile lines, and the carry limit counts docs/device-runs: its tail only
    if (( rc == 0 )); then tail -30 "$dir/build.log" > "$dir/build.tail.log"; rm -f "$dir/build.log"; fi
  else
    envs=(); args=()
    for w in "${words[@]:1}"; do if [[ $w == *=* ]]; then envs+=("${w//+/ }"); else args+=("$w"); fi; done
    env OUT="$dir" SKIP_BUILD=1 REBUILD=0 BUILD_DIR=build-device "${envs[@]}" \
      timeout $(( left - 5 )) scripts/device/"${words[0]}" "${args[@]}" > "$dir/stdout.log" 2>&1
    rc=$?; grep -E "^(FP8|TRANSPOSE|GEN_|DPO_ROW|UI_COST|ui_cost:|CURVE|RESULT|MOE|GEMMA|TRACE|kernels_test|model_test|LF example)|failed|FAILED|rror" "$dir/stdout.log" | cut -c1-400 |
      tail -20 | tee -a "$REAL_OUT/queue.log"
  fi
  log "step '$step': exit $rc in $(( $(date +%s) - s0 )) s"
  tar -C "$WORKDIR" -czf "$REAL_OUT/queue.tgz" . 2>/dev/null
done
log "done"
