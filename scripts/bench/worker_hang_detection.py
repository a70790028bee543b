"""Hung-worker detection to stop (issues 12 and 19): 2 loopback nodes x 2 lf-workers training
configs/tiny_cpu.yaml over the CPU backend; SIGSTOP of node 1's rank 3 mid-step. Reports the
time from the SIGSTOP to the rendezvous server's failure_detected event (node 0's --event-log)
and to the exit of both lf-train processes, for:
  liveness   default knobs: the liveness timeout (10 s since issue 29; 30 s before) finds the stopped process;
  progress   liveness off (LF_WORKER_LIVENESS_TIMEOUT_S=0): the step deadline alone (floor
             LF_PROGRESS_STEP_FLOOR_S, --floor, default 120 s as shipped).
Usage: python3 scripts/bench/worker_hang_detection.py [--reps 1] [--cases liveness,progress] [--floor 120]
Needs a torch build (BUILD_DIR, default build)."""
import argparse, json, os, signal, statistics, subprocess, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(ROOT, os.environ.get("BUILD_DIR", "build"))
os.environ.setdefault("LF_TRAIN_BIN", os.path.join(BUILD, "src/launcher/lf-train"))
sys.path.insert(0, os.path.join(ROOT, "tests", "launcher"))
sys.path.insert(0, os.path.join(ROOT, "tests", "train"))
from harness import events, free_port, wait_until  # noqa: E402
from test_ddp_failure import training_is_under_way, workers  # noqa: E402

LF_TRAIN = os.environ["LF_TRAIN_BIN"]


def start(out, node_rank, port, env, event_log=None):
    args = [LF_TRAIN, "train"] + (["--event-log", event_log] if event_log else []) + [
        "configs/tiny_cpu.yaml", f"output_dir={out}", "max_steps=100000", "logging_steps=1", "save_steps=100000",
        "eval_strategy=no", "val_size=0", "plot_loss=false", "per_device_train_batch_size=2"]
    full = dict(os.environ, NNODES="2", NODE_RANK=str(node_rank), NPROC_PER_NODE="2", MASTER_PORT=str(port),
                OMP_NUM_THREADS="1", **env)
    return subprocess.Popen(args, cwd=ROOT, env=full, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def one(case, floor):
    env = {"LF_WORKER_LIVENESS_TIMEOUT_S": "0", "LF_PROGRESS_STEP_FLOOR_S": str(floor)} if case == "progress" else {}
    tmp = tempfile.mkdtemp(prefix="lf-hang-")
    out, log = os.path.join(tmp, "run"), os.path.join(tmp, "events.jsonl")
    port = free_port()
    nodes = [start(out, 0, port, env, log), start(out, 1, port, env)]
    pid = None
    try:
        if not wait_until(lambda: training_is_under_way(out) or any(n.poll() is not None for n in nodes), 600) \
                or any(n.poll() is not None for n in nodes):
            for n in nodes:
                n.kill()
            raise SystemExit("training did not start:\n" + "".join(n.communicate()[0][-2000:] for n in nodes))
        ranks = workers(out)
        pid = ranks[3]
        os.kill(pid, signal.SIGSTOP)
        t_fault = time.time()
        texts = [n.communicate(timeout=floor * 3 + 600)[0] for n in nodes]
        t_exit = time.time()
        first = next(e for e in events(log) if e["event"] == "failure_detected")
        blamed = f"stopped pid {pid}: " + ("named" if f"pid {pid}," in first["detail"] else "NOT named")
        return first["t"] - t_fault, t_exit - t_fault, [n.returncode for n in nodes], blamed + "; " + first["detail"]
    finally:
        if pid:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        for n in nodes:
            if n.poll() is None:
                n.kill()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=1)
    p.add_argument("--cases", default="liveness,progress")
    p.add_argument("--floor", type=float, default=120)
    a = p.parse_args()
    result = {}
    for case in a.cases.split(","):
        runs = []
        for _ in range(a.reps):
            runs.append(one(case, a.floor))
            print(f"  {case} run: detect {runs[-1][0]:.2f} s, stop {runs[-1][1]:.2f} s", flush=True)
        result[case] = {"detect_s_median": statistics.median(r[0] for r in runs),
                        "stop_s_median": statistics.median(r[1] for r in runs),
                        "exit_codes": runs[-1][2]}
        print(f"{case:9s} SIGSTOP -> failure_detected {result[case]['detect_s_median']:.2f} s, -> both nodes exited "
              f"{result[case]['stop_s_median']:.2f} s, exit codes {runs[-1][2]}\n  server: {runs[-1][3]}")
    print("RESULT " + json.dumps(result))


if __name__ == "__main__":
    main()
