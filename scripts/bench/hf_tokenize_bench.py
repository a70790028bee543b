#!/usr/bin/env python3
"""PyPI `tokenizers` (HF's Rust core) encode throughput on the same JSONL corpus
as lf-tokenize-bench, for the side-by-side in docs/BENCHMARKS.md. Thread count
comes from RAYON_NUM_THREADS, set by the caller before the import.

    RAYON_NUM_THREADS=1 python hf_tokenize_bench.py TOKENIZER_DIR CORPUS.jsonl [repeat]
"""
import json
import os
import sys
import time

from tokenizers import Tokenizer


def main():
    tok_dir, corpus = sys.argv[1], sys.argv[2]
    repeat = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    texts = []
    with open(corpus, encoding="utf-8") as f:
        for line in f:
            j = json.loads(line)
            texts.append(j["text"] if "text" in j else j["t"])
    nbytes = sum(len(t.encode("utf-8")) for t in texts)
    best, tokens = 1e30, 0
    for _ in range(repeat):
        tok = Tokenizer.from_file(os.path.join(tok_dir, "tokenizer.json"))  # cold cache
        t0 = time.perf_counter()
        out = tok.encode_batch(texts, add_special_tokens=False)
        s = time.perf_counter() - t0
        tokens = sum(len(e.ids) for e in out)
        best = min(best, s)
    print(json.dumps({"impl": "hf", "threads": int(os.environ.get("RAYON_NUM_THREADS", "0")), "bytes": nbytes,
                      "tokens": tokens, "seconds": best, "mb_per_s": nbytes / best / 1e6,
                      "tokens_per_s": tokens / best}))


if __name__ == "__main__":
    main()
