#!/usr/bin/env bash
# Issue 35's GPU measurement of the live page, run ON the GPU machine (one H200), `.deps` carried,
# in one device call (~6 min on a warm build):
#   scripts/device/ui_cost.sh
# Builds lf-train and lf-worker (scripts/device/build.sh, incremental), then the 0.5B LoRA row of
# the benchmark table (bench_common.sh's lf_args: packed 2048-token rows, micro-batch 4, bf16)
# through the agent path (`lf-train CONFIG`), REPS (5) times each way, alternating:
#   off    no --ui-port (no page, no node status)
#   pages  --ui-port 0 and 10 open pages polling it every second (scripts/bench/ui_pollers.py:
#          /api/state + /api/logs as app.js does, /api/preview once each), for the whole run
# and prints each run's tokens/s (the run's perf: line), then the difference (pages vs off) as the
# mean of the 5 paired differences with their standard deviation; the agent's CPU time (node 0's
# lf-train process alone, its threads' /proc schedstat sampled each second; the workers are other
# processes) per page refresh: (pages run's CPU - the paired off run's CPU) / the pages' refreshes
# (each an /api/state + /api/logs), an upper bound as it includes the node statuses' own cost;
# and a check that the page saw
# the GPU (its /api/state listed the H200 with utilisation, memory and temperature: the GPU part of
# the page, which a CPU box cannot show). Writes $OUT/ui_cost.log, $OUT/ui_cost.jsonl,
# $OUT/ui_state_gpu.json. Asserts nothing about speed (a benchmark): exit 0 unless a run failed
# or the page showed no GPU.
# Env: REPS (5), STEPS (60), RUN_TIMEOUT (240 s per run), SKIP_BUILD=1, TINY=1 (CPU dry run).
set -uo pipefail
cd "$(dirname "$0")/../.."
export OUT=${OUT:-out/device}
mkdir -p "$OUT"
export STEPS=${STEPS:-60} RUN_TIMEOUT=${RUN_TIMEOUT:-240}
if [[ ${TINY:-0} != 1 && ${SKIP_BUILD:-0} != 1 ]]; then
  BUILD_DIR=build-device-last LF_DEVICE_TARGETS="lf-train lf-worker" scripts/device/build.sh > "$OUT/ui_build.log" 2>&1 ||
    { tail -30 "$OUT/ui_build.log"; echo "ui_cost: build failed"; exit 1; }
fi
. scripts/bench/bench_common.sh
LAUNCH=${LF_LAUNCH:-$BUILD/src/launcher/lf-train}
[[ ${TINY:-0} == 1 ]] && LAUNCH=${LF_LAUNCH:-build/src/launcher/lf-train}
U=$OUTD/ui_cost.jsonl
: > "$U"

# cpu_sampler JOBPID FILE: the agent (timeout's child, lf-train) has its threads' CPU nanoseconds
# appended to FILE ("unix_time ns") every second while it lives.
cpu_sampler() {
  local agent=""
  for _ in $(seq 200); do
    agent=$(pgrep -P "$1" | head -1)
    [[ -n $agent ]] && break
    sleep 0.05
  done
  [[ -z $agent ]] && return
  while [[ -d /proc/$agent ]]; do
    cat /proc/"$agent"/task/*/schedstat 2>/dev/null | awk -v t="$(date +%s.%N)" '{s += $1} END {if (NR) print t, s}' >> "$2"
    sleep 1
  done
}

# one MODE REP: one run of the row; its tokens/s, the pollers' counts and (pages) the page's GPUs.
one() {
  local mode=$1 rep=$2 log=$OUTD/ui_$1_$2.log ui=() pollers=""
  [[ $mode == pages ]] && ui=(--ui-port 0)
  env NPROC_PER_NODE=1 MASTER_PORT=0 LF_UI_LINGER_S=0 timeout "$RUN_TIMEOUT" \
    "$LAUNCH" $(lf_args 0.5b lora) output_dir=$WORK/out/ui-$mode "${ui[@]}" > "$log" 2>&1 &
  local job=$! cpu=$OUTD/ui_cpu_$1_$2.txt
  : > "$cpu"
  cpu_sampler $job "$cpu" &
  local sampler=$!
  if [[ $mode == pages ]]; then
    local url=""
    for _ in $(seq 600); do
      url=$(grep -oE "ui: .* is at http://127\.0\.0\.1:[0-9]+/" "$log" | grep -oE "http://.*" | head -1)
      [[ -n $url ]] && break
      kill -0 $job 2>/dev/null || break
      sleep 0.1
    done
    if [[ -n $url ]]; then
      # The pollers also keep the page's last view of the GPU (the part a CPU box cannot show).
      "$PY" scripts/bench/ui_pollers.py --url "$url" --pages 10 --interval 1 --save-gpu-state "$OUT/ui_state_gpu.json" \
        > "$OUTD/ui_pollers_$rep.json" 2>&1 &
      pollers=$!
    fi
  fi
  wait $job; local rc=$?
  wait $sampler 2>/dev/null
  # The agent's CPU seconds (its last sample) and the seconds it was sampled.
  local agent_cpu; agent_cpu=$(awk 'NR == 1 {t0 = $1} {t = $1; ns = $2} END {if (NR) printf "{\"cpu_s\": %.3f, \"wall_s\": %.1f}", ns / 1e9, t - t0; else printf "null"}' "$cpu")
  [[ -n $pollers ]] && { kill -TERM $pollers 2>/dev/null; wait $pollers 2>/dev/null; }
  local perf; perf=$(grep -oE "perf: \{.*\}" "$log" | tail -1 | sed 's/^perf: //')
  local polls="null"; [[ -n $pollers ]] && polls=$(tail -1 "$OUTD/ui_pollers_$rep.json")
  echo "{\"mode\": \"$mode\", \"rep\": $rep, \"rc\": $rc, \"perf\": ${perf:-null}, \"pollers\": ${polls:-null}, \"agent\": ${agent_cpu:-null}}" >> "$U"
  echo "ui_cost: $mode rep $rep rc=$rc $(echo "${perf:-}" | grep -oE '"tokens_per_s": [0-9.]+')" | tee -a "$OUTD/ui_cost.log"
}

[[ ${TINY:-0} != 1 ]] && nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader | tee -a "$OUTD/ui_cost.log"
for rep in $(seq "${REPS:-5}"); do
  one off $rep
  one pages $rep
done

"$PY" - "$U" "$OUT/ui_state_gpu.json" "${TINY:-0}" <<'PY' | tee -a "$OUTD/ui_cost.log"
import json, os, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
tok = lambda r: (r["perf"] or {}).get("tokens_per_s")
off = [tok(r) for r in rows if r["mode"] == "off"]
pages = [tok(r) for r in rows if r["mode"] == "pages"]
bad = [r for r in rows if r["rc"] != 0 or tok(r) is None]
pairs = [(o, p) for o, p in zip(off, pages) if o and p]
out = {"off_tokens_per_s": off, "pages_tokens_per_s": pages, "runs_failed": len(bad)}
if len(pairs) >= 2:
    d = [100 * (p - o) / o for o, p in pairs]
    out.update(off_mean=statistics.mean(o for o, _ in pairs), pages_mean=statistics.mean(p for _, p in pairs),
               diff_pct_mean=round(statistics.mean(d), 3), diff_pct_sd=round(statistics.stdev(d), 3),
               diff_pct_pairs=[round(x, 3) for x in d])
polls = [r["pollers"] for r in rows if r["pollers"]]
out["poll_requests"] = sum(p["requests"] for p in polls)
out["poll_failures"] = sum(p["failures"] for p in polls)
out["state_p50_ms"] = [p["state_p50_ms"] for p in polls]
# The agent's CPU per page refresh, rep by rep: the pages run's extra CPU over its paired off run.
cpu = lambda m: {r["rep"]: r for r in rows if r["mode"] == m and r["agent"] and r["rc"] == 0}
offs, ons = cpu("off"), cpu("pages")
per = [1000 * (ons[k]["agent"]["cpu_s"] - offs[k]["agent"]["cpu_s"]) / ons[k]["pollers"]["refreshes"]
       for k in sorted(set(offs) & set(ons)) if ons[k]["pollers"] and ons[k]["pollers"].get("refreshes")]
out["agent_cpu_s_off"] = [offs[k]["agent"]["cpu_s"] for k in sorted(offs)]
out["agent_cpu_s_pages"] = [ons[k]["agent"]["cpu_s"] for k in sorted(ons)]
if per:
    out["agent_cpu_ms_per_refresh"] = [round(x, 3) for x in per]
    out["agent_cpu_ms_per_refresh_median"] = round(statistics.median(per), 3)
gpu_ok = True
if sys.argv[3] != "1":
    gpus = []
    if os.path.exists(sys.argv[2]):
        s = json.load(open(sys.argv[2]))
        gpus = [g for n in s["nodes"] for g in n["gpus"]]
    gpu_ok = bool(gpus) and all(g["mem_total"] > 0 and g["temp"] >= 0 and 0 <= g["util"] <= 1 for g in gpus)
    out["page_gpus"] = [{k: g[k] for k in ("index", "name", "util", "mem_used", "mem_total", "temp", "power")} for g in gpus]
out["page_showed_gpu"] = gpu_ok
print("UI_COST " + json.dumps(out))
sys.exit(1 if bad or not gpu_ok else 0)
PY
