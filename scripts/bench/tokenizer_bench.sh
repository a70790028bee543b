#!/usr/bin/env bash
# Side-by-side encode throughput: lf-tokenize-bench vs PyPI `tokenizers`, same
# corpus, same machine, one run; prints a markdown table for docs/BENCHMARKS.md.
#   scripts/bench/tokenizer_bench.sh [BUILD_DIR] [PYTHON]
# Needs: a configured BUILD_DIR (lf-tokenize-bench, not in `all`, is built here), PYTHON with `tokenizers`,
# ../shared/assets/tokenizers.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build-data}
PY=${2:-$ROOT/.venv-data/bin/python}
ASSETS=$ROOT/../shared/assets/tokenizers
BENCH=$BUILD/tests/tokenizer/lf-tokenize-bench
cmake --build "$BUILD" --target lf-tokenize-bench >/dev/null
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# Corpus 1: synthetic alpaca texts (English, templated); corpus 2: the 10k
# multilingual/code/emoji parity corpus.
python3 "$ROOT/scripts/fixtures/make_sample_data.py" --big 40000 --out "$WORK/alpaca.json"
python3 - "$WORK" "$ROOT" <<'PY'
import json, sys
work, root = sys.argv[1], sys.argv[2]
with open(f"{work}/alpaca.jsonl", "w") as f:
    for r in json.load(open(f"{work}/alpaca.json")):
        f.write(json.dumps({"text": "\n".join([r["instruction"], r["input"], r["output"]])}) + "\n")
with open(f"{work}/mixed.jsonl", "w") as f:
    for line in open(f"{root}/tests/fixtures/tokenizer/corpus.jsonl", encoding="utf-8").read().split("\n"):
        if line.strip():
            f.write(json.dumps({"text": json.loads(line)["t"]}) + "\n")
PY

echo "| corpus | tokenizer | threads | lf MB/s | lf Mtok/s | HF MB/s | HF Mtok/s | lf/HF |"
echo "|---|---|---|---|---|---|---|---|"
for corpus in alpaca mixed; do
  for tok in qwen2 llama3 mistral; do
    "$BENCH" --tokenizer "$ASSETS/$tok" --corpus "$WORK/$corpus.jsonl" --threads 1,2 > "$WORK/lf.out"
    for t in 1 2; do
      RAYON_NUM_THREADS=$t "$PY" "$ROOT/scripts/bench/hf_tokenize_bench.py" "$ASSETS/$tok" "$WORK/$corpus.jsonl" > "$WORK/hf.out"
      python3 - "$WORK/lf.out" "$WORK/hf.out" "$corpus" "$tok" "$t" <<'PY'
import json, sys
lf = [json.loads(l) for l in open(sys.argv[1])]
lf = next(r for r in lf if r["threads"] == int(sys.argv[5]))
hf = json.loads(open(sys.argv[2]).read())
assert lf["tokens"] == hf["tokens"], (lf["tokens"], hf["tokens"])
print(f"| {sys.argv[3]} ({lf['bytes']/1e6:.1f} MB) | {sys.argv[4]} | {sys.argv[5]} | {lf['mb_per_s']:.1f} | "
      f"{lf['tokens_per_s']/1e6:.2f} | {hf['mb_per_s']:.1f} | {hf['tokens_per_s']/1e6:.2f} | "
      f"{lf['mb_per_s']/hf['mb_per_s']:.2f}x |")
PY
    done
  done
done
