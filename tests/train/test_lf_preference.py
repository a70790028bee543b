"""Stages dpo, kto and rm against LLaMA-Factory 0.9.5's own runs (issue 31).

tests/fixtures/train/lf_pref/ (scripts/fixtures/lf_pref_reference.py, re-checked by lf_pref_fixture_check) holds
LLaMA-Factory's runs of one YAML with each run's keys over it: DPO with the sigmoid, hinge, ipo, orpo and simpo losses
(LoRA and full, pref_ftx and label smoothing, pref_beta, simpo_gamma), KTO (LoRA and full, kto_chosen_weight and
kto_rejected_weight) and the reward model (LoRA and full). lf-train
on the same YAML, keys and weights must log, per step, the same loss, gradient norm, learning rate and epoch, and
the same TRL reward metrics (rewards/*, logps/*, logits/*, kl, ORPO's sft_loss and odds_ratio_loss), within a
relative 1e-5 (an absolute floor where LLaMA-Factory's value is a sum of terms that cancel: the first step's
rewards that are exactly 0). The outputs are LLaMA-Factory's: the reward model's value head beside
the adapter or model, trainer_log.jsonl's accuracy (rewards/accuracies) for dpo, the stage's plots.

Then the distributed runs: 2 ranks (DDP) and ZeRO-3 over 2 ranks equal one process replaying the same
micro-batches (per_device_train_batch_size 2 on 2 ranks is one process's 4 with gradient_accumulation_steps 1;
KTO's KL estimate is per micro-step over every rank's rows, as TRL gathers it); 2 ranks of 1 pair accumulating 2
micro-steps under ZeRO-1 and ZeRO-2 with the optimizer offloaded are LLaMA-Factory's runs; rm in bf16 under ZeRO-1/2/3
equals DDP. And the bad inputs of the issue."""
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from safetensors.numpy import load_file

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "launcher"))
from harness import free_port  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LF_TRAIN = os.environ["LF_TRAIN_BIN"]
FIX = os.path.join(ROOT, "tests", "fixtures", "train", "lf_pref")
EXPECTED = json.load(open(os.path.join(FIX, "expected.json")))
RUNS = EXPECTED["runs"]
# ref_model / ref_model_adapters, pref_bco_weight and ld_alpha (scripts/fixtures/lf_pref_ref_reference.py): keys over
# the same YAML and policy, "{fixture}" standing for that fixture's folder (its ref_model/ and ref_adapter/).
REF_FIX = os.path.join(ROOT, "tests", "fixtures", "train", "lf_pref_ref")
REF_RUNS = json.load(open(os.path.join(REF_FIX, "expected.json")))["runs"]


def yaml_value(v):
    return json.dumps(v) if not isinstance(v, str) else v


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    """The fixture's weights with configs/models/tiny's tokenizer."""
    m = tmp_path_factory.mktemp("pref") / "model"
    shutil.copytree(os.path.join(FIX, "model"), m)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(ROOT, "configs", "models", "tiny", f), m)
    return m


def train(out, model, keys, ranks=1, expect_ok=True, yaml=os.path.join(FIX, "pref.yaml"), env_extra=None):
    args = [LF_TRAIN, yaml, f"model_name_or_path={model}", f"output_dir={out}",
            *[f"{k}={yaml_value(v)}" for k, v in keys.items()]]
    env = dict(os.environ, NNODES="1", NPROC_PER_NODE=str(ranks), MASTER_PORT=str(free_port()), OMP_NUM_THREADS="1",
               **(env_extra or {}))
    p = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    log = p.stdout + p.stderr
    if expect_ok:
        assert p.returncode == 0, log[-4000:]
    return p.returncode, log


def steps_of(out, evals=False):
    """The log history's training entries (and, with evals, its evaluations), in order."""
    return [l for l in json.load(open(os.path.join(out, "trainer_state.json")))["log_history"]
            if "loss" in l or (evals and "eval_loss" in l)]


def tolerance(key, want, step):
    """What "the same" means for `key` at one logged step of LLaMA-Factory's (`step`: its entry).
    - loss, grad_norm, logps/*: relative 1e-5 (seen: 2e-6);
    - rewards/*, kl: beta x (policy - reference) log-probabilities, differences of fp32 numbers of a few hundred:
      their absolute error is the log-probabilities' (seen 1e-7 relative) times their size, so 1e-6 x |logps|
      (seen: 1.5e-6 absolute on rewards of 0.03, KL within 4e-5 of 2.7);
    - rewards/accuracies: exact (a share of pairs);
    - eval_*: as the key without the prefix (eval_loss as loss);
    - logits/*: relative 1e-5: means over every position of the padded rows, whose pad positions lf-train computes
      under HF's padding mask as LLaMA-Factory does (model/key_padding.h)."""
    logps = max([abs(v) for k, v in step.items() if k.startswith(("logps/", "eval_logps/"))] or [0.0])
    key = key[5:] if key.startswith("eval_") and key != "eval_loss" else key
    if key in ("rewards/accuracies", "accuracy"):
        return 0.0
    if key.startswith("rewards/") or key == "kl":
        return 1e-5 * abs(want) + 1e-6 * logps
    if key.startswith("logits/"):
        return 1e-5 * abs(want)
    return 1e-5 * abs(want)


def assert_same_as_one_process(got, want, sharding):
    """A distributed run's steps against one process's: every float but logits/* and the runtime, within twice
    the fixtures' tolerance."""
    assert len(got) == len(want)
    for g, w in zip(got, want):
        for key in w:
            if isinstance(w[key], float) and not key.startswith("logits/") and key != "train_runtime":
                assert abs(g[key] - w[key]) <= 2 * tolerance(key, w[key], w), (sharding, key, g[key], w[key])


def assert_same_steps(got, want):
    assert [g["step"] for g in got] == [w["step"] for w in want], (got, want)
    for g, w in zip(got, want):
        for key, v in w.items():
            if key == "step":
                continue
            assert key in g, f"step {w['step']}: no {key} logged ({sorted(g)})"
            assert abs(g[key] - v) <= tolerance(key, v, w), f"step {w['step']} {key}: {g[key]} vs LLaMA-Factory's {v}"
        extra = {k for k in g if k.startswith(("rewards/", "logps/", "logits/")) or k in ("kl",)} - set(w)
        assert not extra, f"metrics LLaMA-Factory does not log: {extra}"


@pytest.mark.parametrize("run", sorted(RUNS))
def test_run_is_llamafactorys(run, model, tmp_path):
    out = tmp_path / run
    train(out, model, dict(RUNS[run]["keys"], plot_loss="true"))
    assert_same_steps(steps_of(out, evals=True), RUNS[run]["steps"])
    files = sorted(f for f in os.listdir(out) if f.endswith(".safetensors"))
    assert files == RUNS[run]["files"], files
    stage = RUNS[run]["keys"].get("stage", "dpo")
    log = [json.loads(l) for l in open(out / "trainer_log.jsonl")]
    if stage == "dpo":  # LLaMA-Factory's LogCallback: accuracy = rewards/accuracies
        assert [l["accuracy"] for l in log if "loss" in l] == [s["rewards/accuracies"] for s in steps_of(out)]
        assert (out / "training_rewards_accuracies.png").exists()
    if stage == "kto":
        assert (out / "training_rewards_chosen.png").exists()
    assert (out / "training_loss.png").exists()


@pytest.mark.parametrize("run", ["dpo_sigmoid_lora", "dpo_sigmoid_full", "dpo_orpo_lora", "ref:dpo_ld_alpha_lora",
                                 "ref:dpo_ref_model_lora"])
def test_padding_free_rows_train_as_padded_ones(run, model, tmp_path):
    """LF_PREF_PADDING_FREE=1 (auto's choice on a GPU): each micro-batch's rows end to end as one row, attention
    within each (here under the block-diagonal mask, on a GPU flash's varlen kernel), no pad position computed.
    The loss, gradient norm, rewards and log-probabilities stay LLaMA-Factory's padded run's, within the same
    tolerance; logits/* average the real positions only, so where a micro-batch was padded they move off
    LLaMA-Factory's (which average the pad positions too): the proof the rows ran without their padding.
    (kto_en_demo's rows, all cut at 64 tokens, have no padding to drop.)"""
    ref = run.startswith("ref:")  # LD-DPO's weights follow the packed targets; a reference model packs too
    fixture = REF_RUNS[run[4:]] if ref else RUNS[run]
    out = tmp_path / run.replace(":", "-")
    _, log = train(out, model, ref_keys(fixture["keys"]), env_extra={"LF_PREF_PADDING_FREE": "1"})
    assert "preference rows: padding-free" in log, log[-3000:]
    got, want = steps_of(out), fixture["steps"]
    logits = [k for k in want[0] if k.startswith("logits/")]
    assert_same_steps([{k: v for k, v in g.items() if not k.startswith("logits/")} for g in got],
                      [{k: v for k, v in w.items() if not k.startswith("logits/")} for w in want])
    moved = [(g[k], w[k]) for g, w in zip(got, want) for k in logits if abs(g[k] - w[k]) > tolerance(k, w[k], w)]
    assert moved, f"logits/* all equal the padded run's: no micro-batch ran padding-free ({logits})"


def test_padding_free_two_ranks_and_zero3_equal_one_process(model, tmp_path):
    """Padding-free under DDP and ZeRO-3 (each rank packs its own rows; ZeRO-3's gathers run per packed row)."""
    keys = dict(finetuning_type="full", learning_rate=1e-3, max_steps=3)
    env = {"LF_PREF_PADDING_FREE": "1"}
    one = tmp_path / "one"
    train(one, model, dict(keys, per_device_train_batch_size=4, gradient_accumulation_steps=1), env_extra=env)
    want = steps_of(one)
    for sharding in ({}, {"zero_stage": 3}):
        out = tmp_path / f"two-{len(sharding)}"
        train(out, model, dict(keys, per_device_train_batch_size=2, gradient_accumulation_steps=1, **sharding),
              ranks=2, env_extra=env)
        assert_same_as_one_process(steps_of(out), want, sharding)


def padded_and_padding_free(tmp_path, model, keys, ranks=1):
    """The same run padded (LF_PREF_PADDING_FREE=0) and padding-free (1): their logged entries, evaluations too."""
    runs = []
    for mode in ("0", "1"):
        out = tmp_path / f"pf{mode}"
        _, log = train(out, model, keys, ranks=ranks, env_extra={"LF_PREF_PADDING_FREE": mode})
        assert ("preference rows: padding-free" in log) == (mode == "1"), log[-3000:]
        runs.append(steps_of(out, evals=True))
    return runs


def assert_padding_free_is_padded(padded, free):
    """Everything but logits/* (and timings) within the fixtures' tolerance; logits/* moved somewhere."""
    assert [p["step"] for p in padded] == [f["step"] for f in free]
    moved = False
    for p, f in zip(padded, free):
        for key, v in p.items():
            if not isinstance(v, float) or "runtime" in key or "per_second" in key:
                continue
            if "logits/" in key:
                moved = moved or abs(f[key] - v) > tolerance(key, v, p)
                continue
            assert abs(f[key] - v) <= tolerance(key, v, p), (p["step"], key, f[key], v)
    assert moved, "logits/* all equal the padded run's: nothing ran padding-free"


@pytest.mark.parametrize("keys", [
    # KTO on rows that do have padding (kto_en_demo cut at 512 tokens, not 64): target and KL rows packed.
    dict(stage="kto", dataset="kto_en_demo", cutoff_len=512),
    dict(stage="kto", dataset="kto_en_demo", cutoff_len=512, finetuning_type="full", learning_rate=1e-3, pref_ftx=0.5),
    # DPO's evaluation (and its reference pass over the eval set) on longer, more padded rows.
    dict(cutoff_len=512, eval_steps=2, eval_strategy="steps", per_device_eval_batch_size=2, val_size=4),
], ids=["kto_lora", "kto_full_ftx", "dpo_eval"])
def test_padding_free_equals_padded_on_padded_rows(keys, model, tmp_path):
    assert_padding_free_is_padded(*padded_and_padding_free(tmp_path, model, keys))


@pytest.mark.parametrize("family", ["gemma3", "qwen3_moe", "mixtral"])
def test_padding_free_families_equal_padded(family, tmp_path):
    """Gemma 3's sliding layers (window 16 < the rows: the window within each packed row) and its local RoPE, and
    the mixture-of-experts families, padding-free against padded."""
    m = tmp_path / "model"
    shutil.copytree(os.path.join(ROOT, "tests", "fixtures", "train", "lf_families", family, "model"), m)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(ROOT, "configs", "models", "tiny", f), m)
    assert_padding_free_is_padded(*padded_and_padding_free(tmp_path, m, dict(cutoff_len=256)))


def test_padding_free_kto_zero3_equals_padded(model, tmp_path):
    """KTO's target and KL rows padding-free on 2 ranks under ZeRO-3 (each rank's own packed rows)."""
    keys = dict(stage="kto", dataset="kto_en_demo", cutoff_len=512, finetuning_type="full", learning_rate=1e-3,
                zero_stage=3)
    assert_padding_free_is_padded(*padded_and_padding_free(tmp_path, model, keys, ranks=2))


def test_padding_free_and_pad_masked_logits_together_are_an_error(model, tmp_path):
    rc, log = train(tmp_path / "out", model, {}, expect_ok=False,
                    env_extra={"LF_PREF_PADDING_FREE": "1", "LF_PAD_MASKED_LOGITS": "1"})
    assert rc != 0 and "LF_PREF_PADDING_FREE=1 with LF_PAD_MASKED_LOGITS=1" in log, log[-3000:]
    assert not (tmp_path / "out" / "trainer_state.json").exists()


def test_reference_pass_is_traced_as_step_0(model, tmp_path):
    """LF_PROFILE_TRACE_STEPS=0:1: the Kineto trace holds the pass before step 1 (dpo's reference
    log-probabilities, an lf::reference span per micro-batch) and step 1 (its lf::optimizer)."""
    run = "dpo_hinge_lora"  # pref.yaml's batch: 2 pairs a micro-batch, 2 micro-batches a step
    trace_dir = tmp_path / "trace"
    _, log = train(tmp_path / "out", model, dict(RUNS[run]["keys"], max_steps=2),
                   env_extra={"LF_PROFILE_TRACE": str(trace_dir), "LF_PROFILE_TRACE_STEPS": "0:1"})
    assert "profile trace of steps 0-1" in log, log[-3000:]
    names = [e.get("name") for e in json.load(open(trace_dir / "trace-rank0.json"))["traceEvents"]]
    assert names.count("lf::reference") >= 1 and "lf::optimizer" in names, sorted(set(n for n in names if n and n.startswith("lf::")))
    # Only the pairs of the steps the run takes: 2 steps x 2 micro-batches x 2 pairs (pref.yaml), in as many
    # spans, of the dataset's more.
    assert names.count("lf::reference") == 4, names.count("lf::reference")
    m = re.search(r"reference log-probabilities of (\d+) pairs on this rank \((\d+) in the dataset", log)
    assert m and int(m.group(1)) == 8 and int(m.group(2)) > 8, log[-3000:]


def ref_keys(keys):
    return {k: v.replace("{fixture}", REF_FIX) if isinstance(v, str) else v for k, v in keys.items()}


@pytest.mark.parametrize("run", sorted(REF_RUNS))
def test_reference_model_bco_and_ld_alpha_are_llamafactorys(run, model, tmp_path):
    """A reference model of its own (LoRA and full policies, its adapter merged; kto too), BCO's term with its
    running baseline over the steps, LD-DPO's weighting (sigmoid and simpo): LLaMA-Factory's numbers per step."""
    out = tmp_path / run
    _, log = train(out, model, ref_keys(REF_RUNS[run]["keys"]))
    assert_same_steps(steps_of(out), REF_RUNS[run]["steps"])
    if "ref_model" in REF_RUNS[run]["keys"]:
        assert "reference model: " in log and "ref_model " in log, log[-3000:]


def test_bco_and_ref_model_two_ranks_and_zero3_equal_one_process(model, tmp_path):
    """BCO's baseline is an all-reduce per micro-step (the mean of the ranks' means) and a ref_model is loaded
    whole on each rank beside the ZeRO-3-sharded policy: both equal one process replaying the same micro-batches."""
    keys = dict(ref_keys({"ref_model": "{fixture}/ref_model"}), pref_bco_weight=0.5, finetuning_type="full",
                learning_rate=1e-3, max_steps=4)
    one = tmp_path / "one"
    train(one, model, dict(keys, per_device_train_batch_size=4, gradient_accumulation_steps=1))
    want = steps_of(one)
    for sharding in ({}, {"zero_stage": 3}):
        out = tmp_path / f"two-{len(sharding)}"
        train(out, model, dict(keys, per_device_train_batch_size=2, gradient_accumulation_steps=1, **sharding), ranks=2)
        assert_same_as_one_process(steps_of(out), want, sharding)


@pytest.mark.parametrize("keys,words", [
    ({"pref_loss": "orpo", "ref_model": "{fixture}/ref_model"}, ["ref_model", "orpo", "no reference"]),
    ({"ref_model_adapters": "{fixture}/ref_adapter"}, ["ref_model_adapters", "ref_model is not set"]),
    ({"pref_loss": "simpo", "pref_bco_weight": 0.5}, ["pref_bco_weight", "simpo"]),
    ({"stage": "kto", "dataset": "kto_en_demo", "ld_alpha": 0.5}, ["ld_alpha", "kto"]),
    ({"ref_model": "{fixture}/ref_model", "ref_model_quantization_bit": 8}, ["ref_model_quantization_bit: 8",
                                                                          "LLM.int8()"]),
])
def test_reference_keys_where_they_do_not_apply_are_errors(keys, words, model, tmp_path):
    rc, log = train(tmp_path / "out", model, ref_keys(keys), expect_ok=False)
    assert rc == 2, log[-3000:]
    for w in words:
        assert w in log, f"{w!r} not in:\n{log[-3000:]}"


def test_two_ranks_and_zero3_equal_one_process(model, tmp_path):
    """DPO (LoRA and full: its reference the ZeRO-3-sharded policy's own first forwards), KTO and rm (LoRA and full:
    the value head in the head's ZeRO unit, gathered in fp32): 2 ranks of 2 pairs each, DDP and ZeRO-3, against one
    process with micro-batches of 4: the same loss, gradient norm and metrics per step, and rm's value head saved
    with the same values."""
    for name, keys in {"dpo": {}, "dpo_full": {"finetuning_type": "full", "learning_rate": 1e-3},
                       "kto": {"stage": "kto", "dataset": "kto_en_demo"},
                       "rm": {"stage": "rm", "learning_rate": 1e-3},
                       "rm_full": {"stage": "rm", "finetuning_type": "full", "learning_rate": 1e-3}}.items():
        one = tmp_path / f"{name}-one"
        train(one, model, dict(keys, per_device_train_batch_size=4, gradient_accumulation_steps=1))
        want = steps_of(one)
        for sharding in [{}, {"zero_stage": 3}]:
            out = tmp_path / f"{name}-two-{len(sharding)}"
            train(out, model, dict(keys, per_device_train_batch_size=2, gradient_accumulation_steps=1, **sharding),
                  ranks=2)
            # logits/* average over the padded rows: one process pads 8 rows together, two ranks 4 each.
            assert_same_as_one_process(steps_of(out), want, (name, sharding))
            if name.startswith("rm"):
                assert_same_value_head(out, one, (name, sharding))


@pytest.mark.parametrize("run", ["dpo_sigmoid_lora", "dpo_sigmoid_full", "kto_lora"])
def test_two_ranks_accumulating_under_zero1_zero2_and_offload_are_llamafactorys(run, model, tmp_path):
    """LLaMA-Factory's run (one process, 2 pairs a micro-step, 2 micro-steps a step) against 2 ranks of 1 pair a
    micro-step and 2 micro-steps a step, under ZeRO-1 and ZeRO-2 with the optimizer offloaded: each micro-step sees
    the same pairs, whole (a pair never split across ranks or micro-steps), and the steps log LLaMA-Factory's loss,
    gradient norm and metrics (logits/* aside: each rank pads its own rows)."""
    keys = dict(RUNS[run]["keys"], per_device_train_batch_size=1, gradient_accumulation_steps=2)
    assert RUNS[run]["keys"].get("per_device_train_batch_size", 2) == 2, "the fixture's micro-steps hold 2 pairs"
    for sharding in ({"zero_stage": 1}, {"zero_stage": 2, "offload": "optimizer"}):
        out = tmp_path / "-".join(f"{k}{v}" for k, v in sharding.items())
        train(out, model, dict(keys, **sharding), ranks=2)
        assert_same_as_one_process(steps_of(out), RUNS[run]["steps"], (run, sharding))


@pytest.mark.parametrize("finetuning", ["lora", "full"])
def test_rm_in_bf16_under_zero_equals_ddp(finetuning, model, tmp_path):
    """rm in bf16 under ZeRO-1, ZeRO-2 with the optimizer offloaded and ZeRO-3, 2 ranks of 1 pair a micro-step and 2
    micro-steps a step, against DDP's run of the same micro-batches: the same losses, gradient norms and value head.
    In bf16 the value head's unit is gathered in fp32 (its scores from fp32 weights, as DDP's and TRL's): gathered in
    bf16 like the rest, the first step's loss moved by 3.5e-4."""
    keys = dict(stage="rm", finetuning_type=finetuning, bf16=True, learning_rate=1e-3, per_device_train_batch_size=1,
                gradient_accumulation_steps=2)
    ddp = tmp_path / "ddp"
    train(ddp, model, keys, ranks=2)
    want = steps_of(ddp)
    for sharding in ({"zero_stage": 1}, {"zero_stage": 2, "offload": "optimizer"}, {"zero_stage": 3}):
        out = tmp_path / "-".join(f"{k}{v}" for k, v in sharding.items())
        train(out, model, dict(keys, **sharding), ranks=2)
        got = steps_of(out)
        assert len(got) == len(want) == 3, (sharding, got)
        for g, w in zip(got, want):
            for key in ("loss", "grad_norm"):
                assert abs(g[key] - w[key]) <= 1e-5 * abs(w[key]), (sharding, g["step"], key, g[key], w[key])
        assert_same_value_head(out, ddp, sharding)


def assert_same_value_head(got, want, what):
    """value_head.safetensors (v_head.summary.weight / bias, LLaMA-Factory's names): the weight within 1e-5 of
    `want`'s (it moves ~1e-3 a step here). The bias is not compared closer than the steps' reach: a pairwise loss
    of score differences gives it a zero gradient in exact arithmetic, so Adam moves it by up to the learning rate
    a step on rounding noise alone (as it does in TRL's), differently on each layout of the same sums."""
    g, w = load_file(str(got / "value_head.safetensors")), load_file(str(want / "value_head.safetensors"))
    assert sorted(g) == sorted(w) == ["v_head.summary.bias", "v_head.summary.weight"], (what, sorted(g))
    k = "v_head.summary.weight"
    assert np.allclose(g[k], w[k], rtol=1e-5, atol=1e-6), (what, k, np.abs(g[k] - w[k]).max())
    steps = len(steps_of(want))
    assert np.abs(g["v_head.summary.bias"] - w["v_head.summary.bias"]).max() <= steps * 1e-3, what


def test_preview_shows_chosen_and_rejected(model):
    p = subprocess.run([LF_TRAIN, "preview", os.path.join(FIX, "pref.yaml"), f"model_name_or_path={model}", "--n", "2"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.count("--- chosen:") == 2 and p.stdout.count("--- rejected:") == 2, p.stdout[-2000:]


def bad_data(tmp_path):
    d = tmp_path / "data"
    shutil.copytree(os.path.join(ROOT, "data"), d)
    info = json.loads((d / "dataset_info.json").read_text())
    rows = json.loads((d / "dpo_alpaca_demo.json").read_text())
    (d / "no_rejected.json").write_text(json.dumps([{k: v for k, v in r.items() if k != "rejected"} for r in rows]))
    info["no_rejected"] = {"file_name": "no_rejected.json", "ranking": True,
                           "columns": {"prompt": "instruction", "chosen": "chosen", "rejected": "rejected"}}
    info["kto_untagged"] = {"file_name": "kto_en_demo.json", "formatting": "sharegpt", "columns": {"messages": "messages"},
                            "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user",
                                     "assistant_tag": "assistant"}}
    (d / "dataset_info.json").write_text(json.dumps(info))
    return d


@pytest.mark.parametrize("keys,words", [
    ({"dataset": "no_rejected"}, ["no_rejected", "'rejected'", "no_rejected.json:"]),
    ({"stage": "kto", "dataset": "kto_untagged"}, ["kto_untagged", "kto_tag"]),
    ({"dataset": "alpaca_en_demo"}, ["alpaca_en_demo", "ranking"]),
    ({"pref_loss": "kto_pair"}, ["pref_loss", "kto_pair"]),
    ({"pref_loss": "unknown_loss"}, ["pref_loss", "unknown_loss", "sigmoid"]),
])
def test_bad_input_is_a_clear_error(keys, words, model, tmp_path):
    rc, log = train(tmp_path / "out", model, dict(keys, dataset_dir=str(bad_data(tmp_path))), expect_ok=False)
    assert rc == 2, log[-3000:]
    for w in words:
        assert w in log, f"{w!r} not in:\n{log[-3000:]}"
    assert "Traceback" not in log


@pytest.mark.parametrize("name", ["qwen3_lora_dpo", "qwen3_lora_kto", "qwen3_lora_reward"])
def test_llamafactory_example_runs(name, tmp_path):
    """Every text-only *_dpo / *_kto / *_reward example of LLaMA-Factory 0.9.5 (tests/fixtures/train/lf_examples/:
    the model a tiny local Qwen3, 2 steps, the rest as LLaMA-Factory ships it) trains and writes its outputs."""
    out = tmp_path / name
    rc, log = train(out, "tests/fixtures/train/e2e/models/qwen3_tiny", {},
                    yaml=os.path.join(ROOT, "tests", "fixtures", "train", "lf_examples", f"{name}.yaml"))
    lines = [json.loads(l) for l in open(out / "trainer_log.jsonl")]
    assert lines and lines[-1]["current_steps"] == 2, lines  # logging_steps 10: only the run's summary line
    assert json.load(open(out / "all_results.json"))["train_loss"] > 0
    assert (out / "adapter_model.safetensors").exists()
    if name.endswith("reward"):
        assert (out / "value_head.safetensors").exists()


def test_reward_metrics_reach_tensorboard_and_the_metrics_endpoint(model, tmp_path):
    """TRL's reward metrics where sft's metrics go: TensorBoard's scalars (train/rewards/accuracies, ...) equal to the
    log history's, and the agent's Prometheus endpoint (lf_train_rewards_accuracy, lf_train_rewards_margin, ...,
    lf_train_logps_chosen, lf_train_logits_rejected, ...)."""
    import time
    import urllib.request

    import numpy as np
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out, port = tmp_path / "tb", free_port()
    args = [LF_TRAIN, os.path.join(FIX, "pref.yaml"), f"model_name_or_path={model}", f"output_dir={out}",
            "report_to=tensorboard", "max_steps=6"]
    env = dict(os.environ, NNODES="1", NPROC_PER_NODE="1", MASTER_PORT=str(free_port()), OMP_NUM_THREADS="1",
               LF_METRICS_ADDR="127.0.0.1", LF_METRICS_PORT=str(port), LF_METRICS_LINGER_S="4")
    p = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    scraped, deadline = "", time.time() + 120
    while p.poll() is None and time.time() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                body = r.read().decode()
            if "lf_train_rewards_accuracy{" in body:
                scraped = body
        except OSError:
            pass
        time.sleep(0.1)
    log = p.communicate(timeout=60)[0]
    assert p.returncode == 0, log[-3000:]
    for name in ("lf_train_rewards_accuracy{", "lf_train_rewards_margin{", "lf_train_rewards_chosen{"):
        assert name in scraped, scraped[-3000:]
    # logps/* and logits/* too, each a value some step logged (the scrape saw one of the steps).
    for series, key in (("lf_train_logps_chosen", "logps/chosen"), ("lf_train_logps_rejected", "logps/rejected"),
                        ("lf_train_logits_chosen", "logits/chosen"), ("lf_train_logits_rejected", "logits/rejected")):
        seen = re.search(series + r"\{[^}]*\} (\S+)", scraped)
        assert seen, (series, scraped[-3000:])
        assert any(abs(float(seen.group(1)) - e[key]) <= 1e-9 * abs(e[key]) for e in steps_of(out)), (series, seen[1])
    runs = list((out / "runs").iterdir())
    acc = EventAccumulator(str(runs[0]), size_guidance={"scalars": 0})
    acc.Reload()
    got = {tag: {e.step: e.value for e in acc.Scalars(tag)} for tag in acc.Tags()["scalars"]}
    for entry in steps_of(out):
        for key in ("rewards/accuracies", "rewards/margins", "logps/chosen", "logits/rejected"):
            assert got["train/" + key][entry["step"]] == np.float32(entry[key]), (key, entry["step"])


@pytest.mark.parametrize("stage,ranks,sharding", [("dpo", 1, {}), ("rm", 1, {}), ("rm", 2, {"zero_stage": 3})])
def test_resume_continues_the_uninterrupted_run(stage, ranks, sharding, model, tmp_path):
    """A checkpoint of a dpo run (its reference computed again from the starting weights before the checkpoint
    loads) and of an rm run (its value head in value_head.safetensors; under ZeRO-3 too, the head loaded into its
    fp32 unit's shards) resumes into the uninterrupted run's steps."""
    keys = {"stage": stage, "finetuning_type": "full", "learning_rate": 1e-3, "max_steps": 4,
            "lr_scheduler_type": "constant", **sharding}
    train(tmp_path / "whole", model, keys, ranks=ranks)
    train(tmp_path / "part", model, dict(keys, save_strategy="steps", save_steps=2), ranks=ranks)
    ckpt = tmp_path / "part" / "checkpoint-2"
    assert (ckpt / "value_head.safetensors").exists() == (stage == "rm")
    train(tmp_path / "resumed", model, dict(keys, resume_from_checkpoint=str(ckpt)), ranks=ranks)
    whole, resumed = steps_of(tmp_path / "whole"), steps_of(tmp_path / "resumed")
    assert [s["step"] for s in resumed] == [1, 2, 3, 4]
    for w, r in zip(whole[2:], resumed[2:]):
        for key, v in w.items():
            if isinstance(v, float):
                assert r[key] == pytest.approx(v, rel=1e-6, abs=1e-9), (key, r[key], v)
