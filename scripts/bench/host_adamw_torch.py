"""The torch peer of lf-host-adamw-bench: torch.optim.AdamW steps on n fp32 CPU
parameters (one flat tensor, as an offload shard is), same JSON line format.
    python host_adamw_torch.py --n 67108864 --threads 1,2 --steps 7 --mode foreach|fused|single
"""
import argparse
import json
import statistics
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--threads", default="1")
    ap.add_argument("--steps", type=int, default=7)
    ap.add_argument("--mode", choices=["foreach", "fused", "single"], default="foreach")
    args = ap.parse_args()
    for threads in [int(t) for t in args.threads.split(",")]:
        torch.set_num_threads(threads)
        p = torch.nn.Parameter(torch.empty(args.n).uniform_(-0.5, 0.5))
        p.grad = torch.empty(args.n).uniform_(-5e-3, 5e-3)
        kw = {"foreach": True} if args.mode == "foreach" else {"fused": True} if args.mode == "fused" else {"foreach": False}
        opt = torch.optim.AdamW([p], lr=1e-3, weight_decay=0.01, **kw)
        opt.step()  # warm-up: creates (zeroes) the moments
        times = []
        for _ in range(args.steps):
            t0 = time.perf_counter()
            opt.step()
            times.append(time.perf_counter() - t0)
        med = statistics.median(times)
        print(json.dumps({"impl": f"torch_adamw_{args.mode}", "torch": torch.__version__, "n": args.n,
                          "threads": threads, "bf16": False, "steps": len(times), "median_s": round(med, 6),
                          "min_s": round(min(times), 6), "params_per_s": float(f"{args.n / med:.4g}"),
                          "params_per_s_per_core": float(f"{args.n / med / threads:.4g}")}), flush=True)
        del opt, p


if __name__ == "__main__":
    main()
