"""Elastic restart after a lost node (issue 17): three loopback nodes, `--nnodes 2:3`, DDP (and
ZeRO-3, whose shards of 3 ranks are resharded over 2 at the resume) on the tiny CPU config with
checkpoints; node 1's agent is SIGKILLed for good mid-run. The job goes on
with the two nodes left (node 2 renumbered node 1), world size 2, gradient accumulation raised
2 -> 3 so that the global batch stays 12 examples, resumed from the last sealed checkpoint; its
per-step losses and final weights equal an uninterrupted run with the same global batches (one
process, micro-batch 2 x accumulation 6). Where the global batch cannot be kept (accumulation 1:
3 micro-batches a step over 2 ranks) every node exits 2 naming the numbers, never restarted.
Real processes, sockets and signals: lf-train -> agent -> lf-worker -> trainer -> DDP (CPU)."""
import json, os, signal, subprocess, sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "launcher"))
from harness import free_port, wait_until  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LF_TRAIN = os.environ["LF_TRAIN_BIN"]
TOL = 1e-5  # a small learning rate: at 3e-3, fp32 summation order alone moves 30 steps past it
RUN = ["max_steps=30", "save_steps=10", "logging_steps=1", "eval_strategy=steps", "eval_steps=15", "val_size=0.05",
       "plot_loss=false", "per_device_train_batch_size=2", "learning_rate=1e-4"]


def start_node(out, log, node_rank, port, accum, env_extra=None, extra=()):
    env = dict(os.environ, NNODES="2:3", NODE_RANK=str(node_rank), NPROC_PER_NODE="1", MASTER_PORT=str(port),
               OMP_NUM_THREADS="1", MAX_RESTARTS="2", **(env_extra or {}))
    return subprocess.Popen([LF_TRAIN, "configs/tiny_cpu.yaml", f"output_dir={out}", *RUN, *extra,
                             f"gradient_accumulation_steps={accum}", "--last-call", "1"], cwd=ROOT, env=env,
                            stdout=open(log, "w"), stderr=subprocess.STDOUT)


def finish(procs, timeout=240):
    try:
        for p in procs:
            p.wait(timeout=timeout)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def last_loss_per_step(out):
    losses = {}
    for line in open(os.path.join(out, "trainer_log.jsonl")):
        e = json.loads(line)
        if "loss" in e:
            losses[e["current_steps"]] = e["loss"]  # a resumed run logs the steps after its checkpoint again
    return losses


# DDP, and ZeRO-3: its checkpoint's shards of 3 ranks are resharded over 2 at the resume.
@pytest.mark.parametrize("strategy", [(), ("zero_stage=3",)], ids=["ddp", "zero3"])
def test_three_nodes_lose_one_for_good_and_finish_on_two_with_the_same_global_batches(tmp_path, strategy):
    from safetensors.numpy import load_file

    ref = str(tmp_path / "uninterrupted")
    env = dict(os.environ, NNODES="1", NPROC_PER_NODE="1", MASTER_PORT=str(free_port()), OMP_NUM_THREADS="1")
    r = subprocess.run([LF_TRAIN, "configs/tiny_cpu.yaml", f"output_dir={ref}", *RUN, "gradient_accumulation_steps=6"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]

    out = str(tmp_path / "elastic")
    port = free_port()
    logs = [str(tmp_path / f"node{r}.log") for r in range(3)]
    # Node 1 sleeps in its first evaluation (step 15): checkpoint-10 is sealed by then, and the
    # other nodes wait for it in the evaluation's all-reduce, so the kill lands before step 16.
    nodes = [start_node(out, logs[r], r, port, 2, {"LF_FAULT_SLEEP": "evaluating:6"} if r == 1 else None, strategy)
             for r in range(3)]
    try:
        assert wait_until(lambda: os.path.isdir(os.path.join(out, "checkpoint-10")), 120), open(logs[0]).read()[-3000:]
        nodes[1].send_signal(signal.SIGKILL)  # the agent, for good: its workers die with it
        finish([nodes[0], nodes[2]])
    finally:
        finish(nodes, timeout=1)
    texts = [open(l).read() for l in logs]
    for r in (0, 2):
        assert nodes[r].returncode == 0, texts[r][-4000:]
    assert "ranks 1..1 of 2 (generation 1, was node 2 of 3)" in texts[2], texts[2][-4000:]
    assert "elastic: world size 2 (the job's first round had 3): gradient_accumulation_steps 2 -> 3, so the global " \
           "batch stays 12 examples a step" in texts[0], texts[0][-4000:]
    assert "checkpoint-10 (worker restart)" in texts[0], texts[0][-4000:]
    if strategy:
        assert "ZeRO-3: rank 0 of 2" in texts[0], texts[0][-4000:]
    assert "was written with a global batch of" not in texts[0], "the global batch changed on resume"
    for step, world in ((10, 3), (20, 2), (30, 2)):
        st = json.load(open(os.path.join(out, f"checkpoint-{step}", "lf_trainer_state.json")))
        assert (st["global_step"], st["world_size"], st["global_batch"]) == (step, world, 12), st
    assert json.load(open(os.path.join(out, "trainer_state.json")))["global_step"] == 30
    # The same global batch at every step as the uninterrupted run: the same losses and weights.
    mine, theirs = last_loss_per_step(out), last_loss_per_step(ref)
    assert sorted(mine) == sorted(theirs) == list(range(1, 31))
    worst = max(abs(mine[s] - theirs[s]) for s in theirs)
    assert worst <= TOL, f"per-step loss differs by {worst:.2e}"
    assert theirs[30] < theirs[1], "the loss must fall, or the comparison proves little"
    a, b = load_file(os.path.join(ref, "model.safetensors")), load_file(os.path.join(out, "model.safetensors"))
    assert a.keys() == b.keys()
    worst = max(float(np.max(np.abs(a[k].astype(np.float64) - b[k].astype(np.float64)))) for k in a)
    assert worst <= TOL, f"the elastic run's weights differ from the uninterrupted run's by {worst:.2e}"


def test_a_round_that_cannot_keep_the_global_batch_exits_2_naming_the_numbers(tmp_path):
    out = str(tmp_path / "out")
    port = free_port()
    logs = [str(tmp_path / f"node{r}.log") for r in range(3)]
    nodes = [start_node(out, logs[r], r, port, 1, {"LF_FAULT_SLEEP": "training:6"} if r == 1 else None)
             for r in range(3)]
    try:
        assert wait_until(lambda: "training: " in open(logs[1]).read(), 120), open(logs[1]).read()[-3000:]
        nodes[1].send_signal(signal.SIGKILL)
        finish([nodes[0], nodes[2]], timeout=120)
    finally:
        finish(nodes, timeout=1)
    texts = {r: open(logs[r]).read() for r in (0, 2)}
    for r, text in texts.items():
        assert nodes[r].returncode == 2, text[-4000:]
        assert "a configuration or data error: not restarted" in text and "generation 2" not in text, text[-4000:]
    # The worker that refuses first prints it; the other node's may be stopped before it does
    # (its log names that worker and its exit 2, as for any config error).
    assert "elastic restart on world size 2: the job's global batch is 6 examples a step " \
           "(per_device_train_batch_size 2 x gradient_accumulation_steps 1 x world size 3 of its first round), " \
           "and its 1 x 3 = 3 micro-batches a step do not divide over 2 ranks" in texts[0] + texts[2], texts[0][-4000:]
