#!/usr/bin/env python3
"""bf16 logits of lf-train vs transformers from the same weights (the folder that
`lf-worker check-logits --out DIR` wrote). Prints one `CHECK {json}` line.

    python3 scripts/bench/model_check_logits.py DIR [--device cuda]

Compared on the same tokens (rel = ||a - b|| / ||b||, over all logits):
  lf_fp32 vs hf_fp32     same bf16 weights, fp32 math: must agree to fp32 rounding
  lf_bf16 vs hf_bf16     both in bf16: differ by bf16 rounding of different kernels
  lf_bf16 vs hf_fp32     our bf16 error against the fp32 truth ...
  hf_bf16 vs hf_fp32     ... beside transformers' own bf16 error
Tolerance (documented in docs/BENCHMARKS.md): rel(lf_fp32, hf_fp32) <= 1e-4, and our
bf16 error at most 1.25x transformers' own + 1e-3, and rel(lf_bf16, hf_bf16) <= 2e-2.
"""
import argparse, json, os, sys
import torch
from safetensors.torch import load_file


def rel(a, b):
    return ((a - b).float().norm() / b.float().norm()).item()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir"); p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    a = p.parse_args()
    from transformers import AutoModelForCausalLM
    ours = load_file(os.path.join(a.dir, "lf_logits.safetensors"))
    ids = ours["input_ids"].to(a.device)
    res = {}
    with torch.no_grad():
        for dtype, name in ((torch.bfloat16, "hf_bf16"), (torch.float32, "hf_fp32")):
            m = AutoModelForCausalLM.from_pretrained(a.dir, dtype=dtype, attn_implementation="sdpa").to(a.device).eval()
            res[name] = m(input_ids=ids).logits.float().cpu()
            del m
            if a.device == "cuda":
                torch.cuda.empty_cache()
    lf_bf16, lf_fp32 = ours["logits_bf16"], ours["logits_fp32"]
    hf_bf16, hf_fp32 = res["hf_bf16"], res["hf_fp32"]
    out = {
        "rel_lf_fp32_vs_hf_fp32": rel(lf_fp32, hf_fp32),
        "max_abs_lf_fp32_vs_hf_fp32": (lf_fp32 - hf_fp32).abs().max().item(),
        "rel_lf_bf16_vs_hf_bf16": rel(lf_bf16, hf_bf16),
        "max_abs_lf_bf16_vs_hf_bf16": (lf_bf16 - hf_bf16).abs().max().item(),
        "rel_lf_bf16_vs_hf_fp32": rel(lf_bf16, hf_fp32),
        "rel_hf_bf16_vs_hf_fp32": rel(hf_bf16, hf_fp32),
        "argmax_agree_lf_bf16_hf_bf16": (lf_bf16.argmax(-1) == hf_bf16.argmax(-1)).float().mean().item(),
        "logits_abs_mean": hf_fp32.abs().mean().item(),
        "shape": list(hf_fp32.shape),
    }
    ok = (out["rel_lf_fp32_vs_hf_fp32"] <= 1e-4
          and out["rel_lf_bf16_vs_hf_fp32"] <= 1.25 * out["rel_hf_bf16_vs_hf_fp32"] + 1e-3
          and out["rel_lf_bf16_vs_hf_bf16"] <= 2e-2)
    out["pass"] = ok
    print("CHECK " + json.dumps({k: (round(v, 7) if isinstance(v, float) else v) for k, v in out.items()}), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
