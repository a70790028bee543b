"""Watching a real training run (lf-train -> agents -> lf-worker): a real Prometheus scrapes the
agents of a 2-node loopback CPU run and its HTTP API shows lf_train_step rising, lf_train_loss
(once: the job's, rank 0's) equal to the logged loss, lf_train_total_steps and the
lf_train_tokens_total counter, and, with the default linger, the last scrape seeing phase `done`; `report_to: tensorboard` is read back by TensorBoard's
own event reader, every scalar equal to trainer_log.jsonl / log_history."""
import json, os, shutil, socket, subprocess, sys, time, urllib.parse, urllib.request

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "launcher"))
from harness import free_port  # noqa: E402

sys.path.insert(0, os.path.dirname(__file__))
from train_runs import wait_nodes  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LF_TRAIN = os.environ["LF_TRAIN_BIN"]


def run_nodes(nodes, args, env_per_node, timeout=300):
    procs = [subprocess.Popen([LF_TRAIN, "configs/tiny_cpu.yaml", *args], cwd=ROOT, env=env_per_node(r),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for r in range(nodes)]
    outs = wait_nodes(procs, timeout)
    for p, o in zip(procs, outs):
        assert p.returncode == 0, o[-3000:]
    return outs


def query(prom, expr):
    url = f"http://127.0.0.1:{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=5) as r:
        reply = json.load(r)
    assert reply["status"] == "success", reply
    return reply["data"]["result"]


@pytest.fixture
def prometheus(tmp_path):
    exe = shutil.which("prometheus")
    if not exe:
        pytest.fail("prometheus not found: scripts/install_deps.sh installs Debian's prometheus package")
    targets = [free_port(), free_port()]
    port = free_port()
    cfg = tmp_path / "prometheus.yml"
    cfg.write_text("global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\nscrape_configs:\n  - job_name: lf-train\n"
                   "    static_configs:\n      - targets: [" + ", ".join(f"'127.0.0.1:{t}'" for t in targets) + "]\n")
    log = open(tmp_path / "prometheus.log", "w")
    proc = subprocess.Popen([exe, f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"], stdout=log, stderr=log)
    deadline = time.time() + 60
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/-/ready", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        assert proc.poll() is None and time.time() < deadline, (tmp_path / "prometheus.log").read_text()
        time.sleep(0.2)
    yield port, targets
    proc.terminate()
    proc.wait(10)


def test_prometheus_scrapes_a_two_node_training_run(prometheus, tmp_path):
    prom, targets = prometheus
    # Prometheus starts scraping some seconds after it is ready: wait until it tried both targets.
    deadline = time.time() + 60
    while len(query(prom, "up")) < 2:
        assert time.time() < deadline, query(prom, "up")
        time.sleep(0.2)
    out = tmp_path / "out"
    master = free_port()
    base = dict(os.environ, NNODES="2", NPROC_PER_NODE="1", MASTER_PORT=str(master), OMP_NUM_THREADS="1",
                NCCL_SOCKET_IFNAME="lo", LF_PROFILE_PHASES="1",
                LF_PEAK_TFLOPS="0.001")  # a CPU has no peak in lf-train's table: 1 GFLOP/s makes lf_train_mfu appear
    run_nodes(2, [f"output_dir={out}", "max_steps=30", "logging_steps=1", "save_steps=10", "eval_strategy=steps",
                  "eval_steps=15", "val_size=0.05", "plot_loss=false"],
              lambda r: dict(base, NODE_RANK=str(r), LF_METRICS_PORT=str(targets[r])))
    log = [json.loads(l) for l in open(out / "trainer_log.jsonl")]
    losses = {e["current_steps"]: e["loss"] for e in log if "loss" in e}
    # lf_train_step rose, on both ranks, up to the last step.
    for rank in ("0", "1"):
        series = query(prom, f'lf_train_step{{rank="{rank}"}}[10m]')
        assert len(series) == 1, series
        steps = [float(v) for _, v in series[0]["values"]]
        assert steps == sorted(steps) and steps[0] < steps[-1] == 30, steps
    # The loss Prometheus holds last is the last logged loss, once for the job (rank 0's): the
    # agents served the final values until the next scrape after the job ended (the default linger).
    last = query(prom, 'last_over_time(lf_train_loss[10m])')
    assert len(last) == 1 and last[0]["metric"]["rank"] == "0", last
    assert float(last[0]["value"][1]) == pytest.approx(losses[30], rel=1e-12, abs=0), (last, losses[30])
    # Both ranks' last scraped phase is `done`.
    done = query(prom, 'last_over_time(lf_train_phase{phase="done"}[10m])')
    assert sorted(s["metric"]["rank"] for s in done) == ["0", "1"], done
    # % done and ETA: lf_train_step / lf_train_total_steps; the job's tokens as a counter.
    total = query(prom, 'last_over_time(lf_train_total_steps[10m])')
    assert len(total) == 1 and float(total[0]["value"][1]) == 30, total
    tokens = query(prom, 'last_over_time(lf_train_tokens_total[10m])')
    last_line = [e for e in log if "loss" in e][-1]
    assert len(tokens) == 1 and float(tokens[0]["value"][1]) == last_line["total_tokens"], (tokens, last_line)
    assert float(query(prom, 'max_over_time(rate(lf_train_tokens_total[5s])[10m:1s])')[0]["value"][1]) > 0
    # The job's series once, from node 0 (global rank 0).
    for name in ("lf_train_loss", "lf_train_learning_rate", "lf_train_grad_norm", "lf_train_eval_loss",
                 "lf_train_total_steps", "lf_train_tokens_total"):
        nodes = {s["metric"]["node"] for s in query(prom, f"last_over_time({name}[10m])")}
        assert nodes == {"0"}, (name, nodes)
    # Every per-rank series a CPU run produces, from both nodes.
    for name in ("lf_train_step", "lf_train_tokens_per_second", "lf_train_mfu", "lf_train_step_seconds_bucket",
                 "lf_train_comm_exposed_seconds", "lf_train_last_step_timestamp_seconds",
                 "lf_train_checkpoint_seconds", "lf_agent_restarts_total", "lf_agent_generation", "lf_agent_worker_up",
                 "lf_agent_master_heartbeat_age_seconds", "lf_net_transmit_bytes_total", "lf_worker_heartbeat_age_seconds"):
        nodes = {s["metric"]["node"] for s in query(prom, f"last_over_time({name}[10m])")}
        assert nodes == {"0", "1"}, (name, nodes)
    # MFU = the step's model FLOPs / its seconds / the peak: with a 1 GFLOP/s "peak" a 2-core box
    # gives a positive figure of order 1-100; the formula itself is train_test's ModelFlops test.
    for s in query(prom, "last_over_time(lf_train_mfu[10m])"):
        assert 0 < float(s["value"][1]) < 1e4, s
    up = query(prom, 'max_over_time(up[10m])')
    assert sorted(s["metric"]["instance"] for s in up) == sorted(f"127.0.0.1:{t}" for t in targets)


def test_report_to_tensorboard_is_read_back_by_tensorboard(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "out"
    env = dict(os.environ, NNODES="1", NPROC_PER_NODE="1", MASTER_PORT=str(free_port()), OMP_NUM_THREADS="1")
    (text,) = run_nodes(1, [f"output_dir={out}", "max_steps=8", "logging_steps=1", "eval_strategy=steps", "eval_steps=4",
                            "val_size=0.05", "plot_loss=false", "save_steps=1000", "report_to=[tensorboard,wandb]"],
                        lambda r: env)
    assert "`report_to: wandb` has no effect in lf-train" in text, text[-3000:]
    runs = list((out / "runs").iterdir())
    assert len(runs) == 1 and runs[0].name.endswith("_" + socket.gethostname()), runs
    acc = EventAccumulator(str(runs[0]), size_guidance={"scalars": 0})
    acc.Reload()
    got = {tag: {e.step: e.value for e in acc.Scalars(tag)} for tag in acc.Tags()["scalars"]}
    state = json.load(open(out / "trainer_state.json"))
    expected = 0
    for entry in state["log_history"]:
        for key, value in entry.items():
            if key == "step" or not isinstance(value, (int, float)) or isinstance(value, bool):
                continue
            tag = "eval/" + key[5:] if key.startswith("eval_") else "train/" + key
            assert tag in got and entry["step"] in got[tag], (tag, entry["step"], sorted(got))
            assert got[tag][entry["step"]] == np.float32(value), (tag, entry["step"], got[tag][entry["step"]], value)
            expected += 1
    assert expected >= 8 * 4 + 2  # loss, lr, grad_norm, epoch per step, and the evaluations
    for line in map(json.loads, open(out / "trainer_log.jsonl")):
        step = line["current_steps"]
        for key, tag in (("loss", "train/loss"), ("lr", "train/learning_rate"), ("eval_loss", "eval/loss"),
                         ("throughput", "train/throughput"), ("total_tokens", "train/total_tokens")):
            if key in ("throughput", "total_tokens") and "loss" not in line:
                continue  # an evaluation's or the end's: the event file keeps the training line's
            if key in line:
                assert got[tag][step] == np.float32(line[key]), (key, step)


def test_report_to_an_unknown_integration_is_refused_before_anything_starts(tmp_path):
    run = subprocess.run([LF_TRAIN, "configs/tiny_cpu.yaml", f"output_dir={tmp_path}", "report_to=tensorbord"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2, run.stderr
    assert "`report_to: tensorbord` is not an integration transformers knows" in run.stderr, run.stderr
