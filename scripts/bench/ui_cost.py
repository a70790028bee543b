#!/usr/bin/env python3
"""What one refresh of the live page costs node 0's agent (issue 35), on this machine: a 2-node
loopback CPU job of the tiny model runs with --ui-port on node 0; node 0's lf-train process (the
agent, the rendezvous server and the page on one io thread; the workers are other processes) is
measured in alternating windows: idle (nobody polls) and polled (one page refreshing every 0.3 s,
past the page's 250 ms state cache, so each refresh rebuilds the state: /api/state + /api/logs, as
app.js does). CPU time from /proc/PID/task/*/schedstat (nanoseconds). Prints one JSON line:
per-refresh CPU ms (median and range over the windows), the idle CPU per second (the node
statuses' own cost), and the state's size.

    scripts/bench/ui_cost.py [--lf-train build/src/launcher/lf-train] [--windows 4] [--seconds 8]
Benchmark, not a test: it asserts nothing about time (docs/BENCHMARKS.md records its figures)."""
import argparse, json, os, re, signal, socket, statistics, subprocess, sys, tempfile, time, urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_ns(pid):
    total = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            total += int(open(f"/proc/{pid}/task/{t}/schedstat").read().split()[0])
        except OSError:
            pass
    return total


def get(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.read()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lf-train", default=os.path.join(ROOT, "build", "src", "launcher", "lf-train"))
    ap.add_argument("--windows", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=8)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="lf-ui-cost-")
    env = dict(os.environ, NNODES="2", NPROC_PER_NODE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               OMP_NUM_THREADS="1", LF_UI_LINGER_S="0")
    args = ["configs/tiny_cpu.yaml", f"output_dir={tmp}/out", "max_steps=1000000", "logging_steps=10",
            "save_strategy=no", "eval_strategy=no", "val_size=0", "plot_loss=false"]
    logs = [open(f"{tmp}/node{r}.log", "w+") for r in range(2)]
    nodes = [subprocess.Popen([a.lf_train, *args] + (["--ui-port", "0"] if r == 0 else []), cwd=ROOT,
                              env=dict(env, NODE_RANK=str(r)), stdout=logs[r], stderr=subprocess.STDOUT)
             for r in range(2)]
    try:
        url = None
        deadline = time.time() + 180
        while url is None:
            logs[0].seek(0)
            m = re.search(r"ui: .* is at (http://127\.0\.0\.1:\d+)/", logs[0].read())
            url = m[1] if m else None
            assert nodes[0].poll() is None and time.time() < deadline, "node 0 printed no page URL"
            time.sleep(0.2)
        # Training before measuring: both nodes report, rank 0 has steps.
        while True:
            s = json.loads(get(url + "/api/state"))
            if len(s["nodes"]) == 2 and s["progress"]["step"] > 20:
                break
            assert time.time() < deadline, "the job did not start training"
            time.sleep(0.5)
        state_bytes = len(get(url + "/api/state"))
        pid = nodes[0].pid
        idle_per_s, per_refresh = [], []
        for _ in range(a.windows):
            c0, t0 = cpu_ns(pid), time.monotonic()
            time.sleep(a.seconds)
            idle = (cpu_ns(pid) - c0) / (time.monotonic() - t0)
            c0, t0, n = cpu_ns(pid), time.monotonic(), 0
            while time.monotonic() - t0 < a.seconds:
                get(url + "/api/state")
                get(url + "/api/logs?rank=0")
                n += 1
                time.sleep(0.3)
            polled = (cpu_ns(pid) - c0) / (time.monotonic() - t0)
            idle_per_s.append(idle / 1e6)
            per_refresh.append((polled - idle) * (time.monotonic() - t0) / n / 1e6)
        print(json.dumps({"machine": "CPU box", "cpus": os.cpu_count(), "windows": a.windows,
                          "window_s": a.seconds,
                          "agent_cpu_ms_per_refresh_median": round(statistics.median(per_refresh), 3),
                          "agent_cpu_ms_per_refresh_range": [round(min(per_refresh), 3), round(max(per_refresh), 3)],
                          "agent_cpu_ms_per_s_idle_median": round(statistics.median(idle_per_s), 2),
                          "state_bytes": state_bytes, "step_at_end": json.loads(get(url + "/api/state"))["progress"]["step"]}))
    finally:
        for p in nodes:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in nodes:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()


if __name__ == "__main__":
    sys.exit(main())
