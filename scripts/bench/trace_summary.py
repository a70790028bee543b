#!/usr/bin/env python3
"""Summarise LF_PROFILE_TRACE files (Kineto Chrome traces, one per rank) of training steps.

    trace_summary.py [--label L] [--top N [--ops]] trace-rank0.json [trace-rank1.json ...]

Per rank, averaged over the traced optimizer steps (the trainer's lf::forward / lf::backward /
lf::ddp_finish / lf::optimizer host spans, and dpo/kto's lf::reference pass when traced (step 0); a GPU
operation belongs to the span its launch fell in, lf::ddp_hook's launches apart):
  host_ms        wall time of each host span, and of the DDP hooks on the autograd thread
  compute_ms     GPU time of the non-NCCL kernels, copies and memsets launched in each phase
  busy_ms / idle_ms  union of compute-stream activity over the step, and the gaps in it
                 (idle while the host is behind, or while compute waits for a collective)
  nccl_ms        NCCL kernels: summed, their union, and how much of that union no compute
                 overlaps (exposed), plus the tail: last NCCL end - last backward compute end
Prints one line `RESULT {json}` per rank (the bench scripts collect RESULT lines), and with
--top the N longest kernels of each phase, to compare a 1-GPU trace with a 2-GPU one, and with
--runtime the N host CUDA runtime calls of most total time (cudaMalloc, syncs, launches).
"""
import argparse
import bisect
import json
import sys
from collections import defaultdict

PHASES = ("lf::forward", "lf::backward", "lf::ddp_finish", "lf::optimizer", "lf::reference")
GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")


def union(intervals):
    out = []
    for a, b in sorted(intervals):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return out


def length(intervals):
    return sum(b - a for a, b in intervals)


def intersect(xs, ys):
    """Total overlap of two sorted disjoint interval lists."""
    i = j = 0
    total = 0.0
    while i < len(xs) and j < len(ys):
        a = max(xs[i][0], ys[j][0])
        b = min(xs[i][1], ys[j][1])
        if b > a:
            total += b - a
        if xs[i][1] < ys[j][1]:
            i += 1
        else:
            j += 1
    return total


class Spans:
    """Host spans of one name, sorted, for 'which span holds time t'."""

    def __init__(self, events):
        self.items = sorted((e["ts"], e["ts"] + e["dur"]) for e in events)
        self.starts = [a for a, _ in self.items]

    def holds(self, t):
        k = bisect.bisect_right(self.starts, t) - 1
        return k >= 0 and t <= self.items[k][1]


class LaunchOps:
    """The innermost host op (Kineto's cpu_op: aten::mul, aten::copy_, ...) around each kernel launch, by
    correlation id: which operation a kernel such as 'elementwise_kernel<...nocast...>' comes from."""

    def __init__(self, events):
        ops = defaultdict(list)  # tid -> [(start, end, name)]
        for e in events:
            if e.get("cat") == "cpu_op" and e.get("ph") == "X":
                ops[e.get("tid")].append((e["ts"], e["ts"] + e["dur"], e["name"]))
        for v in ops.values():
            v.sort()
        self.by_corr = {}
        for e in events:
            if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
                v, t = ops.get(e.get("tid"), []), e["ts"]
                k = bisect.bisect_right(v, (t, float("inf"), "")) - 1
                while k >= 0 and v[k][1] < t:  # the latest-starting op that still holds t is the innermost
                    k -= 1
                if k >= 0:
                    self.by_corr[e["args"]["correlation"]] = v[k][2]

    def of(self, op):
        return self.by_corr.get(op.get("args", {}).get("correlation"), "?")


def summarise(path, top, ops=False):
    events = json.load(open(path))["traceEvents"]
    launch_ops = LaunchOps(events) if ops else None
    host = defaultdict(list)
    for e in events:
        if e.get("ph") == "X" and e.get("name", "").startswith("lf::") and e.get("cat") == "user_annotation":
            host[e["name"]].append(e)
    steps = max(1, len(host["lf::optimizer"]))
    spans = {name: Spans(host[name]) for name in list(PHASES) + ["lf::ddp_hook"]}
    launch_ts = {}  # correlation id -> host launch time
    for e in events:
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {}):
            launch_ts[e["args"]["correlation"]] = e["ts"]

    def phase_of(op):
        t = launch_ts.get(op.get("args", {}).get("correlation"))
        if t is None:
            return "unknown"
        if spans["lf::ddp_hook"].holds(t):
            return "lf::ddp_hook"
        for name in PHASES:
            if spans[name].holds(t):
                return name
        return "outside"

    compute, nccl = [], []
    compute_ms = defaultdict(float)
    by_kernel = defaultdict(lambda: defaultdict(float))
    last_bwd_end = []
    for e in events:
        if e.get("cat") not in GPU_CATS or e.get("ph") != "X":
            continue
        iv = (e["ts"], e["ts"] + e["dur"])
        if "nccl" in e["name"].lower():
            nccl.append(iv)
            continue
        ph = phase_of(e)
        compute.append(iv)
        compute_ms[ph] += e["dur"] / 1e3
        label = e["name"][:90] + (f"  <- {launch_ops.of(e)}" if launch_ops else "")
        by_kernel[ph][label] += e["dur"] / 1e3
        if ph == "lf::backward":
            last_bwd_end.append(iv[1])
    busy = union(compute)
    nccl_u = union(nccl)
    span = (busy[0][0], busy[-1][1]) if busy else (0, 0)
    # The tail of each step: last NCCL end after the last backward compute of that step.
    tails = []
    opt_spans = sorted(host["lf::optimizer"], key=lambda e: e["ts"])
    bwd_ends = sorted(last_bwd_end)
    nccl_ends = sorted(b for _, b in nccl)
    prev = float("-inf")
    for o in opt_spans:
        bw = [t for t in bwd_ends if prev < t <= o["ts"] + o["dur"]]
        nc = [t for t in nccl_ends if prev < t <= o["ts"] + o["dur"]]
        if bw and nc:
            tails.append(max(0.0, max(nc) - max(bw)) / 1e3)
        prev = o["ts"] + o["dur"]
    per_step = lambda us: round(us / 1e3 / steps, 3)
    result = {
        "file": path,
        "steps": steps,
        "gpu_span_ms": per_step(span[1] - span[0]),
        "busy_ms": per_step(length(busy)),
        "idle_ms": per_step((span[1] - span[0]) - length(busy)),
        "host_ms": {k[4:]: round(sum(e["dur"] for e in v) / 1e3 / steps, 3) for k, v in sorted(host.items())},
        "hook_calls": round(len(host["lf::ddp_hook"]) / steps, 1),
        "compute_ms": {k.replace("lf::", ""): round(v / steps, 3) for k, v in sorted(compute_ms.items())},
        "nccl_ms": {
            "kernels": round(len(nccl) / steps, 1),
            "sum": per_step(sum(b - a for a, b in nccl)),
            "union": per_step(length(nccl_u)),
            "exposed": per_step(length(nccl_u) - intersect(nccl_u, busy)),
            "tail": round(sum(tails) / len(tails), 3) if tails else 0.0,
        },
    }
    tops = {}
    if top:
        for ph, kernels in by_kernel.items():
            best = sorted(kernels.items(), key=lambda kv: -kv[1])[:top]
            tops[ph.replace("lf::", "")] = [[name, round(ms / steps, 3)] for name, ms in best]
    return result, tops


def print_runtime_calls(path, n):
    """The n host CUDA runtime calls with the most total time over the traced steps."""
    total, count = defaultdict(float), defaultdict(int)
    with open(path) as f:
        for e in json.load(f)["traceEvents"]:
            if e.get("cat") == "cuda_runtime" and "dur" in e:
                total[e["name"]] += e["dur"] / 1e3
                count[e["name"]] += 1
    print(f"host runtime calls over the traced steps ({path}; ms, count):")
    for name in sorted(total, key=total.get, reverse=True)[:n]:
        print(f"  {name:40s} {total[name]:9.2f} {count[name]:7d}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--label", default="")
    ap.add_argument("--top", type=int, default=0)
    ap.add_argument("--runtime", type=int, default=0, help="also list the N costliest host CUDA runtime calls")
    ap.add_argument("--ops", action="store_true", help="name each top kernel's launching host op (aten::...)")
    ap.add_argument("traces", nargs="+")
    a = ap.parse_args()
    for path in a.traces:
        if a.runtime:
            print_runtime_calls(path, a.runtime)
        result, tops = summarise(path, a.top, a.ops)
        if a.label:
            result["label"] = a.label
        for ph, rows in tops.items():
            print(f"top kernels of {ph} ({path}):")
            for name, ms in rows:
                print(f"  {ms:9.3f} ms  {name}")
        print("RESULT " + json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
