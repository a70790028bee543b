"""Training runs through the real launcher (lf-train -> agent -> lf-worker -> trainer), shared by
the data-parallel and the ZeRO equivalence tests."""
import json, os, re, subprocess, sys, threading, time

from safetensors.numpy import load_file

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "launcher"))
from harness import free_port  # noqa: E402,F401 (the train tests import it from here)

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LF_TRAIN = os.environ["LF_TRAIN_BIN"]


def wait_nodes(procs, timeout=300, grace=30):
    """Each node's whole output once every node exited. A node that fails leaves the others
    `grace` seconds to stop by themselves (the job's failure reaches every node); past that, or
    past `timeout`, the nodes still running are killed and the assertion shows every node's
    output: the first node's alone often only says it waited for another."""
    outs = [[] for _ in procs]
    # Line by line, so that what a killed node printed is there even if its children still hold the pipe.
    readers = [threading.Thread(target=lambda p=p, o=o: o.extend(p.stdout), daemon=True)
               for p, o in zip(procs, outs)]
    for t in readers:
        t.start()
    deadline, failed_at = time.time() + timeout, None
    while any(p.poll() is None for p in procs):
        if failed_at is None and any(p.returncode not in (None, 0) for p in procs):
            failed_at = time.time()
        why = (f"still running {timeout} s after the start" if time.time() > deadline else
               f"still running {grace} s after a node failed" if failed_at and time.time() > failed_at + grace else None)
        if why:
            for p in procs:
                if p.poll() is None:
                    p.kill()
            for t in readers:
                t.join(10)
            raise AssertionError(f"nodes {why}:\n" + "\n".join(
                f"--- node {r} (exit {p.wait()}):\n{''.join(o)[-3000:]}" for r, (p, o) in enumerate(zip(procs, outs))))
        time.sleep(0.2)
    for t in readers:
        t.join()
    return ["".join(o) for o in outs]


def train(out, mode, layout, *extra, env_extra=None, outputs=None, distributed_line="data parallel: rank 0 of"):
    """layout: (nodes, workers per node, micro-batch). Evaluates every 10 steps and at the end."""
    nodes, nproc, mbs = layout
    args = [LF_TRAIN, "configs/tiny_cpu.yaml", f"output_dir={out}", f"finetuning_type={mode}", "max_steps=20",
            "logging_steps=1", "eval_strategy=steps", "eval_steps=10", "plot_loss=false", "val_size=0.05",
            "save_steps=1000",
            "gradient_accumulation_steps=2", f"per_device_train_batch_size={mbs}", "lora_rank=4", *extra]
    env = dict(os.environ, NNODES=str(nodes), NPROC_PER_NODE=str(nproc), MASTER_PORT=str(free_port()),
               OMP_NUM_THREADS="1", **(env_extra or {}))
    procs = [subprocess.Popen(args, cwd=ROOT, env=dict(env, NODE_RANK=str(r)), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in range(nodes)]
    outs = wait_nodes(procs)
    for p, o in zip(procs, outs):
        assert p.returncode == 0, o[-3000:]
    if outputs is not None:
        outputs.extend(outs)
    if nproc * nodes > 1:
        assert distributed_line in outs[0], outs[0][-3000:]
    if nproc > 1:  # on each node one worker tokenized into its agent's LF_NODE_SCRATCH, the others loaded it
        for o in outs:
            saved = re.findall(r"tokenized dataset saved to (\S+)", o)
            assert len(saved) == 1 and re.search(r"/lf-train-\d+-node-\w{6}/tokenized$", saved[0]), o[-3000:]
            assert o.count(f"loaded tokenized dataset from {saved[0]}") == nproc - 1, o[-3000:]
            assert not os.path.exists(saved[0]), "the node's tokenized folder outlived the job"
    log = [json.loads(l) for l in open(os.path.join(out, "trainer_log.jsonl"))]
    losses = [e["loss"] for e in log if "loss" in e]
    evals = [e["eval_loss"] for e in log if "eval_loss" in e]
    # The final evaluation is in all_results.json only (LLaMA-Factory's trainer_log ends with training,
    # its last line the end-of-training summary); it saw the same weights as the one at the last step.
    assert "eval_loss" not in log[-1] and "loss" not in log[-1], log[-1]
    if evals:
        final = json.load(open(os.path.join(out, "all_results.json")))["eval_loss"]
        assert final == evals[-1]
        evals.append(final)
    losses += evals  # training losses, then the eval losses at steps 10 and 20 and the final one
    weights = load_file(os.path.join(out, "adapter_model.safetensors" if mode == "lora" else "model.safetensors"))
    return losses, weights


