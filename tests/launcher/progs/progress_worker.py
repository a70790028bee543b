"""A worker that sends progress beats in lf-train's heartbeat wire format (lf/common/heartbeat_line.h):
one JSON line per "step" on LF_HEARTBEAT_FD with a metrics payload like lf-worker's, for --steps steps
every --interval seconds, then sleeps --sleep seconds (so the metrics endpoint can be scraped)."""
import argparse, json, os, time

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=20)
p.add_argument("--interval", type=float, default=0.05)
p.add_argument("--sleep", type=float, default=0)
a = p.parse_args()
fd = int(os.environ["LF_HEARTBEAT_FD"])
rank = int(os.environ["RANK"])
for step in range(1, a.steps + 1):
    metrics = {"loss": 7.0 - 0.1 * step - 0.01 * rank, "learning_rate": 1e-4 * step / a.steps, "grad_norm": 1.5,
               "epoch": step / a.steps, "tokens_per_s": 1000.0 + rank, "step_s": a.interval, "comm_exposed_s": 0.001,
               "eval_loss": 6.5, "checkpoint_s": 0.25}
    line = {"v": 1, "kind": "progress", "phase": "training", "step": step, "deadline_s": 60, "metrics": metrics}
    os.write(fd, (json.dumps(line) + "\n").encode())
    print(f"step {step} loss {metrics['loss']!r}", flush=True)
    time.sleep(a.interval)
time.sleep(a.sleep)
