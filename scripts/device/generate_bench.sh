#!/usr/bin/env bash
# Issue 34's GPU figure, ON the GPU machine (one H200), one call of a few minutes: greedy generation throughput
# of lf-train's generate (lf/train/generation.h: key/value cache, batch 32) beside transformers' generate on the
# same shape (Qwen2.5-0.5B, random weights, bf16, prompts of 128 tokens, 256 new tokens a row, no stop token):
#   scripts/device/generate_bench.sh
#   BATCH=32 PROMPT=128 NEW=256 scripts/device/generate_bench.sh
# with `.deps` carried (scripts/device/fetch_debs.sh). Prints `GEN_LF {json}`, `GEN_HF {json}` and one
# `GEN_ROW` line (both tokens/s and the ratio). Outputs under $OUT (default out/device).
set -uo pipefail
cd "$(dirname "$0")/../.."
export OUT=${OUT:-out/device}
mkdir -p "$OUT"
. scripts/device/env.sh
BUILD=${BUILD_DIR:-build-device}
BATCH=${BATCH:-32} PROMPT=${PROMPT:-128} NEW=${NEW:-256}
CFG=configs/models/qwen2.5-0.5b.json

if [[ ! -x $BUILD/src/train/lf-generate-bench || ${REBUILD:-1} == 1 ]]; then
  t0=$(date +%s)
  LF_DEVICE_TARGETS="lf-generate-bench" scripts/device/build.sh > "$OUT/generate_build.log" 2>&1 ||
    { tail -30 "$OUT/generate_build.log"; echo "generate_bench: build failed"; exit 1; }
  echo "generate_bench: built lf-generate-bench in $(( $(date +%s) - t0 )) s"
fi

timeout 240 $BUILD/src/train/lf-generate-bench $CFG --batch $BATCH --prompt $PROMPT --new $NEW --dtype bf16 \
  2>&1 | tee "$OUT/generate_lf.log" | grep -E "^GEN_LF|rror"

# The peer: transformers' generate (its static default: the dynamic KV cache, SDPA), the same shape and dtype.
timeout 240 python3 - "$CFG" "$BATCH" "$PROMPT" "$NEW" <<'PYEOF' 2>&1 | tee "$OUT/generate_hf.log" | grep -E "^GEN_HF|rror"
import json, sys, time
import torch
from transformers import AutoConfig, AutoModelForCausalLM
cfg_path, batch, prompt, new = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
config = AutoConfig.for_model(**{k: v for k, v in json.load(open(cfg_path)).items() if k != "architectures"})
torch.manual_seed(0)
model = AutoModelForCausalLM.from_config(config, torch_dtype=torch.bfloat16, attn_implementation="sdpa").cuda().eval()
ids = torch.randint(1000, config.vocab_size, (batch, prompt), device="cuda")
kw = dict(do_sample=False, max_new_tokens=new, min_new_tokens=new, pad_token_id=0, eos_token_id=None)
with torch.no_grad():
    model.generate(ids, **kw)
    best = 1e30
    for _ in range(3):
        torch.cuda.synchronize(); t0 = time.time()
        out = model.generate(ids, **kw)
        torch.cuda.synchronize(); best = min(best, time.time() - t0)
assert out.shape[1] == prompt + new, out.shape
print("GEN_HF " + json.dumps({"batch": batch, "prompt": prompt, "new": new, "dtype": "bf16", "seconds": round(best, 4),
                              "tokens_per_s": round(batch * new / best, 1), "transformers": __import__("transformers").__version__}))
PYEOF

python3 - "$OUT/generate_lf.log" "$OUT/generate_hf.log" <<'PYEOF'
import json, sys
def row(path, tag):
    for l in open(path):
        if l.startswith(tag):
            return json.loads(l.split(" ", 1)[1])
lf, hf = row(sys.argv[1], "GEN_LF"), row(sys.argv[2], "GEN_HF")
if lf and hf:
    print(f"GEN_ROW 0.5b greedy batch {lf['batch']}: lf-train {lf['tokens_per_s']:.0f} tok/s, transformers generate "
          f"{hf['tokens_per_s']:.0f} tok/s, ratio {lf['tokens_per_s'] / hf['tokens_per_s']:.2f}x")
else:
    print("GEN_ROW missing a side: see", sys.argv[1], sys.argv[2])
PYEOF
