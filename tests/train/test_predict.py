"""Issue 34: LLaMA-Factory 0.9.5's predict run (do_predict + predict_with_generate) through the real lf-train ->
agent -> lf-worker path, against LLaMA-Factory's own run of the same YAML, weights and adapter
(tests/fixtures/train/lf_predict/, scripts/fixtures/lf_predict_reference.py): generated_predictions.jsonl line for
line (greedy: the same tokens, decoded the same way, with and without special tokens) and predict_results.json's
BLEU-4 / ROUGE figures. Two ranks write what one writes, greedy and sampled."""
import json, os, shutil, subprocess, sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from train_runs import ROOT, LF_TRAIN, free_port  # noqa: E402

FIX = os.path.join(ROOT, "tests", "fixtures", "train", "lf_predict")
TIMINGS = ("predict_runtime", "predict_samples_per_second", "predict_steps_per_second")


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """The fixture's weights with configs/models/tiny's tokenizer beside them."""
    m = tmp_path_factory.mktemp("predict") / "model"
    shutil.copytree(os.path.join(FIX, "model"), m)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(ROOT, "configs", "models", "tiny", f), m)
    return m


def predict(model, out, *overrides, ranks=1):
    """lf-train on the fixture's predict.yaml; returns (jsonl lines, predict_results.json, log)."""
    args = [LF_TRAIN, os.path.join(FIX, "predict.yaml"), f"model_name_or_path={model}",
            f"adapter_name_or_path={os.path.join(FIX, 'adapter')}", f"output_dir={out}", *overrides]
    env = dict(os.environ, NNODES="1", NPROC_PER_NODE=str(ranks), MASTER_PORT=str(free_port()), OMP_NUM_THREADS="1")
    p = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    log = p.stdout + p.stderr
    assert p.returncode == 0, log[-3000:]
    lines = [json.loads(l) for l in open(out / "generated_predictions.jsonl", encoding="utf-8")]
    return lines, json.load(open(out / "predict_results.json")), log


def assert_metrics_are(got, want):
    assert set(got) == set(want) | set(TIMINGS), (sorted(got), sorted(want))
    for k, v in want.items():
        assert abs(got[k] - v) <= 1e-6, (k, got[k], v)
    assert got["predict_runtime"] > 0


@pytest.mark.parametrize("run,overrides", [("greedy", []), ("raw", ["skip_special_tokens=false"])])
def test_predictions_are_llamafactorys(model, tmp_path, run, overrides):
    want = json.load(open(os.path.join(FIX, "expected.json"), encoding="utf-8"))[run]
    lines, metrics, _ = predict(model, tmp_path / run, *overrides)
    assert len(lines) == len(want["predictions"])
    for i, (g, w) in enumerate(zip(lines, want["predictions"])):
        assert g == w, f"line {i}:\n lf-train  {g}\n LLaMA-Factory {w}"
    assert_metrics_are(metrics, want["metrics"])
    assert json.load(open(tmp_path / run / "all_results.json")) == metrics


@pytest.mark.parametrize("overrides", [[], ["do_sample=true", "temperature=0.8", "top_k=20", "top_p=0.9"]])
def test_two_ranks_write_what_one_writes(model, tmp_path, overrides):
    one, m1, _ = predict(model, tmp_path / "one", *overrides)
    two, m2, log = predict(model, tmp_path / "two", *overrides, ranks=2)
    assert "2 rank(s)" in log, log[-3000:]
    assert two == one
    assert {k: v for k, v in m2.items() if k not in TIMINGS} == {k: v for k, v in m1.items() if k not in TIMINGS}


def test_sampling_changes_the_predictions(model, tmp_path):
    greedy, _, _ = predict(model, tmp_path / "greedy")
    sampled, _, _ = predict(model, tmp_path / "sampled", "do_sample=true")
    assert [l["prompt"] for l in sampled] == [l["prompt"] for l in greedy]
    assert [l["predict"] for l in sampled] != [l["predict"] for l in greedy]


def test_predict_needs_predict_with_generate(model, tmp_path):
    args = [LF_TRAIN, os.path.join(FIX, "predict.yaml"), f"model_name_or_path={model}", f"output_dir={tmp_path}",
            "predict_with_generate=false"]
    p = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "predict_with_generate" in p.stdout + p.stderr, (p.stdout + p.stderr)[-2000:]
