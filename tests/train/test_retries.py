"""`lf-train CONFIG --retries N --retry-wait S` (issue 17): the retry wrapper of LLaMA-Factory's
multi-node guides, built in. Two loopback nodes, each under its own wrapper: a worker of node 1
SIGKILLed mid-run, later node 1's agent SIGKILLed (its wrapper, still alive, starts it again);
the job finishes and its final weights equal an uninterrupted run's. A deterministic data error
exits 2 at once, never retried. Real processes, sockets and signals: lf-train -> agent ->
lf-worker -> trainer -> DDP over the CPU backend."""
import os, signal, subprocess, sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "launcher"))
from harness import free_port, live_processes, wait_until  # noqa: E402
from test_never_silent import bad_input  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LF_TRAIN = os.environ["LF_TRAIN_BIN"]
# 2 nodes x 1 worker; a checkpoint every 50 steps, so each kill comes after one.
RUN = ["max_steps=300", "save_steps=50", "logging_steps=10", "eval_strategy=no", "val_size=0", "plot_loss=false",
       "per_device_train_batch_size=2"]


def start_node(out, node_rank, port, *extra, retry=()):
    env = dict(os.environ, NNODES="2", NODE_RANK=str(node_rank), NPROC_PER_NODE="1", MASTER_PORT=str(port),
               OMP_NUM_THREADS="1", MAX_RESTARTS="0")
    return subprocess.Popen([LF_TRAIN, "configs/tiny_cpu.yaml", f"output_dir={out}", *RUN, *extra, *retry], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def worker_of_rank(out, rank):
    for pid, cmd, argv0 in live_processes():
        if argv0.endswith("lf-worker") and out in cmd:
            try:
                env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
            except (FileNotFoundError, ProcessLookupError):
                continue
            if f"RANK={rank}".encode() in env:
                return pid
    return None


def children(pid):
    found = []
    for p, _, _ in live_processes():
        try:
            if int(open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(p)
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
    return found


def checkpoints(out):
    return sorted(int(n[11:]) for n in os.listdir(out) if n.startswith("checkpoint-") and n[11:].isdigit()) \
        if os.path.isdir(out) else []


def finish(procs, timeout=300):
    try:
        return [p.communicate(timeout=timeout)[0] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()


def test_two_nodes_under_retry_wrappers_survive_a_killed_worker_and_a_killed_agent(tmp_path):
    from safetensors.numpy import load_file
    import numpy as np

    ref = str(tmp_path / "uninterrupted")
    port = free_port()
    ref_nodes = [start_node(ref, r, port) for r in range(2)]
    outs = finish(ref_nodes)
    for n, o in zip(ref_nodes, outs):
        assert n.returncode == 0 and "retry:" not in o, o[-3000:]  # no wrapper without --retries

    out = str(tmp_path / "retried")
    port = free_port()
    retry = ["--retries", "3", "--retry-wait", "1"]
    nodes = [start_node(out, r, port, retry=retry) for r in range(2)]
    try:
        assert wait_until(lambda: checkpoints(out), 120), "no checkpoint in the first attempt"
        victim = worker_of_rank(out, 1)
        assert victim, "no worker of rank 1"
        first_ckpt = checkpoints(out)[-1]
        os.kill(victim, signal.SIGKILL)
        # Attempt 2 resumes; once it has written a checkpoint of its own, node 1's agent dies.
        assert wait_until(lambda: worker_of_rank(out, 1) not in (None, victim), 120), "no attempt 2 on node 1"
        assert wait_until(lambda: checkpoints(out) and checkpoints(out)[-1] >= first_ckpt + 50, 120), checkpoints(out)
        agents = [p for p in children(nodes[1].pid)]
        assert len(agents) == 1, agents
        os.kill(agents[0], signal.SIGKILL)
        texts = finish(nodes)
    finally:
        for n in nodes:
            if n.poll() is None:
                n.kill()
    for n, text in zip(nodes, texts):
        assert n.returncode == 0, text[-4000:]
        assert "retry: attempt 3 of 4 succeeded" in text, text[-4000:]
        resumed = [l for l in text.splitlines() if "retry: attempt" in l and "resuming from" in l]
        assert len(resumed) == 2, text[-4000:]
        assert f"checkpoint-{first_ckpt}" in resumed[0] or f"checkpoint-{first_ckpt + 50}" in resumed[0], resumed
    # Node 1's wrapper saw its agent killed; node 0's saw the other node fail.
    assert "ended with exit 137 (killed by signal 9, SIGKILL: Killed; the OOM killer, or kill -9)" in texts[1], \
        texts[1][-4000:]
    a, b = load_file(os.path.join(ref, "model.safetensors")), load_file(os.path.join(out, "model.safetensors"))
    assert a.keys() == b.keys()
    worst = max(float(np.max(np.abs(a[k].astype(np.float64) - b[k].astype(np.float64)))) for k in a)
    assert worst <= 1e-5, f"the retried run's weights differ from the uninterrupted run's by {worst:.2e}"


def test_a_data_error_exits_2_at_once_and_is_not_retried(tmp_path):
    overrides, expected = bad_input(tmp_path, "malformed_json_line")
    port = free_port()
    retry = ["--retries", "3", "--retry-wait", "600"]  # a retry would run past the test's timeout
    nodes = [start_node(str(tmp_path / "out"), r, port, *overrides, retry=retry) for r in range(2)]
    texts = finish(nodes, timeout=120)
    for n, text in zip(nodes, texts):
        assert n.returncode == 2, text[-3000:]
        assert expected in text, text[-3000:]
        assert "retry: attempt 1 of 4 ended with exit 2 (configuration or data error): not retried" in text, text[-3000:]
        assert "attempt 2" not in text, text[-3000:]


def test_a_bad_retry_flag_and_a_bad_config_fail_before_any_attempt(tmp_path):
    r = subprocess.run([LF_TRAIN, "configs/tiny_cpu.yaml", "--retries", "-1"], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2, r.stdout + r.stderr
    r = subprocess.run([LF_TRAIN, "configs/tiny_cpu.yaml", "no_such_key=1", "--retries", "2"], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 2 and "no_such_key" in r.stderr and "attempt" not in r.stdout + r.stderr, \
        r.stdout + r.stderr


def test_a_retry_never_resumes_from_a_checkpoint_older_than_the_loop(tmp_path):
    """A stale run's checkpoint-500 in an output_dir that `overwrite_output_dir: true` starts over:
    the retried attempt resumes from this loop's own newest checkpoint, not from it."""
    out = str(tmp_path / "out")
    env = dict(os.environ, NNODES="1", NPROC_PER_NODE="1", MASTER_PORT=str(free_port()), OMP_NUM_THREADS="1")
    first = subprocess.run([LF_TRAIN, "configs/tiny_cpu.yaml", f"output_dir={out}", *RUN, "max_steps=30",
                            "save_steps=30"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr[-3000:]
    os.rename(os.path.join(out, "checkpoint-30"), os.path.join(out, "checkpoint-500"))
    env["MASTER_PORT"] = str(free_port())
    node = subprocess.Popen([LF_TRAIN, "configs/tiny_cpu.yaml", f"output_dir={out}", *RUN, "--retries", "1",
                             "--retry-wait", "0"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        assert wait_until(lambda: os.path.exists(os.path.join(out, "checkpoint-50")), 120), checkpoints(out)
        victim = worker_of_rank(out, 0)
        assert victim
        os.kill(victim, signal.SIGKILL)
        (text,) = finish([node])
    finally:
        if node.poll() is None:
            node.kill()
    assert node.returncode == 0, text[-3000:]
    resumed = [l for l in text.splitlines() if "retry: attempt 1 of 2 ended" in l]
    assert len(resumed) == 1 and "resuming from" in resumed[0] and "checkpoint-500" not in resumed[0], text[-3000:]
