"""A torchrun-style test worker: behaviour chosen by flags, identity from the environment.

Every run prints `ENV {json}` with the variables lf-train must set, then acts.
The --marker argument only tags the process so tests can find survivors in /proc.
"""
import argparse, json, os, socket, subprocess, sys, time

KEYS = ["RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
        "ROLE_RANK", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT",
        "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID", "OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES",
        "NCCL_DEBUG", "LF_HEARTBEAT_FD", "LF_RDZV_ADDR", "LF_RDZV_PORT", "LF_BASE_WORLD_SIZE", "LF_JOB_TOKEN",
        "LF_NODE_SCRATCH"]

p = argparse.ArgumentParser()
p.add_argument("--marker", default="")
p.add_argument("--sleep", type=float, default=0)
p.add_argument("--quick-from-generation", type=int, default=-1,
               help="from this restart generation on, sleep only 0.5 s instead of --sleep")
p.add_argument("--fail-rank", type=int, default=-1, help="this global rank exits with --code")
p.add_argument("--code", type=int, default=3)
p.add_argument("--fail-generation", type=int, default=-1, help="fail only in this restart generation")
p.add_argument("--fail-after", type=float, default=0)
p.add_argument("--kill-self", action="store_true", help="the failing rank dies by SIGKILL instead")
p.add_argument("--grandchild", action="store_true", help="start a long-lived child process too")
p.add_argument("--lines", type=int, default=0, help="print this many numbered lines fast")
p.add_argument("--heartbeat-then-hang", action="store_true")
p.add_argument("--stall-rank", type=int, default=-1,
               help="this global rank sends a progress beat (training, step 7, deadline 1 s), then only liveness")
p.add_argument("--ignore-sigterm", action="store_true")
a = p.parse_args()

env = {k: os.environ.get(k) for k in KEYS}
print("ENV " + json.dumps(env), flush=True)
rank = int(os.environ["RANK"])
gen = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
if env["LF_NODE_SCRATCH"]:  # the node's shared folder exists and takes files while the job runs
    open(os.path.join(env["LF_NODE_SCRATCH"], f"rank-{rank}"), "w").close()

if a.ignore_sigterm:
    import signal
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
if a.grandchild:
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", a.marker + "-grandchild"])
for i in range(a.lines):
    print(f"line-{i:05d} " + "x" * 50, flush=False)
sys.stdout.flush()
if a.heartbeat_then_hang:
    fd = int(os.environ["LF_HEARTBEAT_FD"])
    os.write(fd, b"step 1\n")
    time.sleep(600)
if rank == a.stall_rank:
    fd = int(os.environ["LF_HEARTBEAT_FD"])
    beat = {"v": 1, "kind": "progress", "phase": "training", "step": 7, "deadline_s": 1.0, "metrics": {"loss": 2.5}}
    os.write(fd, (json.dumps(beat) + "\n").encode())
    while True:  # alive, never progressing: a deadlocked collective
        os.write(fd, b'{"v":1,"kind":"alive"}\n')
        time.sleep(0.2)
if rank == a.fail_rank and (a.fail_generation < 0 or a.fail_generation == gen):
    time.sleep(a.fail_after)
    print(f"rank {rank} failing on purpose", flush=True)
    if a.kill_self:
        os.kill(os.getpid(), 9)
    sys.exit(a.code)
time.sleep(0.5 if 0 <= a.quick_from_generation <= gen else a.sleep)
