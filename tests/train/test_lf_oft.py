"""finetuning_type: oft against LLaMA-Factory 0.9.5's own sft runs (tests/fixtures/train/lf_oft/, made by
scripts/fixtures/lf_oft_reference.py: peft 0.18.1's OFT, block-diagonal Cayley-Neumann rotations of each targeted
linear's input): for each variant of oft.yaml (oft_block_size, oft_rank, a block size peft moves to a divisor, an OFT
adapter merged into the base or trained further), lf-train on the same YAML, weights and tokenizer logs the same loss
(1e-5 relative), grad_norm, learning rate and epoch at every step (fp32 CPU) and saves the same adapter under peft's
names; 2 ranks (data parallel and ZeRO-3) are the same run; peft loads lf-train's adapter with the logits of
LLaMA-Factory's."""
import os, sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from test_lf_outputs import assert_steps_are, load, logged_steps, run_fixture  # noqa: E402
from train_runs import ROOT  # noqa: E402

FIX = os.path.join(ROOT, "tests", "fixtures", "train", "lf_oft")
EXPECTED = load(os.path.join(FIX, "expected.json"))
VARIANTS = load(os.path.join(FIX, "variants.json"))
CONFIG_KEYS = ("peft_type", "r", "oft_block_size", "target_modules", "module_dropout", "use_cayley_neumann",
               "num_cayley_neumann_terms", "coft", "block_share", "init_weights", "modules_to_save", "task_type")


def yaml_value(v):
    v = ("true" if v else "false") if isinstance(v, bool) else str(v)
    return v.replace("{fixture}", FIX)


def run(tmp_path, name, keys, ranks=1, *extra):
    """lf-train on oft.yaml with the fixture's weights, `keys` and `extra` overrides, on `ranks` processes: the
    per-step log entries and the output folder."""
    _, _, out = run_fixture(tmp_path, "lf_oft", "oft.yaml", name, *[f"{k}={yaml_value(v)}" for k, v in keys.items()],
                            *extra, ranks=ranks)
    return logged_steps(out), out


def assert_adapter_is(out, want_dir):
    """adapter_model.safetensors: peft's tensor names, each within 1e-4 of its largest value (AdamW scales each
    element's step by its own gradient's size, so an element whose gradient is near zero carries its rounding into
    a step of up to the learning rate: seen 1.4e-5 on a LoRA B trained from zero); adapter_config.json: the fields
    peft reads equal."""
    import numpy as np
    from safetensors.numpy import load_file
    want, got = load_file(os.path.join(want_dir, "adapter_model.safetensors")), load_file(
        os.path.join(out, "adapter_model.safetensors"))
    assert sorted(got) == sorted(want)
    for k in want:
        assert got[k].shape == want[k].shape, k
        assert np.abs(got[k] - want[k]).max() <= 1e-4 * max(np.abs(want[k]).max(), 1e-30), k
    want, got = load(os.path.join(want_dir, "adapter_config.json")), load(os.path.join(out, "adapter_config.json"))
    for k in CONFIG_KEYS:
        g, w = got.get(k), want.get(k)
        if isinstance(w, list):  # target_modules: a set in peft
            g, w = sorted(g), sorted(w)
        assert g == w, (k, got.get(k), want.get(k))


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_variant_is_llamafactorys_run(variant, tmp_path):
    got, out = run(tmp_path, variant, VARIANTS[variant])
    assert_steps_are(got, EXPECTED[variant], 1e-5)
    if os.path.isdir(os.path.join(FIX, variant)):
        assert_adapter_is(str(out), os.path.join(FIX, variant))
    if variant != "full":  # OFT trains other weights than full fine-tuning, by far more than the tolerance
        assert any(abs(a["loss"] - b["loss"]) > 1e-3 * abs(b["loss"]) for a, b in zip(EXPECTED[variant], EXPECTED["full"]))


@pytest.mark.parametrize("sharding", [(), ("deepspeed=tests/fixtures/config/ds_z3_config.json",)],
                         ids=["ddp", "zero3"])
def test_two_ranks_are_one_process(sharding, tmp_path):
    """2 ranks x 2 rows x no accumulation is the fixture's global batch of 4: LLaMA-Factory's one-process run."""
    got, out = run(tmp_path, "two", VARIANTS["oft"], 2, "gradient_accumulation_steps=1", *sharding)
    assert_steps_are(got, EXPECTED["oft"], 1e-5)
    assert_adapter_is(str(out), os.path.join(FIX, "oft"))


def test_peft_loads_the_adapter_with_llamafactorys_logits(tmp_path):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    peft = pytest.importorskip("peft")
    _, out = run(tmp_path, "oft", VARIANTS["oft"])
    ids = torch.tensor([[1, 5, 9, 17, 33, 65, 90, 3]])

    def logits(adapter):
        base = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "model", dtype=torch.float32)
        model = base if adapter is None else peft.PeftModel.from_pretrained(base, adapter)
        with torch.no_grad():
            return model.eval()(ids).logits.double()

    ours, theirs, plain = logits(out), logits(os.path.join(FIX, "oft")), logits(None)
    assert float((ours - theirs).abs().max()) <= 1e-4
    assert float((ours - plain).abs().max()) > 1e-3, "the adapter changes nothing: peft did not apply it"
