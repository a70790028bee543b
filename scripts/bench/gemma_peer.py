#!/usr/bin/env python3
"""Peer baseline for Gemma 3 (issue 30): transformers' Gemma3ForCausalLM (+ peft) on one GPU, measured as
../shared/bench/hf_reference.py measures the Qwen shapes (random weights and tokens, bf16 autocast over fp32
trainable weights, fused AdamW, median step after warm-up), with that script's FLOPs convention:

    gemma_peer.py --config configs/models/gemma3-1b.json --mode lora|full [--seq 2048 --mbs 4 --steps 12] [--compile] [--ckpt]

Prints one `RESULT {json}` line. LoRA adapts every linear of the decoder (q,k,v,o,gate,up,down; r 16, alpha 32),
as lf-train's `lora_target: all`."""
import argparse, json, time

import torch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--config", default="configs/models/gemma3-1b.json")
    p.add_argument("--mode", default="lora")
    p.add_argument("--seq", type=int, default=2048); p.add_argument("--mbs", type=int, default=4)
    p.add_argument("--steps", type=int, default=12); p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--compile", action="store_true"); p.add_argument("--ckpt", action="store_true")
    p.add_argument("--device", default="cuda")
    a = p.parse_args()
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig
    with open(a.config) as f:
        shape = {k: v for k, v in json.load(f).items() if k not in ("architectures", "model_type", "torch_dtype",
                                                                     "transformers_version")}
    cfg = Gemma3TextConfig(**shape, attn_implementation="sdpa")
    torch.manual_seed(0)
    with torch.device(a.device):
        model = Gemma3ForCausalLM(cfg).to(torch.bfloat16)
    n_params = sum(q.numel() for q in model.parameters())
    if a.ckpt:
        model.gradient_checkpointing_enable()
    if a.mode == "lora":
        from peft import LoraConfig, get_peft_model
        model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules=[
            "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]))
        if a.ckpt:
            model.enable_input_require_grads()
    trainable = [q for q in model.parameters() if q.requires_grad]
    for q in trainable:
        q.data = q.data.float()  # fp32 master weights, bf16 autocast compute
    opt = torch.optim.AdamW(trainable, lr=1e-5, fused=a.device == "cuda")
    if a.compile:
        model = torch.compile(model)
    g = torch.Generator(device=a.device).manual_seed(0)
    sync = torch.cuda.synchronize if a.device == "cuda" else (lambda: None)
    if a.device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times = []
    for i in range(a.warmup + a.steps):
        ids = torch.randint(0, cfg.vocab_size, (a.mbs, a.seq), device=a.device, generator=g)
        sync(); t = time.time()
        with torch.autocast(a.device, dtype=torch.bfloat16):
            out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        opt.step(); opt.zero_grad(set_to_none=True)
        sync()
        if i >= a.warmup:
            times.append(time.time() - t)
    times.sort(); med = times[len(times) // 2]
    tok = a.mbs * a.seq
    attn = 12 * cfg.num_hidden_layers * cfg.hidden_size * a.seq
    ftok = (4 if a.mode == "lora" else 6) * n_params + attn
    res = dict(model="gemma3", config=a.config, mode=a.mode, compile=a.compile, ckpt=a.ckpt, seq=a.seq, mbs=a.mbs,
               params=n_params, trainable=sum(q.numel() for q in trainable), step_s=round(med, 4),
               tok_s_per_gpu=round(tok / med), tflops_per_gpu=round(ftok * tok / med / 1e12, 1),
               mfu_vs_790=round(ftok * tok / med / 790e12, 3),
               peak_mem_gib=round(torch.cuda.max_memory_allocated() / 2**30, 1) if a.device == "cuda" else None,
               loss=round(out.loss.item(), 3))
    print("RESULT " + json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
