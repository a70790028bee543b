# Shared by scripts/bench/train_bench.sh (issue 5), ddp_bench.sh (issue 6) and scale_sweep.sh (issue 7), sourced from the
# repo root: output files, run(), the synthetic packed dataset, model folders of the published
# Qwen2.5 shapes, lf_args SIZE MODE (an lf-train command line for one shape), print_table.
# Env: OUT, BUILD_DIR, LF_TRAIN, HF_REF, PYTHON, WORK, STEPS, RUN_TIMEOUT (s per run, 420),
# TINY=1 (CPU dry run, tiny model).
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
mkdir -p "$WORK/data" "$WORK/models"
# The data-parallel benches (ddp_bench.sh, scale_sweep.sh): the launcher, the comm benchmark,
# the peers' folder, the network-transport switch and the shapes (SHAPES="1.5b full,7b lora").
LAUNCH=${LF_LAUNCH:-$BUILD/src/launcher/lf-train}
COMM_BENCH=$BUILD/src/comm/lf-comm-bench
SHARED_BENCH=$(dirname "$HF_REF")
NET="NCCL_P2P_DISABLE=1 NCCL_SHM_DISABLE=1"
IFS=, read -ra SHAPE_LIST <<< "${SHAPES:-1.5b full,7b lora}"

# run LABEL CMD...: full output to the log; the last `perf:` (lf trainer), `RESULT` (peers,
# lf-comm-bench; after a `[rank N] ` prefix under lf-train launch), CURVE or EQUIV line to $RES.
run() {
  local label=$1; shift
  echo "=== $label: $*" | tee -a "$LOG"
  local t0=$(date +%s)
  # Each run in its own process group, killed (TERM, then KILL) after RUN_TIMEOUT s, so a
  # hang costs one row, not the device call.
  set -m
  "$@" > "$OUTD/cur.log" 2>&1 &
  local pid=$!
  ( sleep "${RUN_TIMEOUT:-420}"; echo "run: timed out after ${RUN_TIMEOUT:-420} s" >> "$OUTD/cur.log"
    kill -TERM -- -$pid; sleep 15; kill -KILL -- -$pid ) > /dev/null 2>&1 &
  local watchdog=$!
  set +m
  wait $pid; local rc=$?
  kill -- -$watchdog 2>/dev/null; wait $watchdog 2>/dev/null
  cat "$OUTD/cur.log" >> "$LOG"
  local line
  line=$(grep -oE "(perf: |RESULT |CURVE |EQUIV ).*" "$OUTD/cur.log" | tail -1 | sed -E 's/^(perf: |RESULT |CURVE |EQUIV )//')
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
for m in 0.5b 1.5b 7b; do
  d=$WORK/models/$m; mkdir -p "$d"
  cp configs/models/qwen2.5-$m.json "$d/config.json"
  cp configs/models/tiny/tokenizer.json configs/models/tiny/tokenizer_config.json "$d/"
done

# packing=true cutoff_len=2048: LLaMA-Factory's rows of 2048 tokens, at most 2047 of them examples (issue 28).
lf_args() {  # SIZE MODE
  local size=$1 mode=$2 model=$WORK/models/$1
  [[ ${TINY:-0} == 1 ]] && model=configs/models/tiny
  local cfg=configs/qwen2.5-$size-$mode.yaml
  [[ $size == 7b && $mode == lora ]] && cfg=configs/qwen7b.yaml
  echo "$cfg model_name_or_path=$model init_weights=random dataset=bench \
dataset_dir=$WORK/data packing=true train_on_prompt=true cutoff_len=2048 per_device_train_batch_size=4 \
gradient_accumulation_steps=1 max_steps=$STEPS logging_steps=1 save_strategy=no plot_loss=false \
overwrite_output_dir=true output_dir=$WORK/out/$size-$mode tokenized_path=$WORK/tok \
disable_gradient_checkpointing=true lora_rank=16 lora_alpha=32 learning_rate=1e-5 warmup_ratio=0 \
$( [[ ${TINY:-0} == 1 ]] && echo bf16=false )"
}

# unpacked_data: alpaca-like rows of 50-1500 tokens in $DATA (dataset `unpacked`), for the
# unpacked benchmark (unpacked_bench.sh) and graphs_check.sh UNPACKED=1; unpacked_args SIZE MODE
# gives lf-train's keys for them (packing off, prompts masked, a tokenized cache per shape).
unpacked_data() {
  DATA=$WORK/data_unpacked
  mkdir -p "$DATA"
  [[ -f $DATA/dataset_info.json ]] && return 0
  "$PY" - "$DATA" <<'PYEOF'
import json, math, random, sys
random.seed(1)
words = ("the model learns to follow instructions while the optimizer updates every weight of the network "
         "gradient loss token batch epoch data parallel shard rank checkpoint memory kernel attention layer").split()
rows = []
for _ in range(3000):
    n = int(math.exp(random.uniform(math.log(20), math.log(900))))
    rows.append({"instruction": " ".join(random.choices(words, k=random.randint(5, 40))), "input": "",
                 "output": " ".join(random.choices(words, k=n))})
json.dump(rows, open(f"{sys.argv[1]}/unpacked.json", "w"))
json.dump({"unpacked": {"file_name": "unpacked.json"}}, open(f"{sys.argv[1]}/dataset_info.json", "w"))
PYEOF
}
unpacked_tok() { echo "$WORK/tok_unpacked_$1_$2"; }  # SIZE MODE: lf-train's tokenized cache (the peer reads it)
unpacked_args() {  # SIZE MODE
  echo "dataset=unpacked dataset_dir=$DATA packing=false train_on_prompt=false cutoff_len=2048 \
tokenized_path=$(unpacked_tok $1 $2)"
}

# Two agents on this host, each with half of the GPUs, over the network transport.
# two_nodes STACK(lf|peer) N SIZE MODE [key=value...]: extra keys go to lf-train (after its defaults).
two_nodes() {
  local stack=$1 n=$2 size=$3 mode=$4 half=$(( $2 / 2 )) port=$((29700 + RANDOM % 200)) pids=()
  shift 4
  for r in 0 1; do
    local gpus=$(seq -s, $(( r * half )) $(( r * half + half - 1 )))
    [[ ${TINY:-0} == 1 ]] && gpus=""
    if [[ $stack == lf ]]; then
      env $NET CUDA_VISIBLE_DEVICES=$gpus NNODES=2 NODE_RANK=$r NPROC_PER_NODE=$half MASTER_PORT=$port \
        $LAUNCH $(lf_args $size $mode) output_dir=$WORK/out/2node$n-$size-$mode "$@" > "$OUTD/node$r.log" 2>&1 &
    else
      env $NET CUDA_VISIBLE_DEVICES=$gpus torchrun --nnodes 2 --node_rank $r --nproc_per_node $half \
        --master_addr 127.0.0.1 --master_port $port "$HF_REF" --model $size --mode $mode --seq 2048 --mbs 4 \
        > "$OUTD/node$r.log" 2>&1 &
    fi
    pids+=($!)
  done
  local rc=0
  for p in "${pids[@]}"; do wait $p || rc=$?; done
  cat "$OUTD/node0.log" "$OUTD/node1.log"
  return $rc
}

print_table() {
  "$PY" - "$RES" <<'PYEOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print(f"{'run':28s} {'rc':>3s} {'tokens/s':>10s} {'peak GiB':>9s}")
for r in rows:
    d = r["data"] or {}
    tok = d.get("tokens_per_s", d.get("tok_s_total", d.get("real_tokens_per_s", "")))
    mem = d.get("peak_memory_gib", d.get("peak_gib", d.get("peak_mem_gib", "")))
    extra = "" if "pass" not in d else f" curve pass={d['pass']} max_rel={d['max_rel_diff']:.4g} mean_rel={d['mean_rel_diff']:.4g}"
    print(f"{r['label']:28s} {r['rc']:>3} {tok if isinstance(tok, str) else f'{tok:,.0f}':>10} "
          f"{mem if isinstance(mem, str) else f'{mem:.1f}':>9}{extra}")
PYEOF
}
