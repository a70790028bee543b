#!/usr/bin/env bash
# neat_packing on the GPU (issue 15), run ON the GPU machine after scripts/device/build.sh:
#   scripts/bench/neat_bench.sh            (SHAPES="0.5b lora,1.5b full", STEPS=15)
# Per shape, train_bench.sh's command line (seq 2048 packed, micro-batch 4, bf16) with
# neat_packing=true: LF_VARLEN_ATTENTION=1 (flash over each packed sequence) and =0 (SDPA under
# the block-diagonal mask, the CPU's path), then plain packing for reference (graphed).
# Prints the table and one NEAT line per shape; raw in $OUT/train_bench.log, train_results.jsonl.
# Env: SHAPES, STEPS, RUN_TIMEOUT, TINY=1 (CPU dry run: both neat rows take the mask there).
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/bench/bench_common.sh
IFS=, read -ra RUNS <<< "${SHAPES:-0.5b lora,1.5b full}"
for r in "${RUNS[@]}"; do
  set -- $r
  for v in 1 0; do
    run "neat-varlen$v $1 $2" env LF_VARLEN_ATTENTION=$v $LF $(lf_args $1 $2) neat_packing=true \
      tokenized_path=$WORK/tok_neat output_dir=$WORK/out/neat-$1-$2
  done
  run "packed $1 $2" $LF $(lf_args $1 $2)
done
print_table
"$PY" - "$RES" <<'PYEOF'
import json, sys
by = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["data"]:
        by[r["label"]] = r["data"]
for label, d in by.items():
    if not label.startswith("neat-varlen1 "):
        continue
    shape = label.split(" ", 1)[1]
    m, p = by.get("neat-varlen0 " + shape), by.get("packed " + shape)
    line = f"NEAT {shape}: varlen {d['tokens_per_s']:,.0f} tok/s / {d.get('peak_memory_gib', 0):.1f} GiB"
    if m: line += f"; mask {m['tokens_per_s']:,.0f} / {m.get('peak_memory_gib', 0):.1f} (x{d['tokens_per_s'] / m['tokens_per_s']:.3f})"
    if p: line += f"; plain packing {p['tokens_per_s']:,.0f} / {p.get('peak_memory_gib', 0):.1f}"
    print(line)
PYEOF
