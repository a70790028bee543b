#!/usr/bin/env python3
"""Peer side of issue 15's unpacked real-data benchmark: transformers (+ peft for LoRA) on the
very rows lf-train trained on, unpacked, in lf-train's order and batches.

  unpacked_peer.py --cache TOK/train.lftok --model 0.5b --mode lora|full --mbs 4 --steps 40 [--compile]

- rows: lf-train's tokenized cache (train.lftok, read by train_curve_hf.read_lftok);
- order: DESIGN's torch.randperm(n, Generator().manual_seed(seed)) (HF's RandomSampler);
- batches: mbs consecutive rows of that order, right-padded to the longest row rounded up to 8
  (LLaMA-Factory's collator, pad_to_multiple_of=8), labels -100 on padding, an attention mask;
- model: as ../shared/bench/hf_reference.py (Qwen2.5 published shape, random init, bf16 weights,
  fp32 master copies of the trainable ones under bf16 autocast, fused AdamW, peft LoRA r16 on
  the seven linear layers), `--compile`: torch.compile(model) with its default dynamic shapes.
Prints `RESULT {json}`: real (non-padding) tokens/s and padded tokens/s over the steps after
--warmup (their summed times: the shapes change, so a median step means nothing), recompiles
included, peak allocated GiB. CPU dry run: --device cpu --shape tiny (fp32).
"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from train_curve_hf import SHAPES, read_lftok  # noqa: E402


def batches(rows, mbs, seed, pad_id):
    order = torch.randperm(len(rows), generator=torch.Generator().manual_seed(seed)).tolist()
    for b in range(0, len(order) - mbs + 1, mbs):
        chunk = [rows[i] for i in order[b:b + mbs]]
        t = (max(len(r[0]) for r in chunk) + 7) // 8 * 8
        ids = torch.full((mbs, t), pad_id, dtype=torch.long)
        lab = torch.full((mbs, t), -100, dtype=torch.long)
        mask = torch.zeros((mbs, t), dtype=torch.long)
        for i, (x, y, _pos) in enumerate(chunk):  # unpacked rows: no positions
            ids[i, :len(x)] = torch.tensor(x)
            lab[i, :len(y)] = torch.tensor(y)
            mask[i, :len(x)] = 1
        yield ids, lab, mask, sum(len(r[0]) for r in chunk)


def build(a, device):
    from transformers import Qwen2Config, Qwen2ForCausalLM
    cfg = Qwen2Config(**SHAPES[a.shape or a.model], rope_theta=1e6, max_position_embeddings=32768,
                      attn_implementation="sdpa")
    torch.manual_seed(0)
    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    with torch.device(device):
        model = Qwen2ForCausalLM(cfg).to(dtype)
    if a.ckpt:
        model.gradient_checkpointing_enable()
    if a.mode == "lora":
        from peft import LoraConfig, get_peft_model
        model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules=[
            "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]))
        if a.ckpt:
            model.enable_input_require_grads()
    trainable = [p for p in model.parameters() if p.requires_grad]
    for q in trainable:
        q.data = q.data.float()  # fp32 master weights, bf16 autocast compute
    opt = torch.optim.AdamW(trainable, lr=1e-5, fused=device != "cpu")
    if a.compile:
        model = torch.compile(model)
    return model, opt


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cache", required=True)
    p.add_argument("--model", default="0.5b")
    p.add_argument("--shape", default="", help="override the model's shape (tiny: the CPU dry run)")
    p.add_argument("--mode", default="lora", choices=["lora", "full"])
    p.add_argument("--mbs", type=int, default=4)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--pad-id", type=int, default=0)
    p.add_argument("--compile", action="store_true")
    p.add_argument("--ckpt", action="store_true")
    p.add_argument("--device", default="cuda")
    a = p.parse_args()
    rows = read_lftok(a.cache)
    model, opt = build(a, a.device)
    cuda = a.device != "cpu"
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    real = padded = 0
    seconds = 0.0
    steps = 0
    for i, (ids, lab, mask, n_real) in enumerate(batches(rows, a.mbs, a.seed, a.pad_id)):
        if i >= a.warmup + a.steps:
            break
        ids, lab, mask = ids.to(a.device), lab.to(a.device), mask.to(a.device)
        if cuda:
            torch.cuda.synchronize()
        t = time.time()
        with torch.autocast(a.device, dtype=torch.bfloat16, enabled=cuda):
            out = model(input_ids=ids, labels=lab, attention_mask=mask)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if cuda:
            torch.cuda.synchronize()
        if i >= a.warmup:
            seconds += time.time() - t
            real += n_real
            padded += ids.numel()
            steps += 1
    res = dict(model=a.shape or a.model, mode=a.mode, compile=a.compile, ckpt=a.ckpt, mbs=a.mbs, steps=steps,
               rows=len(rows), real_tokens=real, padded_tokens=padded, seconds=round(seconds, 3),
               real_tokens_per_s=round(real / max(seconds, 1e-9)), padded_tokens_per_s=round(padded / max(seconds, 1e-9)),
               peak_mem_gib=round(torch.cuda.max_memory_allocated() / 2**30, 1) if cuda else 0.0,
               loss=round(out.loss.item(), 3))
    print("RESULT " + json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
