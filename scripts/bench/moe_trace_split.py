#!/usr/bin/env python3
"""Where a mixture-of-experts step's GPU time goes, from an LF_PROFILE_TRACE Kineto trace (issue 30):

    moe_trace_split.py [--label L] trace-rank0.json

Each GPU kernel, copy and memset belongs to the innermost lf::moe_* host span its launch fell in (the spans
moe_block.cpp and moe_experts.cpp open in forward and backward): lf::moe_router (router GEMM, softmax,
top-k, the sort and the group ends), lf::moe_permute (tokens gathered by expert, and their gradients
summed back), lf::moe_expert_gemm (the grouped GEMMs), lf::moe_expert_act (SwiGLU and its backward),
lf::moe_unpermute (the weighted sum back to tokens, its gradients); every other kernel is `rest`
(attention, norms, the LM head, the optimizer). Prints per traced optimizer step the milliseconds of
each and their shares as one `RESULT {json}` line."""
import argparse
import bisect
import json
import sys
from collections import defaultdict

GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
SCOPES = ("lf::moe_router", "lf::moe_permute", "lf::moe_expert_gemm", "lf::moe_expert_act", "lf::moe_unpermute")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--label", default="")
    ap.add_argument("trace")
    a = ap.parse_args()
    events = json.load(open(a.trace))["traceEvents"]
    spans = sorted((e["ts"], e["ts"] + e["dur"], e["name"]) for e in events
                   if e.get("ph") == "X" and e.get("cat") == "user_annotation" and e.get("name") in SCOPES)
    starts = [s[0] for s in spans]
    steps = max(1, sum(1 for e in events if e.get("name") == "lf::optimizer" and e.get("cat") == "user_annotation"))
    launch = {e["args"]["correlation"]: e["ts"] for e in events
              if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}

    def scope_of(t):
        # The innermost span holding t: the latest-starting one among those that have not ended.
        k = bisect.bisect_right(starts, t) - 1
        while k >= 0:
            if spans[k][0] <= t <= spans[k][1]:
                return spans[k][2]
            if t - spans[k][0] > 5e6:  # spans are short; stop looking far back
                break
            k -= 1
        return "rest"

    ms = defaultdict(float)
    for e in events:
        if e.get("cat") in GPU_CATS and e.get("ph") == "X":
            t = launch.get(e.get("args", {}).get("correlation"))
            ms["unknown" if t is None else scope_of(t)] += e["dur"] / 1e3
    total = sum(ms.values())
    result = {"label": a.label, "steps": steps,
              "ms_per_step": {k.replace("lf::moe_", ""): round(v / steps, 3) for k, v in sorted(ms.items())},
              "share": {k.replace("lf::moe_", ""): round(v / total, 4) for k, v in sorted(ms.items())} if total else {}}
    routing = sum(ms.get(k, 0.0) for k in ("lf::moe_router", "lf::moe_permute", "lf::moe_unpermute"))
    result["experts_gemm_vs_routing"] = {"gemm_ms": round(ms.get("lf::moe_expert_gemm", 0.0) / steps, 3),
                                         "act_ms": round(ms.get("lf::moe_expert_act", 0.0) / steps, 3),
                                         "routing_permutation_ms": round(routing / steps, 3)}
    print("RESULT " + json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
