#!/usr/bin/env bash
# Issue 34's optimizer rows, ON the GPU machine (one H200), in one call of about 8 minutes:
#   scripts/device/optim_bench.sh                 # build lf-train-local (if needed), then both rows
#   ROWS=muon STEPS=12 scripts/device/optim_bench.sh
# with `.deps` carried: .deps/debs (scripts/device/fetch_debs.sh) and .deps/wheels, the peer's wheels the
# image lacks (made here, on the CPU box, by):
#   pip download --no-deps --python-version 3.12 --only-binary=:all: -d .deps/wheels \
#       llamafactory==0.9.5 galore-torch==1.0 bitsandbytes==0.50.2
# Rows: Qwen2.5-1.5B shape, full fine-tuning, bf16 over fp32 master weights, rows of 2048 tokens, micro-batch 4,
# max_grad_norm 1.0, side by side on the same shape:
#   muon    lf-train `use_muon: true`            vs HF + LLaMA-Factory's own Muon (optim_peer.py)
#   galore  lf-train `use_galore: true` (all, rank 16, interval 200, scale 2)  vs HF + galore-torch's GaLoreAdamW
# lf-train: tokens/s of the median step after 3 (its perf line); the peer: the median step after 3 of random
# rows; each side's peak allocated memory. Goal: >= 1.2x tokens/s at <= the peer's peak memory.
# Prints one `OPT_ROW {json}` per row and a table. Outputs under $OUT (default out/device).
set -uo pipefail
cd "$(dirname "$0")/../.."
export OUT=${OUT:-out/device}
mkdir -p "$OUT"
. scripts/device/env.sh
BUILD=${BUILD_DIR:-build-device}
WORK=${WORK:-/tmp/lf_optim_bench}
STEPS=${STEPS:-12}
ROWS=${ROWS:-"muon galore"}
PY=python3
mkdir -p "$WORK"

# 1. lf-train (the device build's lf-train-local; a warm machine keeps build-device/).
lf_build_local optim_bench || exit 1
LF=$BUILD/src/train/lf-train-local

# 2. the peer's wheels (no network on the machine).
lf_peer_wheels optim_bench "import galore_torch, importlib.util as u; assert u.find_spec('llamafactory')" || exit 2

# 3. synthetic plain text, packed by stage pt into rows of 2048 tokens (the tiny tokenizer).
if [[ ! -f $WORK/data/dataset_info.json ]]; then
  mkdir -p "$WORK/data"
  $PY - "$WORK/data" <<'PYEOF'
import json, random, sys
random.seed(3)
words = ("the model learns to follow instructions while the optimizer updates every weight of the network "
         "gradient loss token batch epoch data parallel shard rank checkpoint memory kernel attention layer").split()
json.dump([{"text": " ".join(random.choices(words, k=1500))} for _ in range(600)], open(f"{sys.argv[1]}/text.json", "w"))
json.dump({"text": {"file_name": "text.json", "columns": {"prompt": "text"}}}, open(f"{sys.argv[1]}/dataset_info.json", "w"))
PYEOF
fi
MODEL=$WORK/model_1.5b
mkdir -p "$MODEL"
cp configs/models/qwen2.5-1.5b.json "$MODEL/config.json"
cp configs/models/tiny/tokenizer.json configs/models/tiny/tokenizer_config.json "$MODEL/"

row() {  # muon | galore
  local opt=$1 out=$WORK/out_$1 keys
  case $opt in
    muon) keys="use_muon=true" ;;
    galore) keys="use_galore=true galore_target=all galore_rank=16 galore_update_interval=200 galore_scale=2.0" ;;
  esac
  timeout 300 $LF configs/tiny_cpu.yaml model_name_or_path=$MODEL init_weights=random stage=pt template=qwen \
    finetuning_type=full $keys dataset=text dataset_dir=$WORK/data cutoff_len=2048 packing=true val_size=0 \
    eval_strategy=no per_device_train_batch_size=4 gradient_accumulation_steps=1 max_steps=$((STEPS + 3)) \
    logging_steps=1 save_strategy=no plot_loss=false overwrite_output_dir=true output_dir=$out \
    tokenized_path=$WORK/tok learning_rate=1e-5 lr_scheduler_type=constant warmup_ratio=0 weight_decay=0 \
    max_grad_norm=1.0 bf16=true disable_gradient_checkpointing=true > "$OUT/optim_lf_$opt.log" 2>&1
  local rc=$?
  grep -E "optimizer|perf:" "$OUT/optim_lf_$opt.log" | tail -3
  timeout 300 $PY scripts/bench/optim_peer.py --config configs/models/qwen2.5-1.5b.json --optim $opt --seq 2048 \
    --mbs 4 --steps $STEPS --warmup 3 > "$OUT/optim_peer_$opt.log" 2>&1
  local prc=$?
  $PY - "$OUT/optim_lf_$opt.log" "$OUT/optim_peer_$opt.log" "$opt" $rc $prc <<'PYEOF'
import json, sys
lf_log, peer_log, name, rc, prc = sys.argv[1:]
res = {"row": f"1.5b-full-{name}", "lf_rc": int(rc), "peer_rc": int(prc)}
try:
    perf = [json.loads(l.split("perf: ", 1)[1]) for l in open(lf_log) if "perf: " in l][-1]
    res.update(lf_tok_s=perf["tokens_per_s"], lf_peak_gib=perf["peak_memory_gib"], lf_step_s=perf["median_step_s"])
except Exception as e:  # noqa: BLE001
    res["lf_error"] = repr(e)
try:
    peer = [json.loads(l.split("RESULT ", 1)[1]) for l in open(peer_log) if l.startswith("RESULT ")][-1]
    res.update(peer_tok_s=peer["tok_s"], peer_peak_gib=peer["peak_mem_gib"], peer_step_s=peer["step_s"])
except Exception as e:  # noqa: BLE001
    res["peer_error"] = repr(e)
if "lf_tok_s" in res and "peer_tok_s" in res:
    res["ratio"] = round(res["lf_tok_s"] / res["peer_tok_s"], 3)
    res["goal_met"] = res["ratio"] >= 1.2 and res["lf_peak_gib"] <= res["peer_peak_gib"]
print("OPT_ROW " + json.dumps(res), flush=True)
PYEOF
  [[ $rc != 0 ]] && tail -5 "$OUT/optim_lf_$opt.log"
  [[ $prc != 0 ]] && tail -5 "$OUT/optim_peer_$opt.log"
}

nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
for r in $ROWS; do row "$r"; done | tee "$OUT/optim_rows.log"
grep "^OPT_ROW" "$OUT/optim_rows.log" | sed 's/^OPT_ROW //' | $PY -c "
import json, sys
print(f\"{'row':18} {'lf tok/s':>9} {'peer tok/s':>10} {'ratio':>6} {'lf GiB':>7} {'peer GiB':>8} goal\")
for l in sys.stdin:
    r = json.loads(l)
    f = lambda k, p: format(r[k], p) if isinstance(r.get(k), (int, float)) else '-'
    print(f\"{r['row']:18} {f('lf_tok_s', '9.0f')} {f('peer_tok_s', '10.0f')} {f('ratio', '6.2f')} {f('lf_peak_gib', '7.1f')} {f('peer_peak_gib', '8.1f')} {r.get('goal_met', '-')}\")
"
