"""A rank that dies in the middle of data-parallel training ends the whole job within seconds,
with an exit code that says what happened and no worker left behind, instead of its peers
waiting inside a collective (torchrun + NCCL: up to the 10-minute timeout). The real path:
lf-train -> agent -> lf-worker -> trainer -> DDP over the TCP backend, real processes, SIGKILL."""
import json, os, signal, subprocess, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "launcher"))
from harness import free_port, live_processes, wait_until  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LF_TRAIN = os.environ["LF_TRAIN_BIN"]
EXIT_ABORTED, EXIT_WORKER_FAILED, EXIT_BACKEND = 13, 14, 15


def start_node(out, nodes, node_rank, port, *extra, prefix=()):
    args = [*prefix, LF_TRAIN, "configs/tiny_cpu.yaml", f"output_dir={out}", "max_steps=100000", "logging_steps=1",
            "save_steps=100000", "eval_strategy=no", "val_size=0", "plot_loss=false",
            "per_device_train_batch_size=2", *extra]
    env = dict(os.environ, NNODES=str(nodes), NODE_RANK=str(node_rank), NPROC_PER_NODE="2",
               MASTER_PORT=str(port), OMP_NUM_THREADS="1")
    return subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def training_is_under_way(out):
    log = os.path.join(out, "trainer_log.jsonl")
    return os.path.exists(log) and sum(1 for _ in open(log)) >= 3


def workers(marker):
    """{rank: pid} of the live lf-worker processes whose command line holds marker."""
    found = {}
    for pid, cmd, argv0 in live_processes():
        if argv0.endswith("lf-worker") and marker in cmd:
            try:
                env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
            except (FileNotFoundError, ProcessLookupError):
                continue
            found[int(next(e[5:] for e in env if e.startswith(b"RANK=")))] = pid
    return found


def finish(procs, timeout):
    """(exit codes, seconds until the last one exited, outputs)."""
    t0 = time.time()
    outs = [p.communicate(timeout=timeout)[0] for p in procs]
    return [p.returncode for p in procs], time.time() - t0, outs


def test_a_killed_rank_ends_the_job_in_seconds(tmp_path):
    out = str(tmp_path / "run")
    node = start_node(out, 1, 0, free_port())
    try:
        assert wait_until(lambda: training_is_under_way(out), 120), "training did not start"
        assert set(workers(out)) == {0, 1}, workers(out)
        os.kill(workers(out)[1], signal.SIGKILL)
        (rc,), seconds, (text,) = finish([node], 60)
    finally:
        if node.poll() is None:
            node.kill()
    assert rc == EXIT_WORKER_FAILED, text[-3000:]
    assert seconds < 15, f"the job took {seconds:.1f} s to end after a rank died"
    assert "rank 1" in text, text[-3000:]
    assert wait_until(lambda: not workers(out), 10), f"workers outlived the job: {workers(out)}"


def test_a_killed_node_ends_the_other_node_in_seconds(tmp_path):
    out = str(tmp_path / "run")
    port = free_port()
    nodes = [start_node(out, 2, r, port) for r in range(2)]
    try:
        assert wait_until(lambda: training_is_under_way(out), 120), "training did not start"
        assert set(workers(out)) == {0, 1, 2, 3}, workers(out)
        nodes[1].kill()  # the whole second node: its agent, and with it (PDEATHSIG) its workers
        (rc,), seconds, (text,) = finish([nodes[0]], 60)
    finally:
        for n in nodes:
            if n.poll() is None:
                n.kill()
            n.communicate()
    # The surviving node learns it from the rendezvous (aborted) or from its own worker, whose
    # peer vanished mid-collective (worker failed): either is a prompt, explicit failure.
    assert rc in (EXIT_ABORTED, EXIT_WORKER_FAILED), f"rc={rc}\n" + text[-3000:]
    assert seconds < 15, f"the surviving node took {seconds:.1f} s to end"
    assert wait_until(lambda: not workers(out), 10), f"workers outlived the job: {workers(out)}"


def test_a_restarted_job_resumes_from_its_checkpoint_and_ends_where_an_uninterrupted_one_does(tmp_path):
    """MAX_RESTARTS=1: a rank killed after checkpoint-100 restarts the job (generation 1); every
    worker resumes from that checkpoint (weights, optimizer, schedule, RNG, data position), and
    the final weights equal those of a run that was never interrupted."""
    from safetensors.numpy import load_file
    import numpy as np

    steps = ["max_steps=300", "save_steps=100"]
    def run(out, restarts):
        args = [LF_TRAIN, "configs/tiny_cpu.yaml", f"output_dir={out}", "logging_steps=10", "eval_strategy=no",
                "val_size=0", "plot_loss=false", "per_device_train_batch_size=2", *steps]
        env = dict(os.environ, NNODES="1", NODE_RANK="0", NPROC_PER_NODE="2", MASTER_PORT=str(free_port()),
                   OMP_NUM_THREADS="1", MAX_RESTARTS=str(restarts))
        return subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    ref_out = str(tmp_path / "uninterrupted")
    (rc,), _, (text,) = finish([run(ref_out, 0)], 300)
    assert rc == 0, text[-3000:]

    out = str(tmp_path / "restarted")
    node = run(out, 1)
    try:
        first = os.path.join(out, "checkpoint-100", "lf_trainer_state.json")
        assert wait_until(lambda: os.path.exists(first), 120), "no checkpoint-100"
        alive = workers(out)
        assert 1 in alive, alive
        os.kill(alive[1], signal.SIGKILL)
        (rc,), _, (text,) = finish([node], 300)
    finally:
        if node.poll() is None:
            node.kill()
    assert rc == 0, text[-3000:]
    resumed = [l for l in text.splitlines() if "resuming training from" in l and "(worker restart)" in l]
    assert len(resumed) == 2, text[-3000:]  # both ranks of generation 1
    assert all("checkpoint-100" in l or "checkpoint-200" in l for l in resumed), resumed
    a, b = load_file(os.path.join(ref_out, "model.safetensors")), load_file(os.path.join(out, "model.safetensors"))
    assert a.keys() == b.keys()
    worst = max(float(np.max(np.abs(a[k].astype(np.float64) - b[k].astype(np.float64)))) for k in a)
    assert worst <= 1e-5, f"the resumed run's weights differ by {worst:.2e}"


def test_nodes_that_see_different_checkpoints_fail_at_once_instead_of_hanging(tmp_path):
    """Resuming needs output_dir on a filesystem every node shares. Here node 0 sees a
    checkpoint there (and resumes from it: overwrite_output_dir false) while node 1, in a mount
    namespace of its own, sees an empty tmpfs at the same path (a node-local disk) and would
    start at step 0: the ranks would run different steps and hang in collectives. They agree
    on the checkpoint first, and every rank fails saying why."""
    out = tmp_path / "out"
    first = subprocess.run([LF_TRAIN, "configs/tiny_cpu.yaml", f"output_dir={out}", "max_steps=4", "save_steps=4",
                            "eval_strategy=no", "val_size=0", "plot_loss=false", "per_device_train_batch_size=2"],
                           cwd=ROOT, capture_output=True, text=True, timeout=120,
                           env=dict(os.environ, NPROC_PER_NODE="1", MASTER_PORT=str(free_port()), OMP_NUM_THREADS="1"))
    assert first.returncode == 0 and (out / "checkpoint-4").is_dir(), first.stdout[-2000:] + first.stderr[-2000:]
    node_local = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                  f'mount -t tmpfs lf-node-local "{out}" && exec "$0" "$@"']
    port = free_port()
    nodes = [start_node(str(out), 2, r, port, "overwrite_output_dir=false", prefix=node_local if r else ())
             for r in range(2)]
    try:
        rcs, _, outs = finish(nodes, 120)
    finally:
        for n in nodes:
            if n.poll() is None:
                n.kill()
    text = "".join(outs)
    assert all(rc != 0 for rc in rcs), f"rcs={rcs}\n" + text[-3000:]
    assert "resume checkpoint differs between ranks" in text, text[-3000:]
    assert "checkpoint-4" in text and "none (a fresh start)" in text, text[-3000:]
    assert "output_dir on a filesystem every node shares" in text, text[-3000:]
    assert "training done" not in text, text[-3000:]
    assert (out / "checkpoint-4").is_dir(), "node 0's checkpoint must survive"
