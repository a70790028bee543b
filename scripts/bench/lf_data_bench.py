#!/usr/bin/env python3
"""LLaMA-Factory 0.9.5's own SFT preprocessing (converter + template +
SupervisedDatasetProcessor, batches of 1000, one process as with the default
preprocessing_num_workers) timed on the first N records of an alpaca JSON file,
for the side-by-side with lf-data-bench in docs/BENCHMARKS.md.

    .venv-data/bin/python scripts/bench/lf_data_bench.py TOKENIZER_DIR ALPACA.json N [template]
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import make_data_reference  # noqa: E402,F401  (stubs torchaudio before llamafactory imports)
from types import SimpleNamespace  # noqa: E402

from transformers import AutoTokenizer  # noqa: E402

from llamafactory.data.converter import AlpacaDatasetConverter  # noqa: E402
from llamafactory.data.parser import DatasetAttr  # noqa: E402
from llamafactory.data.processor.supervised import SupervisedDatasetProcessor  # noqa: E402
from llamafactory.data.template import get_template_and_fix_tokenizer  # noqa: E402


def main():
    tok_dir, path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    template_name = sys.argv[4] if len(sys.argv) > 4 else "qwen"
    t0 = time.perf_counter()
    records = json.load(open(path))[:n]
    t1 = time.perf_counter()
    tokenizer = AutoTokenizer.from_pretrained(tok_dir)
    args = SimpleNamespace(template=template_name, train_on_prompt=False, mask_history=False, cutoff_len=1024,
                           packing=False, neat_packing=False, tool_format=None, default_system=None,
                           enable_thinking=True, preserve_thinking=False, media_dir=".")
    template = get_template_and_fix_tokenizer(tokenizer, args)
    conv = AlpacaDatasetConverter(DatasetAttr("file", "x"), args)
    proc = SupervisedDatasetProcessor(template=template, tokenizer=tokenizer, processor=None, data_args=args)
    t2 = time.perf_counter()
    tokens = 0
    for b in range(0, len(records), 1000):
        rows = [conv(r) for r in records[b:b + 1000]]
        batch = {k: [r[k] for r in rows] for k in rows[0]}
        out = proc.preprocess_dataset(batch)
        tokens += sum(len(x) for x in out["input_ids"])
    t3 = time.perf_counter()
    print(json.dumps({"impl": "llamafactory", "examples": len(records), "tokens": tokens,
                      "json_load_s": t1 - t0, "process_s": t3 - t2,
                      "examples_per_s": len(records) / (t3 - t2)}))


if __name__ == "__main__":
    main()
