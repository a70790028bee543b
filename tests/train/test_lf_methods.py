"""Issue 34's methods and losses against LLaMA-Factory 0.9.5's own sft runs (tests/fixtures/train/lf_methods/,
made by scripts/fixtures/lf_methods_reference.py): for each variant of methods.yaml (DFT, EAFT, LLaMA Pro, ...), lf-train on
the same YAML, weights and tokenizer logs the same loss (1e-5 relative), grad_norm, learning rate and epoch at every
step (fp32 CPU), as HF's log_history records them. The plain run (no key) differs from each variant by far more than
that: a dropped key would fail here."""
import json, os, sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from test_lf_outputs import assert_steps_are, load, run_fixture_yaml  # noqa: E402
from train_runs import ROOT  # noqa: E402

FIX = os.path.join(ROOT, "tests", "fixtures", "train", "lf_methods")
EXPECTED = load(os.path.join(FIX, "expected.json"))
VARIANTS = load(os.path.join(FIX, "variants.json"))


def yaml_value(v):
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def assert_files_are(out, kept):
    """The files LLaMA-Factory's run left that the fixture kept (pissa_converted/): tensors within 1e-5 of the
    tensor's largest value, adapter_config.json's fields equal."""
    import numpy as np
    from safetensors.numpy import load_file
    for dirpath, _, files in os.walk(kept):
        for f in files:
            rel = os.path.relpath(os.path.join(dirpath, f), kept)
            if f.endswith(".safetensors"):
                want, got = load_file(os.path.join(kept, rel)), load_file(os.path.join(out, rel))
                assert sorted(got) == sorted(want), rel
                for k in want:
                    assert got[k].shape == want[k].shape, (rel, k)
                    assert np.abs(got[k] - want[k]).max() <= 1e-5 * max(np.abs(want[k]).max(), 1e-30), (rel, k)
            else:
                want, got = load(os.path.join(kept, rel)), load(os.path.join(out, rel))
                for k in ("r", "lora_alpha", "init_lora_weights", "target_modules", "use_rslora"):
                    got_v, want_v = got.get(k), want.get(k)
                    if isinstance(want_v, list):
                        got_v, want_v = sorted(got_v), sorted(want_v)
                    assert got_v == want_v, (rel, k, got.get(k), want.get(k))


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_variant_is_llamafactorys_run(variant, tmp_path):
    overrides = [f"{k}={yaml_value(v)}" for k, v in VARIANTS[variant].items()]
    got = run_fixture_yaml(tmp_path, "lf_methods", "methods.yaml", *overrides)
    assert_steps_are(got, EXPECTED[variant], 1e-5)
    if os.path.isdir(os.path.join(FIX, variant)):
        out = tmp_path / ("out" + "".join("_" + o.replace("=", "-") for o in overrides))
        assert_files_are(str(out), os.path.join(FIX, variant))
    if variant != "plain":  # the key changes the run by far more than the tolerance
        assert any(abs(a["loss"] - b["loss"]) > 1e-3 * abs(b["loss"]) for a, b in zip(EXPECTED[variant], EXPECTED["plain"]))
