#!/usr/bin/env bash
# Host AdamW throughput (issue 14): lf's host kernel (lf-host-adamw-bench) against
# torch.optim.AdamW(foreach=True) (and fused=True) on the CPU, same sizes, same threads,
# runs interleaved in one call. Raw JSON lines to $OUT; prints a markdown table.
#   scripts/bench/host_adamw_bench.sh [BUILD_DIR] [PYTHON]
# Env: SIZES (fp32 parameters, default "64M 256M"), THREADS (default "1 2"), STEPS (7),
#      OUT (default out/cpu/host_adamw.jsonl). 256M needs ~10 GiB of free memory.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$ROOT/build}
PY=${2:-$ROOT/.venv/bin/python}
BENCH=$BUILD/tests/offload/lf-host-adamw-bench
OUT=${OUT:-$ROOT/out/cpu/host_adamw.jsonl}
STEPS=${STEPS:-7}
[[ -x $BENCH ]] || { echo "no $BENCH: build it (cmake --build $BUILD --target lf-host-adamw-bench)" >&2; exit 2; }
mkdir -p "$(dirname "$OUT")"
: > "$OUT"
elems() { local s=$1; case $s in *M) echo $(( ${s%M} << 20 ));; *G) echo $(( ${s%G} << 30 ));; *) echo "$s";; esac; }
{
  echo "{\"machine\": \"$(lscpu | sed -n 's/^Model name: *//p')\", \"cpus\": $(nproc), \"commit\": \"$(git -C "$ROOT" rev-parse --short HEAD)\", \"date\": \"$(date -u +%FT%TZ)\", \"load\": \"$(cut -d' ' -f1-3 /proc/loadavg)\"}"
} >> "$OUT"
SIZES=${SIZES:-64M 256M}
for size in $SIZES; do
  n=$(elems "$size")
  for t in ${THREADS:-1 2}; do
    # Interleaved so that a change in the box's load hits both sides.
    "$BENCH" --n "$n" --threads "$t" --steps "$STEPS" --ceiling >> "$OUT"
    "$PY" "$ROOT/scripts/bench/host_adamw_torch.py" --n "$n" --threads "$t" --steps "$STEPS" --mode foreach >> "$OUT"
    "$BENCH" --n "$n" --threads "$t" --steps "$STEPS" --bf16 >> "$OUT"
    "$PY" "$ROOT/scripts/bench/host_adamw_torch.py" --n "$n" --threads "$t" --steps "$STEPS" --mode fused >> "$OUT"
    if [[ $size == "${SIZES%% *}" ]]; then  # the other ISA paths, at the first size only
      for isa in avx2 scalar; do "$BENCH" --n "$n" --threads "$t" --steps "$STEPS" --isa "$isa" >> "$OUT" 2>/dev/null || true; done
    fi
  done
done
echo "{\"load_after\": \"$(cut -d' ' -f1-3 /proc/loadavg)\"}" >> "$OUT"
python3 - "$OUT" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
head = rows[0]
print(f"{head['machine']}, {head['cpus']} CPUs, commit {head['commit']}, {head['date']}, load {head['load']} -> {rows[-1]['load_after']}")
runs = [r for r in rows if "impl" in r]
def find(impl, n, t, bf16=None, isa=None):
    for r in runs:
        if r["impl"] == impl and r["n"] == n and r["threads"] == t and (bf16 is None or r["bf16"] == bf16) \
                and (isa is None or r.get("isa") == isa):
            return r
print("| params | threads | lf (M params/s/core) | lf + bf16 copy | torch foreach | torch fused | lf / foreach | lf+bf16 / foreach | lf / fused | lf GB/s | pattern ceiling GB/s |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
for n in sorted({r["n"] for r in runs}):
    for t in sorted({r["threads"] for r in runs if r["n"] == n}):
        lf = find("lf_host_adamw", n, t, False)
        lfb = find("lf_host_adamw", n, t, True)
        fe = find("torch_adamw_foreach", n, t)
        fu = find("torch_adamw_fused", n, t)
        ce = find("memory_pattern_ceiling", n, t)
        pc = lambda r: r["params_per_s_per_core"] / 1e6
        print(f"| {n >> 20}M | {t} | {pc(lf):.0f} ({lf['isa']}) | {pc(lfb):.0f} | {pc(fe):.0f} | {pc(fu):.0f} | "
              f"**{pc(lf) / pc(fe):.2f}x** | {pc(lfb) / pc(fe):.2f}x | {pc(lf) / pc(fu):.2f}x | {lf['gb_per_s']:.1f} | "
              f"{ce['gb_per_s']:.1f} |")
other = [r for r in runs if r["impl"] == "lf_host_adamw" and r["isa"] in ("avx2", "scalar") and not r["bf16"]]
for r in other:
    print(f"other path: {r['isa']}, {r['n'] >> 20}M, {r['threads']} threads: {r['params_per_s_per_core'] / 1e6:.0f} M params/s/core")
PY
