"""Failure detection to stop, from the rendezvous server's event log: 2 nodes x 2 workers on
loopback, then (a) SIGSTOP of node 1's agent (silent: heartbeats), (b) SIGKILL of node 1's agent
(connection closes), (c) a worker exiting with code 3. Reports, per case, the time from the fault
to the server's failure_detected event and to all_stopped (every node's workers gone).
Usage: python3 scripts/bench/failure_detection.py [--reps 3]"""
import argparse, json, os, signal, statistics, sys, tempfile, time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tests", "launcher"))
os.environ.setdefault("LF_TRAIN_BIN", os.path.join(ROOT, os.environ.get("BUILD_DIR", "build"), "src/launcher/lf-train"))
from harness import Agent, PY, WORKER, events, free_port, live_pids_with, unique_marker, wait_until  # noqa: E402


def one(case):
    tmp = tempfile.mkdtemp(prefix="lf-detect-")
    log = os.path.join(tmp, "events.jsonl")
    marker = unique_marker(case)
    port = free_port()
    worker = ["--marker", marker, "--sleep", "120"]
    if case == "worker_exit":
        worker += ["--fail-rank", "3", "--code", "3", "--fail-after", "1.0"]
    base = ["launch", "--nnodes", "2", "--nproc-per-node", "2", "--master-port", str(port)]
    n0 = Agent(base + ["--node-rank", "0", "--event-log", log, "--", PY, WORKER, *worker], tmp=tmp)
    n1 = Agent(base + ["--node-rank", "1", "--", PY, WORKER, *worker], tmp=tmp)
    try:
        assert wait_until(lambda: len(live_pids_with(marker)) == 4, 20), "workers did not start"
        if case == "worker_exit":
            t_fault = None  # the worker's own exit: read it from the agent's detection below
        else:
            t_fault = time.time()
            n1.kill(signal.SIGSTOP if case == "agent_sigstop" else signal.SIGKILL)
        n0.wait(30)
        ev = events(log)
        detected = next(e["t"] for e in ev if e["event"] == "failure_detected")
        stopped = next(e["t"] for e in ev if e["event"] in ("all_stopped", "finished"))
        if t_fault is None:
            t_fault = detected
        return detected - t_fault, stopped - t_fault
    finally:
        n1.kill(signal.SIGCONT)
        n0.cleanup()
        n1.cleanup()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=3)
    a = p.parse_args()
    out = {}
    for case in ("agent_sigstop", "agent_sigkill", "worker_exit"):
        runs = [one(case) for _ in range(a.reps)]
        out[case] = {"detect_s_median": statistics.median(r[0] for r in runs),
                     "stop_s_median": statistics.median(r[1] for r in runs),
                     "stop_s_max": max(r[1] for r in runs)}
        print(f"{case:15s} detection {out[case]['detect_s_median']:.3f} s   fault->all stopped "
              f"{out[case]['stop_s_median']:.3f} s (max {out[case]['stop_s_max']:.3f} s)")
    print("RESULT " + json.dumps(out))


if __name__ == "__main__":
    main()
