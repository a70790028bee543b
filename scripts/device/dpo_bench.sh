#!/usr/bin/env bash
# Issue 31's GPU run, ON the GPU machine (one H200), in one call of about 8 minutes:
#   scripts/device/dpo_bench.sh                # build (if needed), then both rows
#   ROWS="7b-lora" STEPS=20 scripts/device/dpo_bench.sh
#   TRACE=1 ROWS=7b-lora STEPS=4 scripts/device/dpo_bench.sh   # + a trace of the reference pass and step 1
#   TRACE=1 TRACE_STEPS=0:0 ROWS=7b-lora STEPS=20 scripts/device/dpo_bench.sh   # the reference pass alone
#   LF_SDPA_BACKEND=torch PEER=0 ROWS=7b-lora scripts/device/dpo_bench.sh   # lf-train alone, cuDNN attention
#       kept (auto leaves it out on these varying-length pairs: train/attention_shapes.h); add
#       TORCH_CUDNN_SDPA_AVOID_RECOMPILE=1 for torch's experimental plan reuse across lengths
#   WORDS=100:650 WORK=/tmp/dpo_var scripts/device/dpo_bench.sh   # responses of 100-650 words (~300-1,950
#       tokens: rows of varying length, padded in a micro-batch; the default 700:1300 fills every row to
#       cutoff_len 2048, so no row is padded); LF_PREF_PADDING_FREE=0 for the padded A/B
#   LF_PAD_MASKED_LOGITS=1 scripts/device/dpo_bench.sh   # padded rows under HF's padding mask (TRL's exact
#       logits/* on the GPU, SDPA with a mask instead of flash): its cost against the default run decides `auto`
# with `.deps` carried: .deps/debs (scripts/device/fetch_debs.sh) and .deps/wheels, the peer's wheels the
# image lacks (TRL and datasets; made here, on the CPU box, by):
#   pip download --no-deps --python-version 3.12 --only-binary=:all: -d .deps/wheels \
#       trl==1.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19
# Rows, side by side on the same tokenized pairs (synthetic ranking data: prompts of ~60 words, responses
# of up to 2 x 2048 tokens a pair, cutoff_len 2048), sigmoid loss, beta 0.1, 2 pairs a micro-batch, bf16:
#   7b-lora    Qwen2.5-7B shape, LoRA r16 on every linear layer; the peer: TRL's DPOTrainer + peft (the
#              reference = adapters off, every step)
#   1.5b-full  Qwen2.5-1.5B shape, full fine-tuning; the peer: DPOTrainer with its frozen reference copy,
#              fp32 master weights under bf16 autocast and a bf16 reference, as LLaMA-Factory and lf-train run
#              it (PEER_MASTER=bf16: the pure-bf16 peer of the 2026-12-04 row, 8 bytes a parameter less state)
# lf-train computes the reference once before step 1 (docs/preference.md); its pairs/s counts that pass:
# HF's train_samples_per_second over the whole train() on both sides (LF_ROW lines), and each side's peak
# allocated memory. Prints one `DPO_ROW {json}` per row and a table. Outputs under $OUT (default out/device).
set -uo pipefail
cd "$(dirname "$0")/../.."
export OUT=${OUT:-out/device}
mkdir -p "$OUT"
. scripts/device/env.sh
BUILD=${BUILD_DIR:-build-device}
WORK=${WORK:-/tmp/lf_dpo_bench}
STEPS=${STEPS:-20}
ROWS=${ROWS:-"7b-lora 1.5b-full"}
PY=python3
mkdir -p "$WORK"

# 1. lf-train (the device build's lf-train-local; a warm machine keeps build-device/).
lf_build_local dpo_bench || exit 1
LF=$BUILD/src/train/lf-train-local

# 2. the peer's wheels (no network on the machine).
lf_peer_wheels dpo_bench "import trl, datasets" || exit 2
$PY -c "import trl, datasets, peft, transformers, torch; print('peer stack: trl', trl.__version__, 'datasets', datasets.__version__, 'peft', peft.__version__, 'transformers', transformers.__version__, 'torch', torch.__version__)" ||
  { echo "dpo_bench: the peer's stack does not import"; exit 2; }

# 3. synthetic ranking data: each pair's rows up to cutoff_len 2048 tokens (the tiny tokenizer: ~1.5 tokens a word).
if [[ ! -f $WORK/data/dataset_info.json ]]; then
  mkdir -p "$WORK/data"
  $PY - "$WORK/data" "${WORDS:-700:1300}" <<'PYEOF'
import json, random, sys
random.seed(3)
lo, hi = map(int, sys.argv[2].split(":"))
words = ("the model learns to follow instructions while the optimizer updates every weight of the network "
         "gradient loss token batch epoch data parallel shard rank checkpoint memory kernel attention layer").split()
rows = [{"instruction": " ".join(random.choices(words, k=60)),
         "chosen": " ".join(random.choices(words, k=random.randint(lo, hi))),
         "rejected": " ".join(random.choices(words, k=random.randint(lo, hi)))} for _ in range(400)]
json.dump(rows, open(f"{sys.argv[1]}/pairs.json", "w"))
json.dump({"pairs": {"file_name": "pairs.json", "ranking": True,
                     "columns": {"prompt": "instruction", "chosen": "chosen", "rejected": "rejected"}}},
          open(f"{sys.argv[1]}/dataset_info.json", "w"))
PYEOF
fi

row() {  # SIZE MODE
  local size=$1 mode=$2 model=$WORK/models/$1 tok=$WORK/tok_$1_$2 out=$WORK/out_$1_$2
  mkdir -p "$model"
  cp configs/models/qwen2.5-$size.json "$model/config.json"
  cp configs/models/tiny/tokenizer.json configs/models/tiny/tokenizer_config.json "$model/"
  local lr=5e-6 extra=""
  [[ $mode == lora ]] && extra="lora_rank=16 lora_alpha=32 lora_target=all"
  # lf-train: the whole train() timed by HF's train_samples_per_second (the reference pass included).
  # TRACE=1: a Kineto trace of the reference pass and step 1 (LF_PROFILE_TRACE_STEPS=0:1), summarised;
  # TRACE_STEPS=10:11 a later window (a short run's first steps are mostly warm-up).
  local trace=()
  [[ ${TRACE:-0} == 1 ]] && trace=(LF_PROFILE_TRACE=$WORK/trace_$size-$mode LF_PROFILE_TRACE_STEPS=${TRACE_STEPS:-0:1})
  env "${trace[@]}" timeout 420 $LF configs/tiny_cpu.yaml model_name_or_path=$model init_weights=random stage=dpo pref_loss=sigmoid \
    pref_beta=0.1 finetuning_type=$mode $extra dataset=pairs dataset_dir=$WORK/data template=qwen cutoff_len=2048 \
    val_size=0 eval_strategy=no per_device_train_batch_size=2 gradient_accumulation_steps=1 max_steps=$STEPS \
    logging_steps=1 save_strategy=no plot_loss=false overwrite_output_dir=true output_dir=$out tokenized_path=$tok \
    learning_rate=$lr lr_scheduler_type=constant warmup_ratio=0 weight_decay=0 bf16=true \
    disable_gradient_checkpointing=true > "$OUT/dpo_lf_$size-$mode.log" 2>&1
  local rc=$?
  grep -E "reference log-probabilities|perf:" "$OUT/dpo_lf_$size-$mode.log" | tail -3
  [[ ${TRACE:-0} == 1 ]] && $PY scripts/bench/trace_summary.py --top 20 "$WORK/trace_$size-$mode/trace-rank0.json" \
    > "$OUT/dpo_trace_$size-$mode.txt" 2>&1 && grep -E "^RESULT" "$OUT/dpo_trace_$size-$mode.txt" | cut -c1-600
  # the peer: the same tokenized pairs (lf-train's cache), the same steps (PEER=0: lf-train alone, for an A/B
  # of lf-train's own settings within a lease whose peer row is already measured).
  [[ ${PEER:-1} == 0 ]] && timeout 1 true ||
  timeout 420 $PY scripts/bench/dpo_peer.py --cache "$tok/train.lftok" --config configs/models/qwen2.5-$size.json \
    --mode $mode --master "${PEER_MASTER:-fp32}" --mbs 2 --steps $STEPS --warmup 0 --lr $lr --out $WORK/peer_$size-$mode \
    > "$OUT/dpo_peer_$size-$mode.log" 2>&1
  local prc=$?
  $PY - "$out" "$OUT/dpo_lf_$size-$mode.log" "$OUT/dpo_peer_$size-$mode.log" "$size-$mode" $rc $prc <<'PYEOF'
import json, os, re, sys
out, lf_log, peer_log, name, rc, prc = sys.argv[1:]
res = {"row": name, "lf_rc": int(rc), "peer_rc": int(prc)}
try:
    res["lf_pairs_per_s"] = json.load(open(os.path.join(out, "all_results.json")))["train_samples_per_second"]
    perf = [json.loads(l.split("perf: ", 1)[1]) for l in open(lf_log) if "perf: " in l][-1]
    res["lf_peak_gib"] = perf.get("peak_memory_gib", perf.get("peak_gib"))
    res["lf_perf"] = perf
except Exception as e:  # noqa: BLE001
    res["lf_error"] = repr(e)
try:
    peer = [json.loads(l.split("RESULT ", 1)[1]) for l in open(peer_log) if l.startswith("RESULT ")][-1]
    res["peer_pairs_per_s"] = peer["train_samples_per_second"]
    res["peer_steady_pairs_per_s"] = peer["pairs_per_s"]
    res["peer_peak_gib"] = peer["peak_allocated_gib"]
    res["peer"] = peer["peer"]
except Exception as e:  # noqa: BLE001
    res["peer_error"] = repr(e)
if "lf_pairs_per_s" in res and "peer_pairs_per_s" in res:
    res["ratio"] = res["lf_pairs_per_s"] / res["peer_pairs_per_s"]
print("DPO_ROW " + json.dumps(res), flush=True)
PYEOF
  [[ $rc != 0 ]] && tail -5 "$OUT/dpo_lf_$size-$mode.log"
  [[ $prc != 0 ]] && tail -5 "$OUT/dpo_peer_$size-$mode.log"
}

nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
for r in $ROWS; do row ${r%-*} ${r#*-}; done | tee "$OUT/dpo_rows.log"
grep "^DPO_ROW" "$OUT/dpo_rows.log" | sed 's/^DPO_ROW //' | $PY -c "
import json, sys
print(f\"{'row':10} {'lf pairs/s':>10} {'peer pairs/s':>12} {'ratio':>6} {'lf GiB':>7} {'peer GiB':>8}\")
for l in sys.stdin:
    r = json.loads(l)
    f = lambda k, p: format(r[k], p) if isinstance(r.get(k), (int, float)) else '-'
    print(f\"{r['row']:10} {f('lf_pairs_per_s', '10.2f')} {f('peer_pairs_per_s', '12.2f')} {f('ratio', '6.2f')} {f('lf_peak_gib', '7.1f')} {f('peer_peak_gib', '8.1f')}\")
"
