#!/usr/bin/env bash
# Issues 12-14 on ONE GPU, run ON the GPU machine after scripts/device/build.sh:
#   scripts/bench/sharding_bench.sh [seams] [zero1gpu] [offload15] [offload] [oom]     (default: all)
# seams    : lf-train at this commit vs OLD_LF (an lf-train-local built from the commit before the
#            trainer seams), 1.5B full and 7B LoRA, back to back, SEAMS_REPEAT times (issue 12: within noise)
# offload15: the offload modes on 1.5B full (6 steps): a smoke run before the 7B ones
# offload_ab: 1.5B full, stage 3 offload: copy streams + device norm on vs off (optimizer and
#            params), max_grad_norm=0 (the FSDP2 peer does not clip), 8 host threads; losses compared
# offload15_peer: FSDP2 + CPUOffloadPolicy on 1.5B (where 7B's does not fit the host)
# zero1gpu : 1.5B full, zero_stage 0 vs 3 at world size 1: tokens/s (issue 13: <= 3% cost) and
#            the per-step losses (bf16 tolerance, EQUIV line)
# offload  : (offload_lf / offload_peer: one side) 7B full fine-tuning, seq 2048, micro-batch 4, bf16, activation checkpointing on:
#            lf-train zero_stage 3 with the optimizer offloaded and with the parameters offloaded,
#            vs FSDP2 + CPUOffloadPolicy (../shared/bench/hf_reference.py --mode fsdp --offload
#            --ckpt) in the same lease: tokens/s, peak GPU memory, peak host RSS (issue 14)
# oom      : 7B full at world size 1 under stage 3 without offload (expected not to fit: the
#            allocator's message is the result)
# Writes $OUT/train_bench.log and $OUT/train_results.jsonl; prints a table last.
# Env: as scripts/bench/bench_common.sh; OLD_LF (seams), STEPS (default 10), OFFLOAD_STEPS (6).
set -uo pipefail
cd "$(dirname "$0")/../.."
STEPS=${STEPS:-10}
. scripts/bench/bench_common.sh
parts=("$@"); [[ ${#parts[@]} == 0 ]] && parts=(seams zero1gpu offload15 offload oom)

# A command with the peak resident set size of its largest descendant (host memory; pinned
# buffers count once touched): a HOST_PEAK_KB line after its output.
lf_timed() {
  "$PY" -c 'import resource, subprocess, sys
rc = subprocess.call(sys.argv[1:])
print("HOST_PEAK_KB", resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, flush=True)
sys.exit(rc)' "$@"
}
full7b() {  # 7B full fine-tuning, activation checkpointing on (LLaMA-Factory's default)
  echo "$(lf_args 1.5b full) model_name_or_path=$WORK/models/7b disable_gradient_checkpointing=false \
max_steps=${OFFLOAD_STEPS:-6} output_dir=$WORK/out/7b-full"
}

[[ ${TINY:-0} != 1 ]] && nvidia-smi --query-gpu=name,memory.total --format=csv | tee -a "$LOG"
for part in "${parts[@]}"; do
  case $part in
    seams)
      [[ -n ${OLD_LF:-} ]] || { echo "seams: set OLD_LF"; continue; }
      for r in "1.5b full" "7b lora"; do
        set -- $r
        for rep in $(seq 1 ${SEAMS_REPEAT:-2}); do
          run "old$rep $1 $2" $OLD_LF $(lf_args $1 $2)
          run "new$rep $1 $2" $LF $(lf_args $1 $2)
        done
      done ;;
    offload15)  # the offload paths on a small shape first (a bug costs seconds, not a 7B load)
      for mode in optimizer params; do
        run "lf 1.5b full z3 offload=$mode" lf_timed $LF $(lf_args 1.5b full) zero_stage=3 offload=$mode max_steps=6 \
          disable_gradient_checkpointing=false output_dir=$WORK/out/o15-$mode
      done
      run "lf 1.5b full z2 offload=optimizer" lf_timed $LF $(lf_args 1.5b full) zero_stage=2 offload=optimizer max_steps=6 \
        disable_gradient_checkpointing=false output_dir=$WORK/out/o15-z2 ;;
    offload_ab)  # issue 14 on 1.5B full, stage 3, checkpointing, one call: the copy streams and the device
      # norm against the old path (optimizer and params), offload_ratio (part of the state on the GPU),
      # max_grad_norm=0 (the FSDP2 peer does not clip), 8 host threads; the per-step losses compared
      o15="$(lf_args 1.5b full) zero_stage=3 max_steps=${OFFLOAD_STEPS:-8} disable_gradient_checkpointing=false"
      old="LF_OFFLOAD_COPY_STREAMS=0 LF_OFFLOAD_DEVICE_NORM=0"
      # name|environment|arguments, ';' between runs
      runs="new||offload=optimizer;old|$old|offload=optimizer;params||offload=params;params-old|$old|offload=params"
      runs+=";r0.6||offload=optimizer offload_ratio=0.6;r0.5||offload=optimizer offload_ratio=0.5"
      runs+=";noclip||offload=optimizer max_grad_norm=0;noclip-r0.5||offload=optimizer offload_ratio=0.5 max_grad_norm=0"
      runs+=";t8|LF_HOST_ADAM_THREADS=8|offload=optimizer"
      AB_RUNS=${AB_RUNS:-$runs}
      IFS=';' read -ra ab <<< "$AB_RUNS"
      logs=()
      for spec in "${ab[@]}"; do
        IFS='|' read -r name envs args <<< "$spec"
        run "lf 1.5b z3 $name" lf_timed env $envs $LF $o15 $args output_dir=$WORK/out/ab-$name
        grep -a -m1 "ZeRO-3:" "$OUTD/cur.log" | cut -c1-400 | tee -a "$LOG"
        logs+=("$WORK/out/ab-$name/trainer_log.jsonl")
      done
      run "ab losses" "$PY" - "${logs[@]}" <<'PYEOF'
import json, os, sys
runs = {p.split("/")[-2]: [json.loads(l)["loss"] for l in open(p) if '"loss"' in l] for p in sys.argv[1:] if os.path.exists(p)}
first = next(iter(runs.values()))
rel = {k: max(abs(x - y) / abs(y) for x, y in zip(first, v)) for k, v in runs.items()}
print("AB_LOSSES " + json.dumps({"max_rel_vs_first": rel, "first": first}), flush=True)
PYEOF
      grep -a "AB_LOSSES" "$OUTD/cur.log" | tee -a "$LOG" ;;
    offload15_peer)  # FSDP2 + CPUOffloadPolicy on the same shape (where 7B's does not fit the host)
      run "fsdp2 1.5b offload ckpt" lf_timed torchrun --nproc_per_node 1 --master_port 29612 "$HF_REF" --model 1.5b \
        --mode fsdp --offload --ckpt --seq 2048 --mbs 4 --steps 6 --warmup 2 ;;
    zero1gpu)
      run "zero0 1.5b full" $LF $(lf_args 1.5b full) output_dir=$WORK/out/z0
      run "zero3 1.5b full" $LF $(lf_args 1.5b full) zero_stage=3 output_dir=$WORK/out/z3
      run "zero0-zero3 losses" "$PY" - "$WORK/out/z0/trainer_log.jsonl" "$WORK/out/z3/trainer_log.jsonl" <<'PYEOF'
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(p) if '"loss"' in l] for p in sys.argv[1:3])
rel = max(abs(x - y) / abs(x) for x, y in zip(a, b))
print("EQUIV " + json.dumps({"steps": len(a), "max_rel": rel, "within_2pct": rel <= 0.02, "z0": a, "z3": b}))
PYEOF
      ;;
    offload|offload_lf|offload_peer)
      if [[ $part != offload_peer ]]; then
        run "lf 7b full z3 offload=optimizer" lf_timed $LF $(full7b) zero_stage=3 offload=optimizer
        run "lf 7b full z3 offload=params" lf_timed $LF $(full7b) zero_stage=3 offload=params
      fi
      [[ $part == offload_lf ]] || run "fsdp2 7b offload ckpt" lf_timed torchrun --nproc_per_node 1 --master_port 29611 "$HF_REF" --model 7b \
        --mode fsdp --offload --ckpt --seq 2048 --mbs 4 --steps ${OFFLOAD_STEPS:-6} --warmup 2 ;;
    oom)
      run "lf 7b full z3 no offload" lf_timed $LF $(full7b) zero_stage=3
      grep -a -m3 -E "out of memory|OutOfMemory|CUDA error" "$OUTD/cur.log" | tee -a "$LOG" ;;
    *) echo "unknown part $part"; exit 2 ;;
  esac
done
grep -a "HOST_PEAK_KB" "$LOG" | tail -5
print_table
