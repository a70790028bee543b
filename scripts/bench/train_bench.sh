#!/usr/bin/env bash
# Issue 5's GPU acceptance, run ON the GPU machine after scripts/device/build.sh:
#   scripts/bench/train_bench.sh [speed] [peer] [compile] [curve]     (default: all)
# speed   : lf-train, Qwen2.5 0.5B LoRA, 0.5B full, 1.5B full; seq 2048 (packed), micro-batch 4,
#           bf16, random weights, no activation checkpointing (as the peer); tokens/s + peak memory
# peer    : ../shared/bench/hf_reference.py (eager) on the same shapes, same machine, back to back
# compile : the same with --compile
# ckpt    : (not in the default set) 1.5B full and 0.5B LoRA with per-layer activation
#           checkpointing, lf-train vs the peer's --ckpt
# curve   : 50 bf16 steps of 0.5B full, lf-train vs HF Trainer from the same initial weights,
#           same tokenized data and order (scripts/bench/train_curve_hf.py); tolerance below
# Writes $OUT/train_bench.log, $OUT/train_results.jsonl and prints a table last.
# Env: LF_TRAIN (trainer command; default the device build's lf-train-local, else
# `lf-worker train`; the agent path is `lf-train CONFIG key=value...`), HF_REF,
# STEPS (15), TINY=1 (CPU dry run of the lf side on the tiny model, 2 steps).
set -uo pipefail
cd "$(dirname "$0")/../.."
[[ -f scripts/device/env.sh && ${TINY:-0} != 1 ]] && . scripts/device/env.sh
OUTD=${OUT:-out/device}
mkdir -p "$OUTD"
LOG=$OUTD/train_bench.log
RES=$OUTD/train_results.jsonl
BUILD=${BUILD_DIR:-build-device-last}
LF=${LF_TRAIN:-$BUILD/src/train/lf-train-local}
[[ -z ${LF_TRAIN:-} && ! -x $LF ]] && LF="$BUILD/src/worker/lf-worker train"  # a partial device build
HF_REF=${HF_REF:-.deps/bench/hf_reference.py}
[[ -f $HF_REF ]] || HF_REF=../shared/bench/hf_reference.py
PY=${PYTHON:-python3}
WORK=${WORK:-/tmp/lf_train_bench}
STEPS=${STEPS:-15}
MAX_REL=${MAX_REL:-0.02} MEAN_REL=${MEAN_REL:-0.005}  # bf16 curve tolerance (relative, per step / mean)
parts=("$@"); [[ ${#parts[@]} == 0 ]] && parts=(speed peer compile curve)
mkdir -p "$WORK/data" "$WORK/models"

# run LABEL CMD...: full output to the log; the `perf:` (lf), RESULT (peer) or CURVE line to $RES.
run() {
  local label=$1; shift
  echo "=== $label: $*" | tee -a "$LOG"
  local t0=$(date +%s)
  "$@" > "$OUTD/cur.log" 2>&1; local rc=$?
  cat "$OUTD/cur.log" >> "$LOG"
  local line
  line=$(grep -oE "(perf: |^RESULT |^CURVE ).*" "$OUTD/cur.log" | tail -1 | sed -E 's/^(perf: |RESULT |CURVE )//')
  echo "{\"label\": \"$label\", \"rc\": $rc, \"data\": ${line:-null}}" >> "$RES"
  [[ -z $line ]] && tail -5 "$OUTD/cur.log"
  echo "    rc=$rc $(( $(date +%s) - t0 )) s ${line:-}" | tee -a "$LOG"
}

# Synthetic alpaca data: long answers so that packing fills 2048-token rows.
if [[ ! -f $WORK/data/dataset_info.json ]]; then
  "$PY" - "$WORK/data" <<'PYEOF'
import json, random, sys
out = sys.argv[1]
random.seed(0)
words = ("the model learns to follow instructions while the optimizer updates every weight of the network "
         "gradient loss token batch epoch data parallel shard rank checkpoint memory kernel attention layer").split()
rows = [{"instruction": " ".join(random.choices(words, k=30)), "input": "",
         "output": " ".join(random.choices(words, k=random.randint(150, 450)))} for _ in range(2500)]
json.dump(rows, open(f"{out}/bench.json", "w"))
json.dump({"bench": {"file_name": "bench.json"}}, open(f"{out}/dataset_info.json", "w"))
PYEOF
fi
# Model folders: the published shape's config.json + the project's small tokenizer (ids < 1036
# in a 151936-row embedding: same compute as the real tokenizer, nothing to download).
for m in 0.5b 1.5b; do
  d=$WORK/models/$m; mkdir -p "$d"
  cp configs/models/qwen2.5-$m.json "$d/config.json"
  cp configs/models/tiny/tokenizer.json configs/models/tiny/tokenizer_config.json "$d/"
done

lf_args() {  # SIZE MODE
  local size=$1 mode=$2 model=$WORK/models/$1
  [[ ${TINY:-0} == 1 ]] && model=configs/models/tiny
  echo "configs/qwen2.5-$size-$mode.yaml model_name_or_path=$model init_weights=random dataset=bench \
dataset_dir=$WORK/data packing=true train_on_prompt=true cutoff_len=2047 per_device_train_batch_size=4 \
gradient_accumulation_steps=1 max_steps=$STEPS logging_steps=1 save_strategy=no plot_loss=false \
overwrite_output_dir=true output_dir=$WORK/out/$size-$mode tokenized_path=$WORK/tok \
disable_gradient_checkpointing=true lora_rank=16 lora_alpha=32 learning_rate=1e-5 warmup_ratio=0 \
$( [[ ${TINY:-0} == 1 ]] && echo bf16=false )"
}

[[ ${TINY:-0} != 1 ]] && nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,memory.total --format=csv | tee -a "$LOG"
RUNS=("0.5b lora" "0.5b full" "1.5b full")
for part in "${parts[@]}"; do
  case $part in
    speed)
      for r in "${RUNS[@]}"; do set -- $r; run "lf $1 $2" $LF $(lf_args $1 $2); done ;;
    peer)
      for r in "${RUNS[@]}"; do set -- $r; run "hf-eager $1 $2" "$PY" "$HF_REF" --model $1 --mode $2 --seq 2048 --mbs 4; done ;;
    compile)
      for r in "${RUNS[@]}"; do set -- $r; run "hf-compile $1 $2" "$PY" "$HF_REF" --model $1 --mode $2 --seq 2048 --mbs 4 --compile; done ;;
    ckpt)
      for r in "1.5b full" "0.5b lora"; do
        set -- $r
        run "lf-ckpt $1 $2" $LF $(lf_args $1 $2) disable_gradient_checkpointing=false output_dir=$WORK/out/$1-$2-ckpt
        run "hf-eager-ckpt $1 $2" "$PY" "$HF_REF" --model $1 --mode $2 --seq 2048 --mbs 4 --ckpt
      done ;;
    curve)
      C=$WORK/curve; rm -rf "$C"; mkdir -p "$C"
      shape=0.5b; [[ ${TINY:-0} == 1 ]] && shape=tiny
      "$PY" scripts/bench/train_curve_hf.py init --shape $shape --tokenizer configs/models/tiny --out "$C/init" >> "$LOG" 2>&1
      run "curve lf" $LF configs/qwen2.5-0.5b-full.yaml model_name_or_path="$C/init" init_weights=pretrained \
        dataset=bench dataset_dir="$WORK/data" packing=true train_on_prompt=true cutoff_len=2047 \
        per_device_train_batch_size=4 gradient_accumulation_steps=1 max_steps=50 logging_steps=1 save_strategy=no \
        plot_loss=false overwrite_output_dir=true output_dir="$C/lf" tokenized_path="$C/tok" \
        disable_gradient_checkpointing=true learning_rate=1e-4 warmup_steps=5 weight_decay=0 \
        $( [[ ${TINY:-0} == 1 ]] && echo bf16=false max_steps=5 )
      run "curve hf" "$PY" scripts/bench/train_curve_hf.py train --model "$C/init" --cache "$C/tok/train.lftok" \
        --out "$C/hf.json" --steps $([[ ${TINY:-0} == 1 ]] && echo 5 || echo 50) --mbs 4 --lr 1e-4 --warmup 5 \
        --pad-id 0 $( [[ ${TINY:-0} == 1 ]] && echo --fp32 )
      run "curve compare" "$PY" scripts/bench/train_curve_hf.py compare --lf "$C/lf/trainer_log.jsonl" \
        --hf "$C/hf.json" --max-rel $MAX_REL --mean-rel $MEAN_REL ;;
    *) echo "unknown part $part"; exit 2 ;;
  esac
done

"$PY" - "$RES" <<'PYEOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"{'run':28s} {'rc':>3s} {'tokens/s':>10s} {'peak GiB':>9s}")
for r in rows:
    d = r["data"] or {}
    tok = d.get("tokens_per_s", d.get("tok_s_total", ""))
    mem = d.get("peak_memory_gib", d.get("peak_gib", d.get("peak_mem_gib", "")))
    extra = "" if "pass" not in d else f" curve pass={d['pass']} max_rel={d['max_rel_diff']:.4g} mean_rel={d['mean_rel_diff']:.4g}"
    print(f"{r['label']:28s} {r['rc']:>3} {tok if isinstance(tok, str) else f'{tok:,.0f}':>10} "
          f"{mem if isinstance(mem, str) else f'{mem:.1f}':>9}{extra}")
PYEOF
