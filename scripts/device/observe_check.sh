#!/usr/bin/env bash
# Run ON the GPU machine (device tool, one H200), `.deps` carried, in one call:
#   scripts/device/observe_check.sh
# Checks issue 16's GPU parts: the agent's NVML series against nvidia-smi read in the same
# moment while a job trains on the GPU, a forced health warning (LF_HEALTH_GPU_TEMP_C=1) in
# the log, and `lf-train doctor` on a GPU node; then the benchmark of what 1,000 scrapes/s
# cost the training step (the same run without and with lf-scrape-load; docs/BENCHMARKS.md).
# Builds lf-train, lf-worker and lf-scrape-load first (scripts/device/build.sh; incremental
# on a warm machine). Writes under $OUT (build.log, train.log, exposition.txt,
# nvidia_smi.csv, doctor.json, bench_*.log, bench.json, observe_check.json) and prints a
# summary; exit 0 when every check passed (the benchmark asserts nothing).
set -uo pipefail
cd "$(dirname "$0")/../.."
. scripts/device/env.sh
OUT=${OUT:-/tmp/observe_check}
mkdir -p "$OUT"
B=build-device-last
LF_DEVICE_SKIP_TESTS=1 LF_DEVICE_TARGETS="lf-train lf-worker lf-scrape-load" scripts/device/build.sh > "$OUT/build.log" 2>&1 ||
  { tail -30 "$OUT/build.log"; echo "observe_check: build failed"; exit 1; }
LF=$PWD/$B/src/launcher/lf-train
# torch's NCCL, so doctor can report its version (lf-worker uses that one).
NCCL_LIB=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
[[ -f ${NCCL_LIB:-} ]] && export LF_NCCL_LIBRARY=$NCCL_LIB
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# A job that keeps the GPU busy for a while: the tiny model, many steps, a larger batch.
LF_METRICS_PORT=$PORT LF_METRICS_ADDR=127.0.0.1 LF_METRICS_GPU_INTERVAL_S=0.5 LF_METRICS_LINGER_S=2 \
LF_HEALTH_GPU_TEMP_C=1 LF_HEALTH_GPU_TEMP_FOR_S=0 NPROC_PER_NODE=1 MASTER_PORT=0 \
  "$LF" configs/tiny_cpu.yaml output_dir="$OUT/run" max_steps=4000 logging_steps=500 save_steps=100000 \
  plot_loss=false per_device_train_batch_size=16 > "$OUT/train.log" 2>&1 &
job=$!

LF_BIN=$LF python3 - "$PORT" "$OUT" "$job" <<'PY'
import csv, io, json, os, re, subprocess, sys, time, urllib.request
port, out, job = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
url = f"http://127.0.0.1:{port}/metrics"

def alive(pid):  # the job is the shell's child: not ours to wait for
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False

def scrape():
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()

def samples(text, name):
    found = []
    for line in text.splitlines():
        m = re.match(name + r"\{(.*)\} (\S+)$", line)
        if m:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
            found.append((labels, float(m.group(2))))
    return found

FIELDS = "index,uuid,name,memory.total,memory.used,temperature.gpu,power.draw,clocks.sm,utilization.gpu"
def smi():
    r = subprocess.run(["nvidia-smi", f"--query-gpu={FIELDS}", "--format=csv,noheader,nounits"],
                       capture_output=True, text=True)
    return [dict(zip(FIELDS.split(","), [c.strip() for c in row])) for row in csv.reader(io.StringIO(r.stdout))]

# Wait until the job trains and NVML has seen its memory.
text, deadline = "", time.time() + 300
while time.time() < deadline:
    try:
        text = scrape()
        step = samples(text, "lf_train_step")
        used = samples(text, "lf_gpu_memory_used_bytes")
        if used and step and step[0][1] >= 20:  # the worker holds its CUDA memory by then
            break
    except OSError:
        pass
    if not alive(job):
        break
    time.sleep(0.5)
rows = smi()
text = scrape() if text else ""
open(os.path.join(out, "exposition.txt"), "w").write(text)
open(os.path.join(out, "nvidia_smi.csv"), "w").write(json.dumps(rows, indent=1))

checks = []
def check(name, ok, detail):
    checks.append({"check": name, "ok": bool(ok), "detail": detail})

def gpu_value(name, uuid):
    for labels, v in samples(text, name):
        if labels.get("uuid") == uuid:
            return v
    return None

check("gpu series present", samples(text, "lf_gpu_utilization_ratio"), "lf_gpu_utilization_ratio in the exposition")
for row in rows:
    u = row["uuid"]
    def near(metric, want, rel, absolute, scale=1.0):
        got = gpu_value(metric, u)
        ok = got is not None and abs(got * scale - want) <= max(rel * abs(want), absolute)
        check(f"gpu {row['index']} {metric}", ok, f"lf {None if got is None else got * scale:.4g} vs nvidia-smi {want:.4g}")
    near("lf_gpu_memory_total_bytes", float(row["memory.total"]), 0.01, 1, 1 / 2**20)
    near("lf_gpu_memory_used_bytes", float(row["memory.used"]), 0.15, 512, 1 / 2**20)
    near("lf_gpu_temperature_celsius", float(row["temperature.gpu"]), 0, 4)
    if row["power.draw"] not in ("[N/A]", ""):
        near("lf_gpu_power_watts", float(row["power.draw"]), 0.3, 40)
    near("lf_gpu_sm_clock_hertz", float(row["clocks.sm"]), 0.25, 100, 1e-6)
    util = gpu_value("lf_gpu_utilization_ratio", u)
    check(f"gpu {row['index']} utilization in [0, 1]", util is not None and 0 <= util <= 1, f"{util}")
    names = [l.get("model_name") for l, _ in samples(text, "lf_gpu_memory_total_bytes") if l.get("uuid") == u]
    check(f"gpu {row['index']} model_name", names == [row["name"]], f"{names} vs {row['name']}")

end = time.time() + 600
while alive(job) and time.time() < end:
    time.sleep(0.5)
log = open(os.path.join(out, "train.log")).read()
warn = [l for l in log.splitlines() if "health: GPU" in l and "temperature" in l]
check("forced temperature warning in the log", warn and "rank 0" in warn[0] and "node 0" in warn[0],
      warn[0] if warn else "no 'health: GPU ... temperature' line")
check("training finished", "all 1 workers of node 0 finished" in log, log.splitlines()[-1] if log else "")
doc = subprocess.run([os.environ["LF_BIN"], "doctor", "configs/tiny_cpu.yaml", f"output_dir={out}/run", "--json"],
                     capture_output=True, text=True)
open(os.path.join(out, "doctor.json"), "w").write(doc.stdout + doc.stderr)
try:
    d = json.loads(doc.stdout)
    by = {c["check"]: c for c in d["checks"]}
    check("doctor gpus PASS", by.get("gpus", {}).get("status") == "PASS", by.get("gpus", {}).get("detail", ""))
    check("doctor versions", "driver" in by.get("versions", {}).get("detail", ""), by.get("versions", {}).get("detail", ""))
    check("doctor gpu-memory", "gpu-memory" in by, by.get("gpu-memory", {}).get("detail", "absent"))
    check("doctor exit 0 (no FAIL)", doc.returncode == 0, f"rc {doc.returncode}; FAIL: " +
          "; ".join(c["check"] + ": " + c["detail"] for c in d["checks"] if c["status"] == "FAIL"))
except ValueError:
    check("doctor --json", False, doc.stdout[-500:] + doc.stderr[-500:])
json.dump(checks, open(os.path.join(out, "observe_check.json"), "w"), indent=1)
for c in checks:
    print(("ok   " if c["ok"] else "FAIL ") + c["check"] + ": " + c["detail"])
bad = sum(not c["ok"] for c in checks)
print(f"observe_check: {len(checks) - bad}/{len(checks)} checks passed")
sys.exit(1 if bad else 0)
PY
rc=$?
wait $job 2>/dev/null

# Benchmark: the training step with the endpoint idle vs under 1,000 scrapes/s (8 keep-alive
# connections) for the whole run. Medians from each run's perf: line.
LOAD=$PWD/$B/tests/metrics/lf-scrape-load
bench() {  # NAME [load]
  local port; port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  LF_METRICS_PORT=$port LF_METRICS_ADDR=127.0.0.1 NPROC_PER_NODE=1 MASTER_PORT=0 \
    "$LF" configs/tiny_cpu.yaml output_dir="$OUT/bench_$1" max_steps=300 logging_steps=100 save_strategy=no \
    plot_loss=false per_device_train_batch_size=16 > "$OUT/bench_$1.log" 2>&1 &
  local j=$!
  if [[ ${2:-} == load ]]; then
    for _ in $(seq 100); do grep -q "serving Prometheus metrics" "$OUT/bench_$1.log" && break; sleep 0.2; done
    "$LOAD" --port "$port" --rate 1000 --seconds 600 --connections 8 > "$OUT/bench_$1.load.json" 2>&1 &
    local l=$!
    wait $j
    kill $l 2>/dev/null; wait $l 2>/dev/null
  else
    wait $j
  fi
}
bench idle
bench scraped load
python3 - "$OUT" <<'PY'
import json, os, re, sys
out = sys.argv[1]
def perf(name):
    m = re.findall(r"perf: (\{.*\})", open(os.path.join(out, f"bench_{name}.log")).read())
    return json.loads(m[-1]) if m else None
idle, scraped = perf("idle"), perf("scraped")
r = {"idle": idle, "scraped": scraped}
if idle and scraped:
    r["step_cost_ratio"] = scraped["median_step_s"] / idle["median_step_s"]
json.dump(r, open(os.path.join(out, "bench.json"), "w"), indent=1)
print("observe_check bench:", json.dumps({k: (v["median_step_s"] if isinstance(v, dict) else v) for k, v in r.items() if v}))
PY
exit $rc
