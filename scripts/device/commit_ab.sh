#!/usr/bin/env bash
# Two builds of lf-train measured back to back on the same GPU (issue 28's "within noise of the
# old commit"), run ON the GPU machine:
#   BASE_LF=/tmp/base/bin/lf-train-local HEAD_LF=/tmp/head/bin/lf-train-local scripts/device/commit_ab.sh
# For each shape of SHAPES ("7b lora,1.5b full") and each of REPS (2) rounds: the base build, then
# the head build (alternating, so drift on the card hits both), train_bench.sh's command line
# (seq 2048 packed, micro-batch 4, bf16, STEPS steps). Prints one AB line per shape: the median
# tokens/s of each build, their ratio, and each build's spread (max/min over the rounds).
# Raw lines: $OUT/train_bench.log, $OUT/train_results.jsonl (bench_common.sh).
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${BASE_LF:?the base build's lf-train-local}" "${HEAD_LF:?the head build's lf-train-local}"
. scripts/bench/bench_common.sh
IFS=, read -ra AB_SHAPES <<< "${SHAPES:-7b lora,1.5b full}"
for r in "${AB_SHAPES[@]}"; do
  set -- $r
  for ((k = 1; k <= ${REPS:-2}; ++k)); do
    run "base $1 $2 #$k" "$BASE_LF" $(lf_args $1 $2) output_dir=$WORK/out/ab-base-$1-$2 tokenized_path=$WORK/tok-base
    run "head $1 $2 #$k" "$HEAD_LF" $(lf_args $1 $2) output_dir=$WORK/out/ab-head-$1-$2 tokenized_path=$WORK/tok-head
  done
done
"$PY" - "$RES" <<'PYEOF'
import json, statistics, sys
rows = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    if r["data"] and r["label"].split(" ")[0] in ("base", "head"):
        who, size, mode, _ = r["label"].split(" ")
        rows.setdefault((size, mode), {}).setdefault(who, []).append(r["data"])
for (size, mode), by in rows.items():
    if "base" not in by or "head" not in by:
        continue
    tok = {w: [d["tokens_per_s"] for d in ds] for w, ds in by.items()}
    mem = {w: max(d.get("peak_memory_gib", 0) for d in ds) for w, ds in by.items()}
    b, h = statistics.median(tok["base"]), statistics.median(tok["head"])
    spread = {w: max(v) / min(v) for w, v in tok.items()}
    print(f"AB {size} {mode}: base {b:,.0f} tok/s ({mem['base']:.1f} GiB, spread {spread['base']:.3f}), "
          f"head {h:,.0f} ({mem['head']:.1f} GiB, spread {spread['head']:.3f}): head/base {h / b:.3f} "
          f"over {len(tok['head'])} rounds")
PYEOF
