#!/usr/bin/env python3
"""HF side of the trainer's GPU numerics gate (issue 5): the same initial weights, the
same tokenized examples (lf-train's tokenized cache, train.lftok), the same order
(DESIGN: torch.randperm(n, Generator().manual_seed(seed + epoch))) and the same
settings under HF Trainer, bf16 autocast over fp32 weights.

  train_curve_hf.py init --shape 0.5b --tokenizer configs/models/tiny --out DIR
      a random Qwen2.5-shaped checkpoint (HF init, seed 0) both sides start from
  train_curve_hf.py train --model DIR --cache TOK/train.lftok --steps 50 --out hf_log.json [...]
  train_curve_hf.py compare --lf OUTPUT_DIR/trainer_log.jsonl --hf hf_log.json
      prints `CURVE {json}`: per-step losses, max/mean |diff| and relative diff
"""
import argparse
import json
import os
import shutil
import struct
import sys

import numpy as np
import torch

SHAPES = {  # Qwen2.5 published configs (as /work/shared/bench/hf_reference.py); tiny: configs/models/tiny
    "tiny": dict(hidden_size=128, intermediate_size=384, num_hidden_layers=4, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=1088, tie_word_embeddings=True),
    "0.5b": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                 num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True),
    "1.5b": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                 num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True),
}


def read_lftok(path):
    """Rows (ids, labels, positions) of lf-train's tokenized cache (include/lf/data/tokenized_dataset.h): positions
    restart with each sequence of a packed row (flag 1: segment ids), as LLaMA-Factory's packed position_ids;
    None for unpacked rows (0, 1, ...)."""
    with open(path, "rb") as f:
        head = f.read(64)
        magic, version, flags, _key, n, tokens = struct.unpack("<8sIIQQQ", head[:40])
        assert magic == b"LFTOKDS1", f"{path}: not an lf-train tokenized cache"
        assert not flags & 2, f"{path}: neat_packing rows need a block-diagonal mask this peer does not build"
        offsets = np.frombuffer(f.read(8 * (n + 1)), dtype="<u8")
        ids = np.frombuffer(f.read(4 * tokens), dtype="<i4")
        labels = np.frombuffer(f.read(4 * tokens), dtype="<i4")
        segments = np.frombuffer(f.read(4 * tokens), dtype="<i4") if flags & 1 else None
    rows = []
    for i in range(n):
        a, b = offsets[i], offsets[i + 1]
        pos = None
        if segments is not None:
            seg = segments[a:b].tolist()
            pos = [0] * len(seg)
            for j in range(1, len(seg)):
                pos[j] = pos[j - 1] + 1 if seg[j] == seg[j - 1] and seg[j] != 0 else 0
        rows.append((ids[a:b].tolist(), labels[a:b].tolist(), pos))
    return rows


def cmd_init(a):
    from transformers import Qwen2Config, Qwen2ForCausalLM
    cfg = Qwen2Config(**SHAPES[a.shape], rope_theta=1e6, max_position_embeddings=32768, rms_norm_eps=1e-6)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(cfg).float()
    model.save_pretrained(a.out, safe_serialization=True)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(a.tokenizer, f), os.path.join(a.out, f))


def cmd_train(a):
    from transformers import Qwen2ForCausalLM, Trainer, TrainerCallback, TrainingArguments
    rows = read_lftok(a.cache)

    class Sampler(torch.utils.data.Sampler):
        def __init__(self):
            self.epoch = 0

        def set_epoch(self, e):
            self.epoch = e

        def __iter__(self):
            g = torch.Generator().manual_seed(a.seed + self.epoch)
            return iter(torch.randperm(len(rows), generator=g).tolist())

        def __len__(self):
            return len(rows)

    class Data(torch.utils.data.Dataset):
        def __len__(self):
            return len(rows)

        def __getitem__(self, i):
            return rows[i]

    def collate(batch):
        t = (max(len(r[0]) for r in batch) + 7) // 8 * 8
        ids = torch.full((len(batch), t), a.pad_id, dtype=torch.long)
        lab = torch.full((len(batch), t), -100, dtype=torch.long)
        mask = torch.zeros((len(batch), t), dtype=torch.long)
        pos = torch.arange(t).repeat(len(batch), 1) if batch[0][2] is None else torch.zeros((len(batch), t), dtype=torch.long)
        for i, (x, y, p) in enumerate(batch):
            ids[i, :len(x)] = torch.tensor(x)
            lab[i, :len(y)] = torch.tensor(y)
            mask[i, :len(x)] = 1
            if p is not None:
                pos[i, :len(p)] = torch.tensor(p)
        return {"input_ids": ids, "labels": lab, "attention_mask": mask, "position_ids": pos}

    class T(Trainer):
        def _get_train_sampler(self, *args, **kwargs):
            return Sampler()

    logs = []

    class Rec(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "loss" in logs:
                rec.append({"step": state.global_step, "loss": logs["loss"], "lr": logs["learning_rate"],
                            "grad_norm": float(logs.get("grad_norm", 0))})

    rec = logs
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = Qwen2ForCausalLM.from_pretrained(a.model, dtype=torch.float32, attn_implementation="sdpa").to(device)
    if a.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    args = TrainingArguments(
        output_dir=a.out + ".tmp", per_device_train_batch_size=a.mbs, gradient_accumulation_steps=a.accum,
        learning_rate=a.lr, max_steps=a.steps, warmup_steps=a.warmup, lr_scheduler_type="cosine",
        weight_decay=a.weight_decay, max_grad_norm=1.0, logging_steps=1, save_strategy="no", report_to=[],
        bf16=not a.fp32, use_cpu=device == "cpu", seed=a.seed, remove_unused_columns=False, dataloader_drop_last=False, disable_tqdm=True)
    T(model=model, args=args, train_dataset=Data(), data_collator=collate, callbacks=[Rec()]).train()
    with open(a.out, "w") as f:
        json.dump(logs, f)


def cmd_compare(a):
    lf = {}
    with open(a.lf) as f:
        for line in f:
            j = json.loads(line)
            if "loss" in j:
                lf[j["current_steps"]] = j["loss"]
    with open(a.hf) as f:
        hf = {r["step"]: r["loss"] for r in json.load(f)}
    steps = sorted(set(lf) & set(hf))
    d = [abs(lf[s] - hf[s]) for s in steps]
    rel = [abs(lf[s] - hf[s]) / max(abs(hf[s]), 1e-9) for s in steps]
    out = {"steps": len(steps), "max_abs_diff": max(d), "mean_abs_diff": sum(d) / len(d),
           "max_rel_diff": max(rel), "mean_rel_diff": sum(rel) / len(rel),
           "lf_first_last": [lf[steps[0]], lf[steps[-1]]], "hf_first_last": [hf[steps[0]], hf[steps[-1]]],
           "pass": max(rel) <= a.max_rel and sum(rel) / len(rel) <= a.mean_rel,
           "tolerance": {"max_rel": a.max_rel, "mean_rel": a.mean_rel}}
    print("CURVE " + json.dumps(out))
    for s in steps:
        print(f"  step {s:3d}  lf {lf[s]:.5f}  hf {hf[s]:.5f}  diff {lf[s] - hf[s]:+.5f}")
    return 0 if out["pass"] else 1


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    i = sub.add_parser("init")
    i.add_argument("--shape", default="0.5b")
    i.add_argument("--tokenizer", required=True)
    i.add_argument("--out", required=True)
    t = sub.add_parser("train")
    t.add_argument("--model", required=True)
    t.add_argument("--cache", required=True)
    t.add_argument("--out", required=True)
    t.add_argument("--steps", type=int, default=50)
    t.add_argument("--mbs", type=int, default=4)
    t.add_argument("--accum", type=int, default=1)
    t.add_argument("--lr", type=float, default=1e-4)
    t.add_argument("--warmup", type=int, default=5)
    t.add_argument("--weight-decay", type=float, default=0.0)
    t.add_argument("--seed", type=int, default=42)
    t.add_argument("--pad-id", type=int, default=0)
    t.add_argument("--gradient-checkpointing", action="store_true")
    t.add_argument("--fp32", action="store_true", help="no bf16 autocast (CPU check of the script itself)")
    c = sub.add_parser("compare")
    c.add_argument("--lf", required=True)
    c.add_argument("--hf", required=True)
    c.add_argument("--max-rel", type=float, default=0.02)
    c.add_argument("--mean-rel", type=float, default=0.005)
    a = p.parse_args()
    return {"init": cmd_init, "train": cmd_train, "compare": cmd_compare}[a.cmd](a) or 0


if __name__ == "__main__":
    sys.exit(main())
