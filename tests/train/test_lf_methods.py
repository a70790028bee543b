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


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_variant_is_llamafactorys_run(variant, tmp_path):
    overrides = [f"{k}={yaml_value(v)}" for k, v in VARIANTS[variant].items()]
    got = run_fixture_yaml(tmp_path, "lf_methods", "methods.yaml", *overrides)
    assert_steps_are(got, EXPECTED[variant], 1e-5)
    if variant != "plain":  # the key changes the run by far more than the tolerance
        assert any(abs(a["loss"] - b["loss"]) > 1e-3 * abs(b["loss"]) for a, b in zip(EXPECTED[variant], EXPECTED["plain"]))
