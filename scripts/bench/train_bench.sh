#!/usr/bin/env bash
# Issue 5's GPU acceptance, run ON the GPU machine after scripts/device/build.sh:
#   scripts/bench/train_bench.sh [speed] [peer] [compile] [curve]     (default: all)
# speed   : lf-train, Qwen2.5 0.5B LoRA, 0.5B full, 1.5B full; seq 2048 (packed), micro-batch 4,
#           bf16, random weights, no activation checkpointing (as the peer); tokens/s + peak memory
# peer    : ../shared/bench/hf_reference.py (eager) on the same shapes, same machine, back to back
# compile : the same with --compile
# ckpt    : (not in the default set) 1.5B full and 0.5B LoRA with per-layer activation
#           checkpointing, lf-train vs the peer's --ckpt
# ckpt-compile: (not in the default set) the same with the peer's --compile --ckpt, on CKPT_SHAPES
#           ("7b lora,1.5b full,0.5b lora")
# curve   : 50 bf16 steps of 0.5B full, lf-train vs HF Trainer from the same initial weights,
#           same tokenized data and order (scripts/bench/train_curve_hf.py); tolerance below
# Writes $OUT/train_bench.log, $OUT/train_results.jsonl and prints a table last.
# Env: LF_TRAIN (trainer command; default the device build's lf-train-local, else
# `lf-worker train`; the agent path is `lf-train CONFIG key=value...`), HF_REF,
# STEPS (15), SHAPES ("0.5b lora,0.5b full,1.5b full"), RUN_TIMEOUT (s per run),
# TINY=1 (CPU dry run of the lf side on the tiny model, 2 steps).
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/bench/bench_common.sh
parts=("$@"); [[ ${#parts[@]} == 0 ]] && parts=(speed peer compile curve)

[[ ${TINY:-0} != 1 ]] && nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,memory.total --format=csv | tee -a "$LOG"
IFS=, read -ra RUNS <<< "${SHAPES:-0.5b lora,0.5b full,1.5b full}"  # the shapes of speed/peer/compile
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
    ckpt-compile)  # activation checkpointing, lf-train vs the peer's --compile --ckpt, on CKPT_SHAPES
      IFS=, read -ra CK <<< "${CKPT_SHAPES:-7b lora,1.5b full,0.5b lora}"
      for r in "${CK[@]}"; do
        set -- $r
        run "lf-ckpt $1 $2" $LF $(lf_args $1 $2) disable_gradient_checkpointing=false output_dir=$WORK/out/$1-$2-ckpt
        run "hf-compile-ckpt $1 $2" "$PY" "$HF_REF" --model $1 --mode $2 --seq 2048 --mbs 4 --compile --ckpt
      done ;;
    curve)
      C=$WORK/curve; rm -rf "$C"; mkdir -p "$C"
      shape=0.5b; [[ ${TINY:-0} == 1 ]] && shape=tiny
      "$PY" scripts/bench/train_curve_hf.py init --shape $shape --tokenizer configs/models/tiny --out "$C/init" >> "$LOG" 2>&1
      run "curve lf" $LF configs/qwen2.5-0.5b-full.yaml model_name_or_path="$C/init" init_weights=pretrained \
        dataset=bench dataset_dir="$WORK/data" packing=true train_on_prompt=true cutoff_len=2048 \
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

print_table
