"""Issue 30's families in training end to end, through the real lf-train on fp32 CPU:

- Gemma 3's full and LoRA runs (sliding layers with a window shorter than the rows), and each
  mixture-of-experts family's full and LoRA runs, with moe_aux_loss_coef unset and set (the load-balancing loss in
  every micro-batch's loss; with non-reentrant activation checkpointing its gradient through recomputed
  routers; with LLaMA-Factory's default reentrant checkpointing only logged, as transformers does), equal
  LLaMA-Factory 0.9.5's own runs on the same YAML and weights (tests/fixtures/train/lf_families/, made by
  scripts/fixtures/lf_families_reference.py): loss, grad_norm, learning rate and epoch at every step;
- ZeRO-3 on 2 ranks (and ZeRO-2, DDP) equals one process replaying the same micro-batches, the aux loss
  being each micro-batch's own statistic: per-step and eval losses and final weights within 1e-5;
- the full output is the Hub's per-expert layout and loads in transformers with lf-train's logits."""
import json, os, shutil, subprocess, sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from test_lf_outputs import assert_steps_are, load, run_fixture_yaml  # noqa: E402
from test_zero_equivalence import same, zero  # noqa: E402
from train_runs import ROOT, train  # noqa: E402

FIX = os.path.join(ROOT, "tests", "fixtures", "train", "lf_families")
EXPECTED = load(os.path.join(FIX, "expected.json"))


def overrides(run):
    return [f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in EXPECTED["runs"][run].items()]


@pytest.mark.parametrize("family,run", [(f, r) for f in ("qwen3_moe", "qwen2_moe", "mixtral", "gemma3")
                                        for r in ("full", "full_aux", "full_aux_ckpt", "lora", "lora_aux")
                                        if f != "gemma3" or r in ("full", "lora")])
def test_run_is_llamafactorys(tmp_path, family, run):
    fixture = os.path.join("lf_families", family)
    got = run_fixture_yaml(tmp_path, fixture, os.path.join("..", "sft.yaml"), *overrides(run))
    assert_steps_are(got, EXPECTED[family][run], 1e-5)


def test_aux_loss_changes_the_loss_and_is_logged(tmp_path):
    """moe_aux_loss_coef acts: LLaMA-Factory's runs with and without it differ by far more than the tolerance,
    and lf-train's trainer_log.jsonl carries the aux loss beside the loss."""
    plain, aux = EXPECTED["qwen3_moe"]["full"], EXPECTED["qwen3_moe"]["full_aux"]
    assert min(abs(a["loss"] - p["loss"]) for a, p in zip(aux, plain)) > 1e-3
    run_fixture_yaml(tmp_path, os.path.join("lf_families", "qwen3_moe"), os.path.join("..", "sft.yaml"), *overrides("full_aux"))
    out = [d for d in os.listdir(tmp_path) if d.startswith("out")][0]
    log = [json.loads(l) for l in open(tmp_path / out / "trainer_log.jsonl")]
    steps = [l for l in log if "loss" in l]
    assert steps and all(l["aux_loss"] > 0 for l in steps), steps[:2]


def moe_model(tmp_path):
    model = tmp_path / "model"
    if not model.exists():
        shutil.copytree(os.path.join(FIX, "qwen3_moe", "model"), model)
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(ROOT, "configs", "models", "tiny", f), model)
    return model


@pytest.mark.parametrize("mode", ["full", "lora"])
def test_sharded_moe_equals_one_process(tmp_path, mode):
    """The aux loss is each micro-batch's own statistic (transformers), so the reference replays the same
    micro-batches: one process x 2 rows x 4 micro-steps, against 2 ranks x 2 rows x 2 micro-steps at ZeRO-3,
    at ZeRO-2 and under DDP (rank r's micro-step k holds the global batch's rows 4k + 2r, 4k + 2r + 1);
    activation checkpointing on, the load-balancing loss training the routers (use_reentrant_gc false)."""
    extra = [f"model_name_or_path={moe_model(tmp_path)}", "moe_aux_loss_coef=0.1", "max_steps=6", "eval_steps=3",
             "cutoff_len=64", "disable_gradient_checkpointing=false", "use_reentrant_gc=false"]
    ref = train(tmp_path / "one", mode, (1, 1, 2), *extra, "gradient_accumulation_steps=4")
    for stage in (3, 2):
        got = train(tmp_path / f"z{stage}", mode, (1, 2, 2), *extra, *zero(stage),
                    distributed_line=f"ZeRO-{stage}: rank 0 of 2")
        same(got, ref, f"MoE {mode}, stage {stage}, 2 ranks")
    got = train(tmp_path / "ddp", mode, (1, 2, 2), *extra)
    same(got, ref, f"MoE {mode}, DDP, 2 ranks")


def test_full_output_loads_in_transformers(tmp_path):
    """The saved model holds the Hub's per-expert tensors and transformers computes lf-train's logits from it."""
    run_fixture_yaml(tmp_path, os.path.join("lf_families", "qwen2_moe"), os.path.join("..", "sft.yaml"), "max_steps=1")
    out = tmp_path / [d for d in os.listdir(tmp_path) if d.startswith("out")][0]
    from safetensors import safe_open
    with safe_open(out / "model.safetensors", "np") as f:
        names = set(f.keys())
    assert "model.layers.1.mlp.experts.3.down_proj.weight" in names and "model.layers.1.mlp.gate.weight" in names
    assert not any("gate_up_proj" in n for n in names)
    py = os.environ.get("LF_PYTHON", sys.executable)
    code = ("import torch; from transformers import AutoModelForCausalLM; "
            f"m, info = AutoModelForCausalLM.from_pretrained({str(out)!r}, dtype=torch.float32, output_loading_info=True); "
            "assert not any(info.values()), info; "
            "print(type(m).__name__, float(m(input_ids=torch.arange(1, 17).view(1, 16)).logits.abs().sum()))")
    p = subprocess.run([py, "-c", code], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.startswith("Qwen2MoeForCausalLM"), p.stdout
