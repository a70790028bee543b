"""Issue 34's pure_bf16 against LLaMA-Factory 0.9.5's own sft runs (tests/fixtures/train/lf_pure_bf16/, made by
scripts/fixtures/lf_pure_bf16_reference.py, on a bf16 checkpoint): the model loaded and trained in bf16 (no fp32 master weights; HF's
fused AdamW on the bf16 parameters). For each variant (full, freeze), lf-train on the same YAML, weights and
tokenizer logs the same loss (within 1e-5 relative), grad_norm (torch's bf16 norm), learning rate and epoch at every
step, as HF's log_history records them; the fp32 run differs by more. Also: 2 ranks (DDP) log one process's steps, ZeRO-3 is
refused with LLaMA-Factory's reason, and the saved weights are bf16."""
import os, sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from test_lf_outputs import assert_steps_are, load, logged_steps, run_fixture, run_fixture_yaml  # noqa: E402
from train_runs import ROOT  # noqa: E402

FIX = os.path.join(ROOT, "tests", "fixtures", "train", "lf_pure_bf16")
EXPECTED = load(os.path.join(FIX, "expected.json"))
VARIANTS = load(os.path.join(FIX, "variants.json"))


def yaml_value(v):
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_variant_is_llamafactorys_run(variant, tmp_path):
    got = run_fixture_yaml(tmp_path, "lf_pure_bf16", "pure_bf16.yaml",
                           *[f"{k}={yaml_value(v)}" for k, v in VARIANTS[variant].items()])
    # pure_bf16's bf16 gradients and updated weights are LLaMA-Factory's bit for bit (lf-train rounds where HF
    # rounds: the unchunked LM head, HF's padding mask with repeated kv heads; trainer_state.h hf_bf16_rounding),
    # so the same 1e-5 as the fp32 run holds at every step (seen: 4e-8, the loss sums' order) and the bf16
    # gradient norms are equal.
    assert_steps_are(got, EXPECTED[variant], 1e-5)
    if variant != "plain":  # bf16 arithmetic: losses apart from the fp32 run's by more than the tolerance, and
        # the gradient norm is torch's bf16 one (8 significant bits)
        assert any(abs(a["loss"] - b["loss"]) > 5e-5 * abs(b["loss"]) for a, b in zip(EXPECTED[variant], EXPECTED["plain"]))
        assert all(float(np.float32(g["grad_norm"]).view(np.uint32) & 0xFFFF) == 0 for g in got), got


def train(tmp_path, name, ranks, *overrides, expect_ok=True):
    return run_fixture(tmp_path, "lf_pure_bf16", "pure_bf16.yaml", name, "pure_bf16=true", *overrides, ranks=ranks,
                       expect_ok=expect_ok)


steps = logged_steps


def test_two_ranks_are_one_process(tmp_path):
    """One example per micro-batch: 2 ranks x 1 hold what one process holds in 2 micro-batches; each rank's bf16
    gradient and their sum are one process's gradient and its bf16 accumulation."""
    _, _, one = train(tmp_path, "one", 1, "per_device_train_batch_size=1", "gradient_accumulation_steps=2")
    _, _, two = train(tmp_path, "two", 2, "per_device_train_batch_size=1", "gradient_accumulation_steps=1")
    want, got = steps(one), steps(two)
    assert len(got) == len(want) == 4
    for g, w in zip(got, want):
        assert abs(g["loss"] - w["loss"]) <= 1e-5 * w["loss"], (g, w)
        # the same bf16 gradients (a + b rounds alike in either order: 2 ranks, 2 micro-batches), the same norm
        assert abs(g["grad_norm"] - w["grad_norm"]) <= 1e-5 * w["grad_norm"], (g, w)


def test_saved_weights_are_bf16(tmp_path):
    from safetensors import safe_open
    _, _, out = train(tmp_path, "saved", 1, "max_steps=1")
    with safe_open(str(out / "model.safetensors"), "np") as f:
        dtypes = {f.get_slice(k).get_dtype() for k in f.keys()}
    assert dtypes == {"BF16"}, dtypes


@pytest.mark.parametrize("keys,words", [
    (["zero_stage=3"], ["incompatible with DeepSpeed ZeRO-3"]),
    (["deepspeed=" + os.path.join(ROOT, "tests", "fixtures", "config", "ds_z2_config.json")], ["master shards"]),
    (["fp16=true"], ["pure_bf16", "fp16"]),
])
def test_what_is_not_run_is_refused(tmp_path, keys, words):
    rc, log, _ = train(tmp_path, "refused", 1, *keys, expect_ok=False)
    assert rc == 2, log[-3000:]
    assert all(w in log for w in words), log[-3000:]
