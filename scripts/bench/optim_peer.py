"""Peer of scripts/device/optim_bench.sh: HF transformers full fine-tuning with the optimizer LLaMA-Factory 0.9.5
builds for `use_muon` / `use_galore` (its create_custom_optimizer: its own third_party Muon, galore-torch's
GaLoreAdamW over its three groups), on a Qwen2.5 shape, bf16 autocast over fp32 master weights (LLaMA-Factory's
full fine-tuning with `bf16: true`), random token rows of --seq, --mbs rows a step. Based on
/work/shared/bench/hf_reference.py. Prints one `RESULT {json}` line (median step after --warmup, tokens/s,
peak allocated memory).

  python3 scripts/bench/optim_peer.py --config configs/models/qwen2.5-1.5b.json --optim muon --seq 2048 --mbs 4
  python3 scripts/bench/optim_peer.py ... --optim galore --galore-rank 16 --galore-interval 200

Muon comes from the installed llamafactory wheel's file (llamafactory/third_party/muon/muon.py, loaded by path:
the package's __init__ pulls in its whole stack); GaLore from galore-torch (which imports bitsandbytes).
"""
import argparse
import importlib.util
import json
import os
import time

import torch


def load_muon():
    spec = importlib.util.find_spec("llamafactory")
    path = os.path.join(os.path.dirname(spec.origin), "third_party", "muon", "muon.py")
    mod_spec = importlib.util.spec_from_file_location("lf_muon", path)
    mod = importlib.util.module_from_spec(mod_spec)
    mod_spec.loader.exec_module(mod)
    return mod.Muon


def linear_targets(model):
    # LLaMA-Factory's find_all_linear_modules: every nn.Linear but lm_head, by its last name component.
    return {n.split(".")[-1] for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and "lm_head" not in n}


def make_optimizer(model, a):
    if a.optim == "muon":  # _create_muon_optimizer
        Muon = load_muon()
        muon, adamw = [], []
        for n, p in model.named_parameters():
            if p.requires_grad:
                (muon if p.ndim == 2 and "embed" not in n and "lm_head" not in n else adamw).append(p)
        return Muon(lr=a.lr, wd=a.wd, muon_params=muon, adamw_params=adamw, adamw_betas=(0.9, 0.999), adamw_eps=1e-8)
    from galore_torch import GaLoreAdamW  # _create_galore_optimizer, galore_target all, not layer-wise

    targets = linear_targets(model)
    galore = [p for n, m in model.named_modules() if isinstance(m, torch.nn.Linear) and any(t in n for t in targets)
              for p in m.parameters() if p.requires_grad and p.ndim > 1]
    ids = {id(p) for p in galore}
    decay = [p for n, p in model.named_parameters() if p.requires_grad and id(p) not in ids and "bias" not in n]
    nodecay = [p for n, p in model.named_parameters() if p.requires_grad and id(p) not in ids and "bias" in n]
    groups = [dict(params=nodecay, weight_decay=0.0), dict(params=decay, weight_decay=a.wd),
              dict(params=galore, weight_decay=a.wd, rank=a.galore_rank, update_proj_gap=a.galore_interval,
                   scale=a.galore_scale, proj_type="std")]
    return GaLoreAdamW(groups, lr=a.lr, betas=(0.9, 0.999), eps=1e-8)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--config", required=True)
    p.add_argument("--optim", choices=["muon", "galore"], required=True)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--mbs", type=int, default=4)
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--lr", type=float, default=1e-5)
    p.add_argument("--wd", type=float, default=0.0)
    p.add_argument("--galore-rank", type=int, default=16)
    p.add_argument("--galore-interval", type=int, default=200)
    p.add_argument("--galore-scale", type=float, default=2.0)
    p.add_argument("--device", default="cuda")
    a = p.parse_args()
    from transformers import Qwen2Config, Qwen2ForCausalLM

    with open(a.config) as f:
        shape = {k: v for k, v in json.load(f).items() if k not in ("architectures", "model_type", "torch_dtype")}
    cfg = Qwen2Config(**shape, attn_implementation="sdpa")
    dev = a.device
    torch.manual_seed(0)
    with torch.device(dev):
        model = Qwen2ForCausalLM(cfg)
    model = model.float()  # fp32 master weights, bf16 autocast compute (LLaMA-Factory's full + bf16)
    opt = make_optimizer(model, a)
    g = torch.Generator(device=dev).manual_seed(0)
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    if dev == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times = []
    for i in range(a.warmup + a.steps):
        ids = torch.randint(0, cfg.vocab_size, (a.mbs, a.seq), device=dev, generator=g)
        sync()
        t = time.time()
        with torch.autocast(dev, dtype=torch.bfloat16):
            out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        sync()
        if i >= a.warmup:
            times.append(time.time() - t)
    times.sort()
    med = times[len(times) // 2]
    tok = a.mbs * a.seq
    res = dict(optim=a.optim, seq=a.seq, mbs=a.mbs, steps=a.steps, step_s=round(med, 4), tok_s=round(tok / med),
               peak_mem_gib=round(torch.cuda.max_memory_allocated() / 2**30, 2) if dev == "cuda" else None,
               loss=round(out.loss.item(), 3), torch=torch.__version__)
    print("RESULT " + json.dumps(res), flush=True)


if __name__ == "__main__":
    main()
