"""A running job survives strangers (issue 29): a 2-node loopback training job runs while, in
turn, a second job's node 0 (same port), a second job's node 1 (same port and config: its
NODE_RANK is taken), a node with another config, a surplus node, a node with another --nnodes, a
node with a wrong token, random bytes and a slow-loris connection reach its rendezvous port. Each
stranger gets its refusal, on its own side, naming the job (allowed: 10 s each; the latencies are
printed for docs/BENCHMARKS.md, not asserted), and the job finishes with losses bit-equal to an
undisturbed run."""
import json, os, select, socket, subprocess, sys, time

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "launcher"))
from harness import free_port  # noqa: E402
import rdzv_wire as wire  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LF_TRAIN = os.environ["LF_TRAIN_BIN"]
ARGS = ["max_steps=12", "logging_steps=1", "eval_strategy=no", "val_size=0", "plot_loss=false", "save_strategy=no",
        "per_device_train_batch_size=2", "max_samples=64", "cutoff_len=96"]
EXIT_CONFIG, EXIT_RDZV, EXIT_NETWORK = 2, 10, 11
REFUSAL_BUDGET_S = 10


def env_of(port, token, **extra):
    env = dict(os.environ, NNODES="2", NPROC_PER_NODE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
               OMP_NUM_THREADS="1", LF_JOB_TOKEN=token)
    env.pop("NODE_RANK", None)
    env.update(extra)
    return env


def start_job(out, port, token, log_dir, **extra):
    procs = []
    for rank in (0, 1):
        log = open(log_dir / f"node{rank}.log", "w")
        procs.append(subprocess.Popen([LF_TRAIN, "configs/tiny_cpu.yaml", f"output_dir={out}", *ARGS], cwd=ROOT,
                                      env=env_of(port, token, NODE_RANK=str(rank), **extra), stdout=log,
                                      stderr=subprocess.STDOUT))
    return procs


def losses(out):
    return [e["loss"] for e in map(json.loads, open(out / "trainer_log.jsonl")) if "loss" in e]


def stranger(args, env, timeout=REFUSAL_BUDGET_S + 20):
    """An lf-train a stranger starts; (exit code, output, seconds to its exit)."""
    t0 = time.monotonic()
    p = subprocess.run([LF_TRAIN, "configs/tiny_cpu.yaml", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=timeout)
    return p.returncode, p.stdout + p.stderr, time.monotonic() - t0


def raw_refusal(port, payload, trickle_s=0.0):
    """Bytes sent to the port (all at once, or one a trickle_s); (the Refused reason, seconds)."""
    t0 = time.monotonic()
    c = socket.create_connection(("127.0.0.1", port), timeout=REFUSAL_BUDGET_S + 5)
    try:
        if trickle_s:
            data = b""
            for b in payload:  # a byte at a time until the server answers or closes
                try:
                    c.sendall(bytes([b]))
                except OSError:
                    break
                if select.select([c], [], [], trickle_s)[0]:
                    data = wire.read_until_closed(c, timeout=5)
                    break
        else:
            c.sendall(payload)
            data = wire.read_until_closed(c, timeout=REFUSAL_BUDGET_S + 5)
    finally:
        c.close()
    return wire.refused_reason(data), time.monotonic() - t0


def test_strangers_are_refused_on_their_own_and_the_job_runs_on(tmp_path):
    ref_out = tmp_path / "undisturbed"
    (tmp_path / "ref").mkdir()
    for p in start_job(ref_out, free_port(), "tok", tmp_path / "ref"):
        assert p.wait(300) == 0, (tmp_path / "ref" / "node0.log").read_text()[-3000:]
    expected = losses(ref_out)
    assert len(expected) == 12

    out, port, token = tmp_path / "out", free_port(), "the-job-token"
    (tmp_path / "job").mkdir()
    # Rank 0 holds the job in its training phase long enough for every stranger to come and go.
    job = start_job(out, port, token, tmp_path / "job", LF_FAULT_SLEEP="training:40@0")
    node0_log = tmp_path / "job" / "node0.log"
    try:
        deadline = time.time() + 120
        while "LF_FAULT_SLEEP: sleeping" not in node0_log.read_text():
            assert time.time() < deadline and all(p.poll() is None for p in job), node0_log.read_text()[-3000:]
            time.sleep(0.2)
        latencies = {}
        other_out = str(tmp_path / "other")
        same = env_of(port, token)

        # A second job's node 0 on the same port (its own output_dir): the port is taken.
        rc, text, latencies["second job's node 0"] = stranger([f"output_dir={other_out}", *ARGS],
                                                             dict(same, NODE_RANK="0"))
        assert rc == EXIT_NETWORK and f"rendezvous port {port} on 127.0.0.1 is already in use" in text, text[-2000:]
        # A second job's node 1, same port and config: NODE_RANK 1 is this job's.
        rc, text, latencies["second job's node 1 (NODE_RANK taken)"] = stranger(
            [f"output_dir={out}", *ARGS], dict(same, NODE_RANK="1"))
        assert rc == EXIT_RDZV and "node rank 1 is held by a live agent" in text, text[-2000:]
        assert f"join refused by job 'none' at 127.0.0.1:{port}" in text, text[-2000:]
        # Another config.
        rc, text, latencies["another config"] = stranger([f"output_dir={out}", *ARGS, "learning_rate=1e-3"], same)
        assert rc == EXIT_RDZV and "command/config mismatch" in text and "learning_rate" in text, text[-2000:]
        # A surplus node: same config, no NODE_RANK.
        rc, text, latencies["surplus node"] = stranger([f"output_dir={out}", *ARGS], same)
        assert rc == EXIT_RDZV and "the job is full" in text, text[-2000:]
        # Another --nnodes.
        rc, text, latencies["another --nnodes"] = stranger([f"output_dir={out}", *ARGS], dict(same, NNODES="3"))
        assert rc == EXIT_RDZV and "nnodes mismatch" in text, text[-2000:]
        # A wrong token: refused unheard, told nothing of the job.
        rc, text, latencies["wrong token"] = stranger([f"output_dir={out}", *ARGS], dict(same, LF_JOB_TOKEN="guess"))
        assert rc == EXIT_RDZV and "authentication failed" in text, text[-2000:]
        assert token not in text and "join refused by job" not in text, text[-2000:]
        # Random bytes.
        reason, latencies["random bytes"] = raw_refusal(port, os.urandom(64))
        assert reason and "not a valid lf-train rendezvous frame" in reason, reason
        # Slow-loris: a Join frame, one byte a second.
        join = wire.join(token=token, min_nodes=2, max_nodes=2)
        reason, latencies["slow-loris"] = raw_refusal(port, join, trickle_s=1.0)
        assert reason and "no complete Join or StoreHello within" in reason, reason
        for who, seconds in latencies.items():
            print(f"REFUSAL {who}: {seconds:.2f} s")
            assert seconds <= REFUSAL_BUDGET_S, latencies
        assert all(p.poll() is None for p in job), "a stranger stopped the job:\n" + node0_log.read_text()[-3000:]
        for p in job:
            assert p.wait(300) == 0, node0_log.read_text()[-3000:]
    finally:
        for p in job:
            if p.poll() is None:
                p.kill()
    # The job never noticed: every loss bit-equal to the undisturbed run's.
    assert losses(out) == expected
    text = node0_log.read_text()
    assert text.count("rendezvous: refusing") >= 7, text[-4000:]
