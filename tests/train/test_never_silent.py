"""Through the real lf-train -> agent -> lf-worker path: a configuration or data error exits 2 on
every node at once and is never restarted, whatever --max-restarts says; warnings are printed
once; a model folder's weights are trained (or said to be ignored); a truncated weight file
fails instead of exiting 0; 2 nodes x 2 workers on CPU are bit-reproducible."""
import hashlib, json, os, shutil, subprocess, sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "launcher"))
from harness import free_port  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LF_TRAIN = os.environ["LF_TRAIN_BIN"]
TINY = os.path.join(ROOT, "configs", "models", "tiny")
QUICK = ["logging_steps=1", "eval_strategy=no", "val_size=0", "plot_loss=false", "save_strategy=no",
         "per_device_train_batch_size=2"]


def start(args, nodes=1, node_rank=0, nproc=1, port=None, restarts=0, threads=1):
    env = dict(os.environ, NNODES=str(nodes), NODE_RANK=str(node_rank), NPROC_PER_NODE=str(nproc),
               MASTER_PORT=str(port or free_port()), OMP_NUM_THREADS=str(threads), MAX_RESTARTS=str(restarts))
    return subprocess.Popen([LF_TRAIN, "configs/tiny_cpu.yaml", *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def run(args, **kw):
    p = start(args, **kw)
    out = p.communicate(timeout=300)[0]
    return p.returncode, out


def dataset_dir(tmp_path, files, info):
    d = tmp_path / "data"
    d.mkdir()
    for name, text in files.items():
        (d / name).write_text(text)
    (d / "dataset_info.json").write_text(json.dumps(info))
    return d


GOOD = '{"instruction": "say hi", "output": "hi"}\n'


def bad_input(tmp_path, case):
    """(overrides, text the message must hold) for one deterministic failure."""
    info = {"mine": {"file_name": "mine.jsonl"}}
    if case == "malformed_json_line":
        d = dataset_dir(tmp_path, {"mine.jsonl": GOOD * 3 + '{"instruction": "x", "output": }\n'}, info)
        return [f"dataset_dir={d}", "dataset=mine"], "mine.jsonl:4: malformed JSON record"
    if case == "unknown_dataset":
        return ["dataset=no_such_set"], "no_such_set"
    if case == "missing_dataset_file":
        d = dataset_dir(tmp_path, {}, info)
        return [f"dataset_dir={d}", "dataset=mine"], "not found"
    if case == "empty_dataset":
        d = dataset_dir(tmp_path, {"mine.jsonl": "\n"}, info)
        return [f"dataset_dir={d}", "dataset=mine"], "dataset 'mine' is empty"
    if case == "missing_tokenizer":
        m = tmp_path / "model"
        m.mkdir()
        shutil.copy(os.path.join(TINY, "config.json"), m)
        return [f"model_name_or_path={m}"], "tokenizer"
    raise AssertionError(case)


@pytest.mark.parametrize("case", ["malformed_json_line", "unknown_dataset", "missing_dataset_file", "empty_dataset",
                                  "missing_tokenizer"])
def test_a_deterministic_input_error_exits_2_and_is_never_restarted(tmp_path, case):
    overrides, expected = bad_input(tmp_path, case)
    rc, out = run([f"output_dir={tmp_path / 'out'}", "max_steps=5", *QUICK, *overrides], restarts=3)
    assert rc == 2, out[-3000:]
    assert expected in out, out[-3000:]
    assert "restarting" not in out and "(generation 1)" not in out, out[-3000:]
    assert "(a configuration or data error: not restarted)" in out, out[-3000:]


def test_a_data_error_on_two_nodes_exits_2_on_both_without_a_restart(tmp_path):
    overrides, expected = bad_input(tmp_path, "malformed_json_line")
    port = free_port()
    args = [f"output_dir={tmp_path / 'out'}", "max_steps=5", *QUICK, *overrides]
    nodes = [start(args, nodes=2, node_rank=r, port=port, restarts=3) for r in range(2)]
    outs = [n.communicate(timeout=120)[0] for n in nodes]
    for n, out in zip(nodes, outs):
        assert n.returncode == 2, out[-3000:]
        assert "exited with code 2" in out, out[-3000:]
        assert "restarting" not in out, out[-3000:]


def test_config_warnings_are_printed_once_per_node(tmp_path):
    rc, out = run([f"output_dir={tmp_path / 'out'}", "max_steps=2", *QUICK, "report_to=wandb"], nproc=2)
    assert rc == 0, out[-3000:]
    assert out.count("`report_to: wandb` has no effect") == 1, out[-3000:]
    assert out.count("holds no weights (config.json only)") == 1, out[-3000:]


def test_a_folder_with_weights_is_fine_tuned_and_a_truncated_one_fails(tmp_path):
    first = tmp_path / "first"
    rc, out = run([f"output_dir={first}", "max_steps=3", *QUICK, "save_strategy=steps", "save_steps=1000"])
    assert rc == 0 and (first / "model.safetensors").exists(), out[-3000:]
    # The tiny config pointed at that folder: its weights are trained, from where the first run ended.
    rc, out = run([f"output_dir={tmp_path / 'second'}", f"model_name_or_path={first}", "max_steps=1", *QUICK])
    assert rc == 0, out[-3000:]
    assert "holds no weights" not in out and "are ignored" not in out, out[-3000:]
    rc, out = run([f"output_dir={tmp_path / 'third'}", f"model_name_or_path={first}", "init_weights=random",
                   "max_steps=1", *QUICK])
    assert rc == 0 and out.count(f"the weights in {first} (model.safetensors") == 1, out[-3000:]
    data = (first / "model.safetensors").read_bytes()
    (first / "model.safetensors").write_bytes(data[: len(data) // 2])
    rc, out = run([f"output_dir={tmp_path / 'fourth'}", f"model_name_or_path={first}", "max_steps=1", *QUICK])
    assert rc == 2 and "corrupt or truncated safetensors file" in out, out[-3000:]


def weights_digest(out):
    return hashlib.sha256((out / "model.safetensors").read_bytes()).hexdigest()


def test_two_nodes_of_two_workers_are_bit_identical_run_after_run(tmp_path):
    """Two threads per worker (the agent sets OMP_NUM_THREADS=1 only when the user did not set
    it): the embedding's gradient rows from every rank were added with index_put_(accumulate),
    whose CPU kernel adds duplicate ids on several threads with atomics, so two identical runs
    gave different weights (~1e-7 apart)."""
    digests = []
    for attempt in range(2):
        out = tmp_path / f"run{attempt}"
        port = free_port()
        args = [f"output_dir={out}", "max_steps=12", *QUICK, "per_device_train_batch_size=1",
                "gradient_accumulation_steps=2"]
        nodes = [start(args, nodes=2, node_rank=r, nproc=2, port=port, threads=2) for r in range(2)]
        outs = [n.communicate(timeout=300)[0] for n in nodes]
        for n, text in zip(nodes, outs):
            assert n.returncode == 0, text[-3000:]
        digests.append(weights_digest(out))
    assert digests[0] == digests[1], "two identical 2-node x 2-worker runs gave different weights"


def test_a_parquet_dataset_in_the_multi_node_guides_layout_trains(tmp_path):
    """dataset/train/part-0000N.parquet with file_name: dataset/train (a folder of part files),
    as LLaMA-Factory reads it; Parquet is part of the default build (pyarrow's Arrow C++)."""
    d = tmp_path / "data"
    shutil.copytree(os.path.join(ROOT, "tests", "fixtures", "data", "alpaca_parquet"), d / "dataset" / "train")
    (d / "dataset_info.json").write_text(json.dumps({"parts": {"file_name": "dataset/train", "columns": {
        "prompt": "instruction", "query": "input", "response": "output", "system": "system", "history": "history"}}}))
    rc, out = run([f"output_dir={tmp_path / 'out'}", f"dataset_dir={d}", "dataset=parts", "max_steps=2", *QUICK])
    if "built without Parquet support" in out:
        pytest.skip("this lf-train was built without Parquet (no pyarrow in the build's LF_PYTHON venv)")
    assert rc == 0, out[-3000:]
    assert "data: " in out and " train / 0 eval examples" in out, out[-3000:]



def test_sdpa_backend_knob_says_what_attention_runs(tmp_path):
    """LF_SDPA_BACKEND restricts the attention kernel SDPA picks, and the worker says which one its training
    attention now runs: on the CPU torch's flash kernel, or math when the knob asks for it."""
    seen = {}
    for backend in ("math", "flash"):
        env = dict(os.environ, LF_SDPA_BACKEND=backend)
        p = subprocess.run([LF_TRAIN, "configs/tiny_cpu.yaml", f"output_dir={tmp_path / backend}", "max_steps=2", *QUICK],
                           cwd=ROOT, env=dict(env, NNODES="1", NPROC_PER_NODE="1", MASTER_PORT=str(free_port()),
                                              OMP_NUM_THREADS="1"),
                           capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
        lines = [l for l in (p.stdout + p.stderr).splitlines() if "attention: LF_SDPA_BACKEND=" in l]
        assert len(lines) == 1, (p.stdout + p.stderr)[-3000:]
        seen[backend] = lines[0].rsplit("SDPA runs ", 1)[1].strip()
    assert seen == {"math": "math+gqa", "flash": "flash_attention+gqa"}, seen  # the tiny model has GQA


def test_late_readback_reads_each_step_after_the_next_launch(tmp_path):
    """LF_LATE_READBACK: by default a step's numbers are read once the next step is launched (its update already
    launched), so the trace's lf::read_step spans fall outside lf::optimizer; with 0 each step is read inside its
    own optimizer span, before its update. The logs are the same bit for bit, and the perf line says which."""
    runs = {}
    for late in ("1", "0"):
        out, trace = tmp_path / f"out{late}", tmp_path / f"trace{late}"
        env = dict(os.environ, LF_LATE_READBACK=late, LF_PROFILE_TRACE=str(trace), LF_PROFILE_TRACE_STEPS="2:4",
                   NNODES="1", NPROC_PER_NODE="1", MASTER_PORT=str(free_port()), OMP_NUM_THREADS="1")
        p = subprocess.run([LF_TRAIN, "configs/tiny_cpu.yaml", f"output_dir={out}", "max_steps=6", *QUICK],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
        text = p.stdout + p.stderr
        assert p.returncode == 0, text[-3000:]
        perf = json.loads([l for l in text.splitlines() if "perf: " in l][-1].split("perf: ", 1)[1])
        events = json.load(open(trace / "trace-rank0.json"))["traceEvents"]
        spans = lambda name: [(e["ts"], e["ts"] + e["dur"]) for e in events if e.get("name") == name and "dur" in e]
        reads, optimizers = spans("lf::read_step"), spans("lf::optimizer")
        inside = [any(o0 <= r0 and r1 <= o1 for o0, o1 in optimizers) for r0, r1 in reads]
        history = json.load(open(out / "trainer_state.json"))["log_history"]
        runs[late] = (perf["late_readback"], len(reads), inside,
                      [(h["step"], h["loss"], h["grad_norm"], h["learning_rate"], h["epoch"]) for h in history
                       if "loss" in h])
    assert runs["1"][0] == "5 of 6 steps" and runs["0"][0] == "0 of 6 steps", (runs["1"][0], runs["0"][0])
    # traced steps 2-4: read late, steps 1 and 2 come back after steps 2 and 3 are launched (step 3's after the
    # trace ends with step 4's launch), none inside an optimizer span; read at once, steps 2-4, each inside its own
    assert runs["1"][1] == 2 and not any(runs["1"][2]), runs["1"][:3]
    assert runs["0"][1] == 3 and all(runs["0"][2]), runs["0"][:3]
    assert runs["1"][3] == runs["0"][3] and len(runs["1"][3]) == 6
