#!/usr/bin/env bash
# Issue 15's CUDA graphs of the micro-step (src/train/step_graph.h) in ONE device call. Run ON
# the GPU machine, `.deps` carried:
#   scripts/device/graphs_check.sh
#   KNOB=LF_FUSED_CE SKIP_BUILD=1 scripts/device/graphs_check.sh   # the same A/B of another 0/1 knob
# 1. builds lf-train-local (scripts/device/build.sh; SKIP_BUILD=1 reuses build-device-last);
# 2. for each shape of SHAPES, lf-train-local with LF_CUDA_GRAPHS=1 and =0 back to back
#    (train_bench.sh's command lines: seq 2048 packed, micro-batch 4, bf16, no checkpointing;
#    CKPT=1 adds disable_gradient_checkpointing=false, ACCUM=N gradient_accumulation_steps=N),
#    each in its own output_dir;
# 3. the per-step losses of each pair compared (trainer_log.jsonl): the graphed run must follow
#    the eager one within MAX_REL (bf16: the loss sums the head's chunks in another order).
# Prints the A/B table (tokens/s, peak allocated and reserved GiB, the cuda_graphs line) and one
# GRAPHS_AB line per shape; exit 1 when a pair's losses differ beyond MAX_REL or a run failed.
# Env: KNOB (LF_CUDA_GRAPHS: the 0/1 variable the pairs differ in), SHAPES ("0.5b lora,0.5b full"), STEPS (15), MAX_REL (2e-3), RUN_TIMEOUT (240 s), CKPT=1, ACCUM=N,
#      TRACE=1 (an LF_PROFILE_TRACE of the first shape graphed, steps 6:7, summarised),
#      UNPACKED=1 (the unpacked benchmark's rows instead: packing off, prompts masked, shapes vary).
# Speeds compared are non-padding tokens/s (the graphed rows are padded to LF_CUDA_GRAPH_BUCKET).
set -uo pipefail
cd "$(dirname "$0")/../.."
export OUT=${OUT:-out/device}
mkdir -p "$OUT"
[[ -f scripts/device/env.sh ]] && . scripts/device/env.sh
export BUILD_DIR=${BUILD_DIR:-build-device-last} RUN_TIMEOUT=${RUN_TIMEOUT:-240} STEPS=${STEPS:-15}
t0=$(date +%s)
if [[ ${SKIP_BUILD:-0} != 1 ]]; then
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,memory.total --format=csv | tee "$OUT/gpu.txt"
  LF_DEVICE_TARGETS="lf-train-local" LF_DEVICE_SKIP_TESTS=1 scripts/device/build.sh > "$OUT/build.log" 2>&1
  brc=$?
  grep -E "device/build|warning: |error" "$OUT/build.log" | head -30
  if [[ $brc != 0 ]]; then tail -40 "$OUT/build.log"; echo "graphs_check: build failed (rc $brc)"; exit 1; fi
fi
. scripts/bench/bench_common.sh
extra=""; [[ ${CKPT:-0} == 1 ]] && extra="disable_gradient_checkpointing=false"
[[ -n ${ACCUM:-} ]] && extra+=" gradient_accumulation_steps=$ACCUM"
[[ ${UNPACKED:-0} == 1 ]] && unpacked_data
IFS=, read -ra AB <<< "${SHAPES:-0.5b lora,0.5b full}"
KNOB=${KNOB:-LF_CUDA_GRAPHS}
for r in "${AB[@]}"; do
  set -- $r
  for g in 1 0; do
    run "lf $1 $2 $KNOB=$g" env $KNOB=$g $LF $(lf_args $1 $2) $extra \
      $( [[ ${UNPACKED:-0} == 1 ]] && unpacked_args $1 $2 ) output_dir=$WORK/out/$1-$2-g$g
    grep -E "CUDA graphs" "$OUTD/cur.log" | head -3
  done
done
if [[ ${TRACE:-0} == 1 ]]; then
  set -- ${AB[0]}
  TR=$WORK/trace-$1-$2-graphs; rm -rf "$TR"
  run "trace $1 $2 graphs" env LF_CUDA_GRAPHS=1 LF_PROFILE_TRACE="$TR" LF_PROFILE_TRACE_STEPS=6:7 \
    $LF $(lf_args $1 $2) $extra output_dir=$WORK/out/trace
  if ls "$TR"/trace-rank0.json > /dev/null 2>&1; then
    "$PY" scripts/bench/trace_summary.py --label "$1 $2 graphs" --top 15 "$TR"/trace-rank0.json > "$OUT/trace_summary.txt" 2>&1
    head -40 "$OUT/trace_summary.txt"
  fi
fi
echo "=== graphs A/B, $(( $(date +%s) - t0 )) s in all"
print_table
"$PY" - "$RES" "$WORK/out" "${MAX_REL:-2e-3}" "$KNOB" "${AB[@]}" <<'PYEOF'
import json, sys
res, root, max_rel, knob, shapes = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4], sys.argv[5:]
rows = {r["label"]: r for r in map(json.loads, open(res))}
ok = True
def losses(d):
    return [json.loads(l)["loss"] for l in open(f"{root}/{d}/trainer_log.jsonl") if '"loss"' in l]
for shape in shapes:
    size, mode = shape.split()
    on, off = rows.get(f"lf {size} {mode} {knob}=1"), rows.get(f"lf {size} {mode} {knob}=0")
    if not on or not off or on["rc"] or off["rc"] or not on["data"] or not off["data"]:
        print(f"GRAPHS_AB {size} {mode}: FAIL (a run failed)"); ok = False; continue
    a, b = losses(f"{size}-{mode}-g1"), losses(f"{size}-{mode}-g0")
    rel = max(abs(x - y) / max(abs(y), 1e-9) for x, y in zip(a, b)) if a and len(a) == len(b) else float("inf")
    da, db = on["data"], off["data"]
    verdict = "pass" if rel <= max_rel else "FAIL"
    ok = ok and rel <= max_rel
    ta, tb = da.get("real_tokens_per_s", da["tokens_per_s"]), db.get("real_tokens_per_s", db["tokens_per_s"])
    print(f"GRAPHS_AB {size} {mode}: {knob}=1 {ta:,.0f} real tok/s vs =0 {tb:,.0f} = x{ta / tb:.3f}; peak {da.get('peak_memory_gib', 0):.1f} vs "
          f"{db.get('peak_memory_gib', 0):.1f} GiB allocated, {da.get('peak_reserved_gib', 0):.1f} vs "
          f"{db.get('peak_reserved_gib', 0):.1f} reserved; {len(a)} steps, max rel loss diff {rel:.2e} ({verdict}); "
          f"{da.get('cuda_graphs', 'no cuda_graphs field')}")
sys.exit(0 if ok else 1)
PYEOF
