#!/usr/bin/env bash
# Issue 15's unpacked real-data benchmark, run ON the GPU machine after scripts/device/build.sh:
#   scripts/bench/unpacked_bench.sh            (SHAPES="0.5b lora,1.5b full", STEPS=40)
# LLaMA-Factory's SFT default is packing: false: each batch is padded to its longest row. Rows
# of an alpaca-like spread (instructions of 5-40 words, answers log-uniform over 20-900 words:
# ~50-1500 tokens with the project's small tokenizer), prompts masked (train_on_prompt false),
# micro-batch 4, bf16, no checkpointing. lf-train tokenizes and trains (STEPS + 3 steps: its
# perf line's real_tokens_per_s counts the steps after the first 3); unpacked_peer.py then
# trains HF eager and HF --compile on the same rows, order and batches (lf-train's cache).
# The figure is non-padding tokens/s. Prints the table and one UNPACKED line per shape
# (lf / the best peer); raw in $OUT/train_bench.log, $OUT/train_results.jsonl.
# Env: SHAPES, STEPS, RUN_TIMEOUT (600 s: compile recompiles), PEERS ("eager compile"; "" for
#      lf-train alone), VARIANT (a label suffix for lf-train's row, e.g. when an env var differs),
#      TRACE_STEPS (e.g. 20:21: one more lf-train run under LF_PROFILE_TRACE, summarised with
#      trace_summary.py --runtime: its host runtime calls by total time), TINY=1 (CPU dry run, tiny model).
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/bench/bench_common.sh
unpacked_data  # $DATA: the alpaca-like rows (bench_common.sh)
export RUN_TIMEOUT=${RUN_TIMEOUT:-600}
IFS=, read -ra RUNS <<< "${SHAPES:-0.5b lora,1.5b full}"
peer_dev=(); [[ ${TINY:-0} == 1 ]] && peer_dev=(--device cpu --shape tiny)
for r in "${RUNS[@]}"; do
  set -- $r
  ua=($(unpacked_args $1 $2) max_steps=$((STEPS + 3)) output_dir=$WORK/out/unpacked-$1-$2)
  run "lf-unpacked${VARIANT:+-$VARIANT} $1 $2" $LF $(lf_args $1 $2) "${ua[@]}"
  if [[ -n ${TRACE_STEPS:-} ]]; then
    TR=$WORK/trace-unpacked-$1-$2
    rm -rf "$TR"
    run "trace-unpacked $1 $2" env LF_PROFILE_TRACE="$TR" LF_PROFILE_TRACE_STEPS=$TRACE_STEPS $LF $(lf_args $1 $2) \
      "${ua[@]}"
    "$PY" scripts/bench/trace_summary.py --label "unpacked $1 $2" --top 12 --runtime 12 "$TR"/trace-rank0.json \
      > "$OUTD/trace_unpacked_$1_$2.txt" 2>&1
    cat "$OUTD/trace_unpacked_$1_$2.txt"
  fi
  for c in ${PEERS-eager compile}; do
    flag=""; [[ $c == compile ]] && flag=--compile
    run "hf-unpacked$flag $1 $2" "$PY" scripts/bench/unpacked_peer.py --cache "$(unpacked_tok $1 $2)/train.lftok" \
      --model $1 --mode $2 --mbs 4 --steps $STEPS ${peer_dev[@]+"${peer_dev[@]}"} $flag
  done
done
print_table
"$PY" - "$RES" <<'PYEOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
by = {r["label"]: r["data"] for r in rows if r["data"]}
for label, d in by.items():
    if not label.startswith("lf-unpacked"):
        continue
    shape = label.split(" ", 1)[1]
    peers = {k: v for k, v in by.items() if k.startswith("hf-unpacked") and k.endswith(" " + shape)}
    lf = d.get("real_tokens_per_s", 0)
    parts = [f"{k.split()[0]} {v['real_tokens_per_s']:,.0f}" for k, v in peers.items()]
    best = max((v["real_tokens_per_s"] for v in peers.values()), default=0)
    ratio = f"x{lf / best:.3f} the best peer" if best else "no peer result"
    print(f"UNPACKED {shape} ({label.split()[0]}): lf {lf:,.0f} non-padding tok/s ({d.get('cuda_graphs', '')}); {'; '.join(parts)}; {ratio}")
PYEOF
