#!/usr/bin/env bash
# Run ON the GPU machine after scripts/device/build.sh (issue 4's GPU acceptance):
#   scripts/device/model_bench.sh [check] [ours] [eager] [compile]     (default: all four)
# check   : bf16 logits of a random Qwen2.5-0.5B, lf-train vs transformers, same weights
# ours    : lf-worker bench-model, 0.5B and 7B, LoRA and full, seq 2048, mbs 4
# fused   : ours with --fused-loss (chunked head + CE), 0.5B LoRA/full and 7B LoRA
# eager   : .deps/bench/hf_reference.py (the peer, copied by fetch_debs.sh), same shapes
# compile : the same with --compile
# Writes $OUT/model_bench.log and $OUT/model_results.jsonl ($OUT: the device tool's
# folder; out/device otherwise) and prints a table last.
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
OUTD=${OUT:-out/device}
mkdir -p "$OUTD"
LOG=$OUTD/model_bench.log
RES=$OUTD/model_results.jsonl
W=${BUILD_DIR:-build-device-last}/src/worker/lf-worker
SEQ=${SEQ:-2048} MBS=${MBS:-4} STEPS=${STEPS:-10}
parts=("$@"); [[ ${#parts[@]} == 0 ]] && parts=(check ours eager compile)

# run LABEL CMD...: logs everything, keeps RESULT/CHECK lines (labelled) in $RES.
run() {
  local label=$1; shift
  echo "=== $label: $*" | tee -a "$LOG"
  local t0=$(date +%s)
  "$@" > "$OUTD/cur.log" 2>&1; local rc=$?
  cat "$OUTD/cur.log" >> "$LOG"
  grep -E "^(RESULT|CHECK|CHECK_LOGITS) " "$OUTD/cur.log" | sed "s/^\([A-Z_]*\) /{\"label\": \"$label\", \"kind\": \"\1\", \"rc\": $rc, \"data\": /; s/\$/}/" >> "$RES"
  grep -q -E "^(RESULT|CHECK|CHECK_LOGITS) " "$OUTD/cur.log" || { echo "{\"label\": \"$label\", \"rc\": $rc, \"data\": null}" >> "$RES"; tail -5 "$OUTD/cur.log"; }
  echo "    rc=$rc $(( $(date +%s) - t0 )) s" | tee -a "$LOG"
}

nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,memory.total --format=csv | tee -a "$LOG"
for part in "${parts[@]}"; do
  case $part in
    check)
      run check-logits-export "$W" check-logits --model-config configs/models/qwen2.5-0.5b.json --out /tmp/lf_check05 --batch 2 --seq 512
      run check-logits python3 scripts/bench/model_check_logits.py /tmp/lf_check05 ;;
    ours)
      for m in 0.5b 7b; do
        cfg=configs/models/qwen2.5-$m.json
        run "lf $m lora" "$W" bench-model --model-config $cfg --mode lora --seq $SEQ --mbs $MBS --steps $STEPS
        if [[ $m == 7b ]]; then  # fp32 master + Adam states (122 GB) do not fit one GPU: bf16, no optimizer
          run "lf $m full bf16 noopt" "$W" bench-model --model-config $cfg --mode full --seq $SEQ --mbs $MBS --steps $STEPS --param-dtype bf16 --optimizer none
        else
          run "lf $m full" "$W" bench-model --model-config $cfg --mode full --seq $SEQ --mbs $MBS --steps $STEPS
        fi
      done ;;
    fused)
      for mm in "0.5b lora" "0.5b full" "7b lora"; do
        set -- $mm
        run "lf $1 $2 fused-loss" "$W" bench-model --model-config configs/models/qwen2.5-$1.json --mode $2 --seq $SEQ --mbs $MBS --steps $STEPS --fused-loss
      done ;;
    eager|compile)
      flag=""; [[ $part == compile ]] && flag=--compile
      for mm in "0.5b lora" "0.5b full" "7b lora"; do
        set -- $mm
        run "hf $1 $2 $part" python3 .deps/bench/hf_reference.py --model $1 --mode $2 --seq $SEQ --mbs $MBS $flag
      done ;;
  esac
done

python3 - "$RES" <<'PY'
import json, sys
print(f"{'run':32} {'tok/s':>8} {'MFU':>6} {'peak GiB':>8}  notes")
for line in open(sys.argv[1]):
    r = json.loads(line); d = r.get("data") or {}
    if r.get("kind") == "CHECK":
        print(f"{r['label']:32} pass={d.get('pass')} rel(lf_bf16,hf_fp32)={d.get('rel_lf_bf16_vs_hf_fp32')} rel(hf_bf16,hf_fp32)={d.get('rel_hf_bf16_vs_hf_fp32')} rel(lf_fp32,hf_fp32)={d.get('rel_lf_fp32_vs_hf_fp32')}")
    elif r.get("kind") == "CHECK_LOGITS":
        print(f"{r['label']:32} sdpa={d.get('sdpa_backend_bf16')}")
    else:
        mfu = d.get("mfu", d.get("mfu_vs_790"))
        print(f"{r['label']:32} {d.get('tok_s_per_gpu', '-'):>8} {mfu if mfu is not None else '-':>6} {d.get('peak_mem_gib', '-'):>8}  rc={r['rc']} {d.get('sdpa_backend', '')}")
PY
