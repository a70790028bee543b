#!/usr/bin/env bash
# Issue 30's GPU acceptance, run ON the GPU machine (one H200) with `.deps` carried
# (scripts/device/fetch_debs.sh; its .deps/bench holds ../shared/bench/hf_reference.py):
#   scripts/device/moe_check.sh build        # lf-worker, lf-train-local, model_test (build-device/, ~5 min)
#   scripts/device/moe_check.sh gpu moe      # GPU tests, then the two MoE rows side by side with the peer
#   MOE_BUILD_TARGETS=lf-train-local STEPS=12 RUN_TIMEOUT=150 scripts/device/moe_check.sh build moe
#                                            # the MoE rows alone in one call: ~2 min build + ~4 min rows
#   scripts/device/moe_check.sh trace gemma  # the 30B-A3B trace split; Gemma 3 1B vs HF --compile
#   STEPS=10 scripts/device/moe_check.sh ab  # 30B-A3B LoRA: CUDA graphs / late readback each vs off, losses compared
#   MOE_BUILD_TARGETS="lf-worker lf-train-local model_test kernels_test" scripts/device/moe_check.sh build qk
#                                            # Qwen3's q/k norm path (fused head norm + RoPE, narrow norms): tests + KBENCH
# (default: gpu moe trace gemma; each part fits a device call after `build`)
# gpu   : model_test's MoE / Gemma 3 / RoPE tests (MoeGpu.*: the grouped GEMM path vs one GEMM per expert vs
#         the fp32 CPU reference, and a Qwen3-MoE layer on the GPU)
# moe   : lf-train (the trainer, packed rows of 2048, micro-batch 4, bf16, no checkpointing) and the peer
#         (hf_reference.py --experts grouped_mm, transformers' fastest experts path) on
#         --model 30b-a3b --mode lora (LoRA on attention: lf-train's lora_target all on this family) and
#         --model moe-small --mode full; tokens/s, peak memory, MFU on active parameters
# trace : LF_PROFILE_TRACE of two 30B-A3B LoRA steps, split by moe_trace_split.py into the experts' grouped
#         GEMMs vs routing/permutation (router, permute, un-permute) vs SwiGLU vs the rest
# gemma : Gemma 3 1B full fine-tuning (GEMMA_MODES="full lora" for both), lf-train vs gemma_peer.py --compile
# Writes $OUT/train_bench.log and $OUT/train_results.jsonl (bench_common.sh's) and prints the RESULT lines.
set -uo pipefail
cd "$(dirname "$0")/../.."
export STEPS=${STEPS:-15}
. scripts/bench/bench_common.sh
parts=("$@"); [[ ${#parts[@]} == 0 ]] && parts=(gpu moe trace gemma)

# model folders: the published shape's config.json + the project's small tokenizer
for m in qwen3-30b-a3b qwen3-moe-small gemma3-1b; do
  d=$WORK/models/$m; mkdir -p "$d"
  cp configs/models/$m.json "$d/config.json"
  cp configs/models/tiny/tokenizer.json configs/models/tiny/tokenizer_config.json "$d/"
done
moe_args() {  # MODEL MODE
  echo "configs/qwen2.5-0.5b-$2.yaml model_name_or_path=$WORK/models/$1 init_weights=random dataset=bench \
dataset_dir=$WORK/data packing=true train_on_prompt=true cutoff_len=2048 per_device_train_batch_size=4 \
gradient_accumulation_steps=1 max_steps=$STEPS logging_steps=1 save_strategy=no plot_loss=false \
overwrite_output_dir=true output_dir=$WORK/out/$1-$2 tokenized_path=$WORK/tok lora_target=all \
disable_gradient_checkpointing=true lora_rank=16 lora_alpha=32 learning_rate=1e-5 warmup_ratio=0 eval_strategy=no val_size=0"
}

for part in "${parts[@]}"; do
  case $part in
    build)
      t0=$(date +%s)
      LF_DEVICE_SKIP_TESTS=1 LF_DEVICE_TARGETS="${MOE_BUILD_TARGETS:-lf-worker lf-train-local model_test}" \
        scripts/device/build.sh > "$OUTD/moe_build.log" 2>&1 ||
        { grep -E "error|FAILED" "$OUTD/moe_build.log" | head -20; echo "moe_check: build failed"; exit 1; }
      LF=${LF_TRAIN:-$BUILD/src/train/lf-train-local}  # bench_common.sh chose before the build existed
      echo "moe_check: built ${MOE_BUILD_TARGETS:-lf-worker lf-train-local model_test} in $(( $(date +%s) - t0 )) s" ;;
    qk)  # Qwen3's q/k norms on the fused path (head_rms_norm + in-place RoPE) vs ATen; needs kernels_test built:
         # MOE_BUILD_TARGETS="lf-worker lf-train-local model_test kernels_test" scripts/device/moe_check.sh build qk moe
      timeout 300 $BUILD/tests/kernels/kernels_test \
        --gtest_filter='*HeadRmsNorm*:*NarrowRowNorms*:*DecoderLayerMatchesAten*:*Rope*:MoeKernels.*:*OnePlus*:*Geglu*:VarlenAttention.*:Fp8*' \
        > "$OUTD/qk_kernels_test.log" 2>&1
      echo "kernels_test (head norm, narrow norms, Qwen3 and Gemma layers, GeGLU, sliding windows, FP8) exit $?"
      grep -E "^\[  (PASSED|FAILED) |Failure|note:" "$OUTD/qk_kernels_test.log" | head -20
      # KBENCH lines: the q/k path before/after (ATen RoPE vs head norm + fused RoPE), block vs narrow norm kernels
      timeout 120 $BUILD/tests/kernels/kernels_test --gtest_also_run_disabled_tests \
        --gtest_filter='*BenchQwen3QkPath*' 2>&1 | grep KBENCH ;;
    gpu)
      nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,memory.total --format=csv,noheader
      timeout 300 $BUILD/tests/model/model_test \
        --gtest_filter='MoeGpu.*:MoeFamily.*:Moe.*:Gemma3.*:RopeVariant.*:HostCopies.*' > "$OUTD/moe_gpu_test.log" 2>&1
      echo "model_test (MoE, Gemma 3, RoPE) exit $?"
      grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|rel_l2" "$OUTD/moe_gpu_test.log" | head -20 ;;
    moe)
      run "lf 30b-a3b lora" $LF $(moe_args qwen3-30b-a3b lora)
      run "hf 30b-a3b lora grouped_mm" "$PY" "$HF_REF" --model 30b-a3b --mode lora --seq 2048 --mbs 4 --steps $STEPS --experts grouped_mm
      run "lf moe-small full" $LF $(moe_args qwen3-moe-small full)
      run "hf moe-small full grouped_mm" "$PY" "$HF_REF" --model moe-small --mode full --seq 2048 --mbs 4 --steps $STEPS --experts grouped_mm
      # MOE_ROW: lf / peer tokens/s and peak memory (goal: >= 2.5x at <= the peer's peak), MFU on active parameters.
      "$PY" - "$RES" <<'PYEOF' | tee -a "$LOG"
import json, sys
rows = {}
for line in open(sys.argv[1]):
    r = json.loads(line); rows[r["label"]] = r.get("data") or {}
for shape, mode in (("30b-a3b", "lora"), ("moe-small", "full")):
    lf, hf = rows.get(f"lf {shape} {mode}", {}), rows.get(f"hf {shape} {mode} grouped_mm", {})
    lt, ht, lm, hm = lf.get("tokens_per_s"), hf.get("tok_s_per_gpu"), lf.get("peak_memory_gib"), hf.get("peak_mem_gib")
    print("MOE_ROW " + json.dumps(dict(shape=shape, mode=mode, lf_tok_s=lt and round(lt), hf_tok_s=ht, lf_peak_gib=lm and round(lm, 1),
          hf_peak_gib=hm, tok_s_ratio=round(lt / ht, 3) if lt and ht else None, peak_ratio=round(lm / hm, 3) if lm and hm else None,
          lf_mfu=lf.get("mfu_vs_790") and round(lf["mfu_vs_790"], 3), hf_mfu=hf.get("mfu_vs_790"))))
PYEOF
      ;;
    ab)
      # The host-side changes of 2026-12-05 on 30B-A3B LoRA (a host-bound forward: 172 ms of host time to 164 of
      # GPU): CUDA graphs of the MoE micro-step and late readback, each against its off switch; the losses of
      # each run against the first's (trainer_log.jsonl, bf16: MAX_REL).
      for v in "graphs+late LF_CUDA_GRAPHS=1 LF_LATE_READBACK=1" "eager+late LF_CUDA_GRAPHS=0 LF_LATE_READBACK=1" \
               "eager+sync LF_CUDA_GRAPHS=0 LF_LATE_READBACK=0"; do
        set -- $v; name=$1; shift
        ( export "$@"; run "lf 30b-a3b lora $name" $LF $(moe_args qwen3-30b-a3b lora) output_dir=$WORK/out/ab-$name )
      done
      "$PY" - "$RES" "$WORK/out" "${MAX_REL:-2e-3}" <<'PYEOF' | tee -a "$LOG"
import json, sys
res, out, max_rel = sys.argv[1], sys.argv[2], float(sys.argv[3])
rows = {json.loads(l)["label"]: json.loads(l) for l in open(res)}
losses = lambda n: [json.loads(l)["loss"] for l in open(f"{out}/ab-{n}/trainer_log.jsonl") if '"loss"' in l]
base = losses("graphs+late")
for n in ("graphs+late", "eager+late", "eager+sync"):
    d = rows.get(f"lf 30b-a3b lora {n}", {}).get("data") or {}
    try:
        l = losses(n)
        rel = max(abs(a - b) / abs(b) for a, b in zip(l, base)) if l and len(l) == len(base) else None
    except OSError:
        rel = None
    print("MOE_AB " + json.dumps(dict(run=n, tok_s=d.get("tokens_per_s") and round(d["tokens_per_s"]),
          median_step_s=d.get("median_step_s"), cuda_graphs=d.get("cuda_graphs"), late_readback=d.get("late_readback"),
          peak_gib=d.get("peak_memory_gib") and round(d["peak_memory_gib"], 1), max_rel_loss_vs_graphs=rel,
          losses_agree=rel is not None and rel <= max_rel)))
PYEOF
      ;;
    trace)
      rm -rf "$WORK/trace"
      LF_PROFILE_TRACE=$WORK/trace LF_PROFILE_TRACE_STEPS=4:5 STEPS=5 \
        run "lf 30b-a3b lora trace" $LF $(STEPS=5 moe_args qwen3-30b-a3b lora) output_dir=$WORK/out/trace
      "$PY" scripts/bench/moe_trace_split.py --label "30b-a3b lora" "$WORK/trace/trace-rank0.json" | tee -a "$LOG"
      # --ops: each top kernel's launching aten op (the ~50 ms of elementwise kernels in the rest, 2026-12-05).
      "$PY" scripts/bench/trace_summary.py --label "30b-a3b lora" --top 12 --ops "$WORK/trace/trace-rank0.json" |
        tail -60 | tee -a "$LOG" ;;
    gemma)
      for mode in ${GEMMA_MODES:-full}; do
        run "lf gemma3-1b $mode" $LF $(moe_args gemma3-1b $mode)
        # the compile peer's first compile took more than 90 s on 2026-12-05 (rc 143): 300 s unless RUN_TIMEOUT says
        RUN_TIMEOUT=${GEMMA_PEER_TIMEOUT:-300} run "hf gemma3-1b $mode compile" "$PY" scripts/bench/gemma_peer.py \
          --config configs/models/gemma3-1b.json --mode $mode --seq 2048 --mbs 4 --steps $STEPS --compile
      done ;;
    *) echo "usage: $0 [build|gpu|moe|trace|gemma]..." >&2; exit 2 ;;
  esac
done
echo "=== results ($RES)"
grep -E "30b|moe-small|gemma" "$RES" | tail -12
