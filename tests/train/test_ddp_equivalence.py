"""Data-parallel training equals one process with the same global batch (issue 6, CPU):
1 rank x micro-batch 4, 2 ranks x 2, and 2 nodes x 2 ranks x 1 (two agents on loopback), each
with gradient accumulation 2 over the shipped data (sequences of different lengths on every
rank), 20 steps, through the real lf-train -> agent -> lf-worker -> trainer -> DDP path.
Per-step losses and final weights must agree within 1e-5, for full fine-tuning and LoRA.
Also: with no tokenized_path, one worker per host tokenizes and the others load its result; and
`ddp_reduce_dtype: bf16` sends bf16 gradients (close to, but not bit-equal with, fp32)."""
import json, os, re, socket, subprocess, sys

import numpy as np
import pytest
from safetensors.numpy import load_file

sys.path.insert(0, os.path.dirname(__file__))
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LF_TRAIN = os.environ["LF_TRAIN_BIN"]
TOL = 1e-5


from train_runs import free_port, train  # noqa: E402  (the launcher runs shared with the ZeRO tests)


@pytest.mark.parametrize("mode", ["full", "lora"])
def test_data_parallel_equals_one_process(tmp_path, mode):
    ref_losses, ref_weights = train(tmp_path / "one", mode, (1, 1, 4))
    assert len(ref_losses) == 20 + 3
    assert ref_losses[-1] < ref_losses[0], "the loss must fall, or the comparison proves little"
    for name, layout in (("two_ranks", (1, 2, 2)), ("two_nodes_two_ranks", (2, 2, 1))):
        outs = []
        losses, weights = train(tmp_path / name, mode, layout, outputs=outs)
        # Buckets follow the arrival order from step 2; under full fine-tuning the tied
        # embedding's lookup gradient travels as rows (its lm_head part arrives first).
        assert "rebuilt in the order the gradients arrived" in outs[0], outs[0][-2000:]
        assert (" 1 embedding(s) exchange" in outs[0]) == (mode == "full"), outs[0][-2000:]
        assert len(losses) == len(ref_losses), name
        worst = max(abs(a - b) for a, b in zip(losses, ref_losses))
        assert worst <= TOL, f"{name}: per-step loss differs by {worst:.2e}"
        assert weights.keys() == ref_weights.keys()
        for k in ref_weights:
            diff = float(np.max(np.abs(weights[k].astype(np.float64) - ref_weights[k].astype(np.float64))))
            assert diff <= TOL, f"{name}: {k} differs by {diff:.2e}"


def test_qlora_data_parallel_equals_one_process(tmp_path):
    """QLoRA (quantization_bit 4): every rank quantizes the same bytes at load, the adapters' gradients are
    all-reduced as LoRA's; 2 ranks equal one process."""
    q = ("quantization_bit=4", "max_steps=8", "eval_strategy=no", "val_size=0")
    outs = []
    ref_losses, ref_weights = train(tmp_path / "one", "lora", (1, 1, 4), *q, outputs=outs)
    assert "4-bit base: " in outs[0], outs[0][-2000:]
    losses, weights = train(tmp_path / "two", "lora", (1, 2, 2), *q)
    worst = max(abs(a - b) for a, b in zip(losses, ref_losses))
    assert len(losses) == len(ref_losses) == 8 and worst <= TOL, f"per-step loss differs by {worst:.2e}"
    for k in ref_weights:
        diff = float(np.max(np.abs(weights[k].astype(np.float64) - ref_weights[k].astype(np.float64))))
        assert diff <= TOL, f"{k} differs by {diff:.2e}"


def test_bf16_gradient_wire(tmp_path):
    ref_losses, ref_weights = train(tmp_path / "fp32", "full", (1, 2, 2))
    losses, weights = train(tmp_path / "bf16", "full", (1, 2, 2), "ddp_reduce_dtype=bf16")
    worst_loss = max(abs(a - b) / abs(a) for a, b in zip(losses, ref_losses))
    assert worst_loss <= 0.02, f"bf16 gradients moved the loss by {worst_loss:.3g} (relative)"
    diffs = [float(np.max(np.abs(weights[k] - ref_weights[k]))) for k in ref_weights]
    assert max(diffs) > 0, "ddp_reduce_dtype=bf16 changed nothing: the option is not wired"
    assert max(diffs) < 1e-2


def test_the_epochs_remainder_is_dealt_out_like_one_process(tmp_path):
    """45 steps of global batch 8 over 323 training examples: step 41 holds the epoch's last 3
    examples (rank 0 gets 2, rank 1 gets 1, the second micro-step none), then epoch 2 begins.
    A small learning rate: at the config's 3e-3 peak, 45 steps amplify fp32 summation-order
    differences past 1e-5 (seen: 2e-6 at step 22, 4e-4 at step 26) whatever the data order."""
    args = ("max_steps=45", "learning_rate=1e-4")
    ref_losses, ref_weights = train(tmp_path / "one", "full", (1, 1, 4), *args)
    losses, weights = train(tmp_path / "two", "full", (1, 2, 2), *args)
    log = [json.loads(l) for l in open(tmp_path / "two" / "trainer_log.jsonl")]
    assert [e["epoch"] for e in log if e.get("current_steps") == 41 and "loss" in e] == [1.0]
    assert len(losses) == len(ref_losses) == 45 + 6  # evals at 10, 20, 30, 40, the last step (45), the end
    worst = max(abs(a - b) for a, b in zip(losses, ref_losses))
    assert worst <= TOL, f"per-step loss differs by {worst:.2e}"
    for k in ref_weights:
        assert float(np.max(np.abs(weights[k] - ref_weights[k]))) <= TOL, k


def test_phase_profile_shows_where_a_step_goes(tmp_path):
    """LF_PROFILE_PHASES=1 adds each phase's median to the perf line; under DDP the reducer's
    finish (communication left after backward) is a phase of its own, and the phases add up to
    about the step. Without the variable the perf line has no phases."""
    def perf(out_text):
        line = [l for l in out_text.splitlines() if "perf: " in l][-1]
        return json.loads(line.split("perf: ", 1)[1])
    outs = []
    train(tmp_path / "profiled", "full", (1, 2, 2), "max_steps=12", env_extra={"LF_PROFILE_PHASES": "1"},
          outputs=outs)
    p = perf(outs[0])
    phases = p["phases_median_s"]
    assert set(phases) == {"forward", "backward", "ddp_finish", "optimizer"}, phases
    assert all(v > 0 for v in phases.values()), phases
    assert sum(phases.values()) <= p["median_step_s"] * 1.5, (phases, p["median_step_s"])
    # LF_PROFILE_TRACE (no phases): one Kineto trace per rank of steps 3-4 with the trainer's
    # named spans, which scripts/bench/trace_summary.py reads.
    outs = []
    trace_dir = tmp_path / "traces"
    train(tmp_path / "plain", "full", (1, 2, 2), "max_steps=12", outputs=outs,
          env_extra={"LF_PROFILE_TRACE": str(trace_dir), "LF_PROFILE_TRACE_STEPS": "3:4"})
    assert "phases_median_s" not in perf(outs[0])
    files = sorted(os.listdir(trace_dir))
    assert files == ["trace-rank0.json", "trace-rank1.json"], files
    summary = subprocess.run([sys.executable, os.path.join(ROOT, "scripts/bench/trace_summary.py"),
                              *[str(trace_dir / f) for f in files]], capture_output=True, text=True, check=True)
    results = [json.loads(l[len("RESULT "):]) for l in summary.stdout.splitlines() if l.startswith("RESULT ")]
    assert len(results) == 2, summary.stdout
    for r in results:
        assert r["steps"] == 2, r
        assert {"forward", "backward", "ddp_finish", "optimizer", "ddp_hook"} <= set(r["host_ms"]), r
        assert r["hook_calls"] > 0, r  # the reducer's hooks ran inside the traced backward


def test_trace_summary_interval_arithmetic(tmp_path):
    """trace_summary.py on a hand-made GPU trace (no GPU here): a kernel belongs to the host span
    its launch fell in; busy/idle, NCCL exposed time and the tail after backward follow."""
    def span(name, ts, dur):
        return {"ph": "X", "cat": "user_annotation", "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": 1}
    events = [span("lf::forward", 0, 100), span("lf::backward", 100, 200), span("lf::optimizer", 300, 60)]
    kernels = [("fwd_gemm", 10, 90, 5), ("bwd_gemm", 110, 250, 105), ("ncclAllReduce", 200, 280, 150),
               ("adamw", 290, 340, 305)]
    for corr, (name, a, b, launch) in enumerate(kernels):
        events.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": launch, "dur": 1,
                       "args": {"correlation": corr}})
        events.append({"ph": "X", "cat": "kernel", "name": name, "ts": a, "dur": b - a,
                       "args": {"correlation": corr, "stream": 7 if "nccl" in name else 3}})
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    out = subprocess.run([sys.executable, os.path.join(ROOT, "scripts/bench/trace_summary.py"), str(path)],
                         capture_output=True, text=True, check=True).stdout
    r = json.loads(out.split("RESULT ", 1)[1])
    assert r["compute_ms"] == {"forward": 0.08, "backward": 0.14, "optimizer": 0.05}, r
    assert (r["gpu_span_ms"], r["busy_ms"], r["idle_ms"]) == (0.33, 0.27, 0.06), r
    assert r["nccl_ms"] == {"kernels": 1, "sum": 0.08, "union": 0.08, "exposed": 0.03, "tail": 0.03}, r
    # --ops: each top kernel with the innermost host op around its launch (nested ops: the inner one).
    def op(name, ts, dur):
        return {"ph": "X", "cat": "cpu_op", "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": 1}
    events += [op("aten::linear", 2, 8), op("aten::mm", 4, 3), op("aten::_foreach_add_", 304, 3)]
    for e in events:
        e.setdefault("tid", 1)
    path.write_text(json.dumps({"traceEvents": events}))
    out = subprocess.run([sys.executable, os.path.join(ROOT, "scripts/bench/trace_summary.py"), "--top", "3", "--ops",
                          str(path)], capture_output=True, text=True, check=True).stdout
    assert "fwd_gemm  <- aten::mm" in out and "adamw  <- aten::_foreach_add_" in out and "bwd_gemm  <- ?" in out, out


@pytest.mark.parametrize("mode", ["full", "lora"])
def test_grad_sink_changes_nothing_but_the_copies(tmp_path, mode):
    """bf16 over fp32 master weights: the layers' gradients go from the bf16 cast straight into
    the DDP buckets (model::GradSink), not through .grad and a hook's copy. Same numbers to the
    bit, with gradient accumulation 2 and activation checkpointing; LF_DDP_GRAD_SINK=0 is the
    copy path."""
    extra = ("bf16=true", "disable_gradient_checkpointing=false")
    on_out, off_out = [], []
    dense = {"LF_DDP_SPARSE_EMBEDDING": "0"}  # rows change the summation order: tested elsewhere
    on = train(tmp_path / "sink", mode, (1, 2, 2), *extra, env_extra=dense, outputs=on_out)
    off = train(tmp_path / "copy", mode, (1, 2, 2), *extra, env_extra={"LF_DDP_GRAD_SINK": "0", **dense},
                outputs=off_out)
    used = re.search(r"DDP: (\d+) of (\d+) parameters accumulate straight into the buckets", on_out[0])
    assert used and int(used.group(1)) > 0, on_out[0][-2000:]
    assert "DDP: 0 of" in off_out[0]
    assert on[0] == off[0], "per-step losses differ"
    for k in on[1]:
        assert np.array_equal(on[1][k], off[1][k]), k


def test_a_resumed_run_continues_every_ranks_dropout_stream(tmp_path):
    """LoRA dropout draws from each rank's own generator ((seed, rank), then advanced by batches
    of that rank's shapes), so a checkpoint holds every rank's state and each rank resumes
    its own: resumed at step 10, 2 ranks end exactly where the uninterrupted run does. Before,
    every rank restored rank 0's state and the losses drifted (~1e-3)."""
    extra = ("lora_dropout=0.3", "save_steps=10")
    whole, whole_weights = train(tmp_path / "whole", "lora", (1, 2, 2), *extra)
    rng = load_file(str(tmp_path / "whole" / "checkpoint-10" / "rng_state.safetensors"))
    assert {"cpu", "rank0.cpu", "rank1.cpu"} <= rng.keys(), rng.keys()
    assert not np.array_equal(rng["rank0.cpu"], rng["rank1.cpu"]), "the ranks' streams should differ"
    resumed, resumed_weights = train(tmp_path / "resumed", "lora", (1, 2, 2), *extra,
                                     f"resume_from_checkpoint={tmp_path / 'whole' / 'checkpoint-10'}")
    # whole: 20 step losses, then evals at 10, 20, end; resumed: steps 11-20, evals at 20, end.
    assert resumed == whole[10:20] + whole[-2:], (resumed, whole)
    for k in whole_weights:
        assert np.array_equal(resumed_weights[k], whole_weights[k]), k


def test_collective_check_changes_nothing(tmp_path):
    """LF_COMM_CHECK=1 agrees every collective through the store before issuing it (the debug
    mode for hangs): a run under it sees the same collectives on both ranks at every step, and
    gives the same numbers to the bit."""
    outs = []
    checked = train(tmp_path / "checked", "full", (1, 2, 2), env_extra={"LF_COMM_CHECK": "1"}, outputs=outs)
    plain = train(tmp_path / "plain", "full", (1, 2, 2))
    assert outs[0].count("collective check on (LF_COMM_CHECK)") == 2, outs[0][-2000:]
    assert checked[0] == plain[0], "per-step losses differ"
    for k in plain[1]:
        assert np.array_equal(checked[1][k], plain[1][k]), k


def test_a_rank_with_no_data_still_takes_part_in_every_collective(tmp_path):
    """Two training examples, global batch 4: rank 1 gets no micro-batch in any step. It must
    still join every collective, the embedding rows' exchange included (which rows travel is
    fixed up front, not learnt from a forward this rank never runs); before, it crashed.
    LF_COMM_CHECK=1 makes any difference between the ranks' collectives an error."""
    args = [LF_TRAIN, "configs/tiny_cpu.yaml", f"output_dir={tmp_path / 'out'}", "max_steps=2", "max_samples=1",
            "val_size=0", "eval_strategy=no", "per_device_train_batch_size=2", "bf16=true", "plot_loss=false"]
    env = dict(os.environ, NPROC_PER_NODE="2", MASTER_PORT=str(free_port()), OMP_NUM_THREADS="1", LF_COMM_CHECK="1")
    p = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    text = p.stdout + p.stderr
    assert p.returncode == 0, text[-3000:]
    assert text.count("collective check on (LF_COMM_CHECK)") == 2, text[-3000:]
    assert "training: 2 examples" in text and "global batch 4" in text, text[-3000:]
    assert text.count("1 embedding(s) exchange their lookup gradient as rows") == 2, text[-3000:]


def test_an_untied_embedding_sends_only_rows_and_still_equals_one_process(tmp_path):
    """With lm_head untied, the embedding has no dense gradient: it stays out of the buckets (no
    vocabulary-sized all-reduce), its gradient is every rank's lookup rows; 1 rank = 2 ranks."""
    import shutil
    model = tmp_path / "untied"
    shutil.copytree(os.path.join(ROOT, "configs", "models", "tiny"), model)
    cfg = json.load(open(model / "config.json"))
    cfg["tie_word_embeddings"] = False
    json.dump(cfg, open(model / "config.json", "w"))
    ref_losses, ref_weights = train(tmp_path / "one", "full", (1, 1, 4), f"model_name_or_path={model}")
    outs = []
    losses, weights = train(tmp_path / "two", "full", (1, 2, 2), f"model_name_or_path={model}", outputs=outs)
    assert "1 of them rows only (no all-reduce)" in outs[0], outs[0][-2000:]
    assert "lm_head.weight" in weights
    worst = max(abs(a - b) for a, b in zip(losses, ref_losses))
    assert worst <= TOL, f"per-step loss differs by {worst:.2e}"
    for k in ref_weights:
        assert float(np.max(np.abs(weights[k] - ref_weights[k]))) <= TOL, k


def test_embedding_rows_only_when_they_are_fewer_bytes_than_the_dense_gradient(tmp_path):
    """2 ranks x accumulation 2 x micro-batch 8 x 64-token rows = 2048 rows a step against a
    1088-token vocabulary: rows would move more bytes than the dense all-reduce, so by default
    the embedding is reduced densely (what keeps long rows on many GPUs from gathering GBs);
    LF_DDP_SPARSE_EMBEDDING=1 forces rows, and both give the same training."""
    outs = {}
    results = {}
    for name, env in (("auto", {}), ("forced", {"LF_DDP_SPARSE_EMBEDDING": "1"})):
        outs[name] = []
        results[name] = train(tmp_path / name, "full", (1, 2, 8), "max_steps=6", env_extra=env, outputs=outs[name])
    assert "all-reduced densely" in outs["auto"][0] and " 0 embedding(s) exchange" in outs["auto"][0]
    assert " 1 embedding(s) exchange" in outs["forced"][0] and "all-reduced densely" not in outs["forced"][0]
    worst = max(abs(a - b) for a, b in zip(results["auto"][0], results["forced"][0]))
    assert worst <= TOL, worst


@pytest.mark.parametrize("tokens", ["no", "all", "non_padding"])
def test_counters_are_the_jobs_not_rank_zeros(tmp_path, tokens):
    """total_flos, num_input_tokens_seen and trainer_log's total_tokens count every rank's
    micro-batches (summed with the step's loss, no extra collective): 2 ranks x accumulation 2 run
    the micro-batches 1 rank x accumulation 4 runs, so every counter in trainer_log.jsonl,
    trainer_state.json (and its log history), train_results.json and all_results.json is equal.
    Before, 2 ranks counted rank 0's only (about half). include_num_input_tokens_seen as HF reads
    it: no (0; lf-train's own total_tokens are real tokens), all (input_ids elements), non_padding."""
    args = ("max_steps=6", "eval_steps=3", f"include_num_input_tokens_seen={tokens}", "save_steps=4")

    def counters(out):
        log = [json.loads(l) for l in open(out / "trainer_log.jsonl")]
        state = json.load(open(out / "trainer_state.json"))
        ckpt = json.load(open(out / "checkpoint-4" / "trainer_state.json"))
        results = [json.load(open(out / f)) for f in ("train_results.json", "all_results.json")]
        return {"trainer_log": [(l.get("total_tokens"), "throughput" in l) for l in log],
                "state": (state["total_flos"], state["num_input_tokens_seen"]),
                "checkpoint": (ckpt["total_flos"], ckpt["num_input_tokens_seen"]),
                "log_history": [e.get("num_input_tokens_seen") for e in state["log_history"]],
                "results": [(r["total_flos"], r.get("num_input_tokens_seen")) for r in results]}

    train(tmp_path / "one", "full", (1, 1, 2), *args, "gradient_accumulation_steps=4")
    train(tmp_path / "two", "full", (1, 2, 2), *args, "gradient_accumulation_steps=2")
    one, two = counters(tmp_path / "one"), counters(tmp_path / "two")
    assert one == two
    assert one["state"][0] > 0 and all(t > 0 and thr for t, thr in one["trainer_log"]), one
    totals = [t for t, _ in one["trainer_log"]]
    assert totals == sorted(totals) and totals[0] < totals[-1], totals
    if tokens == "no":  # HF tracks nothing; LLaMA-Factory's log lines then have no token fields (lf-train's do)
        assert one["state"][1] == 0 and set(one["log_history"]) == {None}, one
    else:
        assert one["state"][1] == totals[-1] and one["results"][0][1] == totals[-1], one
        assert None not in one["log_history"], one
