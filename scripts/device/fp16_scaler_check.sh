#!/usr/bin/env bash
# fp16's dynamic loss scaler on the GPU (its CPU observable is the refusal: fp16 needs a GPU), run
# ON the GPU machine after a build: the tiny job in fp16 with a learning rate that overflows now
# and then, through the DeepSpeed file LLaMA-Factory ships (its fp16 section at the values
# lf-train honours). Prints each logged step's loss scale and the overflow lines: the scale starts
# at 2^16, halves on each overflow (that step skipped) and doubles after 2000 clean steps.
#   LF=/tmp/lf-head/bin/lf-train scripts/device/fp16_scaler_check.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
LF=${LF:-build-device-last/src/launcher/lf-train}
OUTD=${OUT:-out/device}
W=${WORK:-/tmp/lf_fp16}
rm -rf "$W"; mkdir -p "$W" "$OUTD"
cat > "$W/ds_fp16.json" <<'JSON'
{"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
 "fp16": {"enabled": "auto", "loss_scale": 0, "initial_scale_power": 16, "loss_scale_window": 2000,
          "hysteresis": 1, "min_loss_scale": 1}}
JSON
"$LF" configs/tiny_cpu.yaml output_dir="$W/out" fp16=true bf16=false deepspeed="$W/ds_fp16.json" \
  max_steps=40 logging_steps=1 eval_strategy=no learning_rate=3e-2 plot_loss=false > "$W/log" 2>&1
echo "fp16_scaler_check: exit $?" | tee "$OUTD/fp16_scaler.txt"
grep -E "overflow|loss scale" "$W/log" | head -8 | tee -a "$OUTD/fp16_scaler.txt"
python3 - "$W/out/trainer_state.json" <<'PY' | tee -a "$OUTD/fp16_scaler.txt"
import json, sys
h = [e for e in json.load(open(sys.argv[1]))["log_history"] if "loss_scale" in e]
print("FP16", "steps", len(h), "scales", sorted({e["loss_scale"] for e in h}, reverse=True)[:6],
      "first", h[0]["loss_scale"] if h else None, "last", h[-1]["loss_scale"] if h else None)
PY
