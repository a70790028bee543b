"""ZeRO-1/2/3 through the real launcher on CPU (issue 13): each stage equals one process with the
same global batch (per-step losses, eval losses and final weights within 1e-5) for full
fine-tuning and LoRA, 2 ranks and 2 nodes x 2 ranks on loopback, gradient accumulation 2 over
rows of different lengths, clipping on, activation checkpointing on and off; a checkpoint saved
by 4 ranks at stage 3 resumes at 2 ranks at stage 2 and in one process as if uninterrupted; the
outputs load in transformers / peft with the logits of the data-parallel run's."""
import json, os, shutil, sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from train_runs import ROOT, train  # noqa: E402

TOL = 1e-5


def zero(stage):
    return (f"zero_stage={stage}",)


def same(a, b, what):
    (la, wa), (lb, wb) = a, b
    assert len(la) == len(lb), (what, len(la), len(lb))
    worst = max(abs(x - y) for x, y in zip(la, lb))
    assert worst <= TOL, f"{what}: per-step loss differs by {worst:.2e}"
    assert wa.keys() == wb.keys(), what
    for k in wb:
        diff = float(np.max(np.abs(wa[k].astype(np.float64) - wb[k].astype(np.float64))))
        assert diff <= TOL, f"{what}: {k} differs by {diff:.2e}"


@pytest.fixture(scope="module")
def base_model(tmp_path_factory):
    """A pretrained base for LoRA (weights + tokenizer): one full step of the tiny model, saved."""
    out = tmp_path_factory.mktemp("base") / "model"
    train(out, "full", (1, 1, 4), "max_steps=1", "save_strategy=no")
    return out


@pytest.mark.parametrize("mode", ["full", "lora"])
@pytest.mark.parametrize("checkpointing", [False, True])
def test_every_stage_equals_one_process(tmp_path, mode, checkpointing, base_model):
    extra = [f"disable_gradient_checkpointing={'false' if checkpointing else 'true'}"]
    if mode == "lora":
        extra += [f"model_name_or_path={base_model}", "init_weights=pretrained"]
    ref = train(tmp_path / "one", mode, (1, 1, 4), *extra)
    assert ref[0][-1] < ref[0][0] or mode == "lora", "the loss must fall, or the comparison proves little"
    for stage in (1, 2, 3):
        outs = []
        got = train(tmp_path / f"z{stage}", mode, (1, 2, 2), *extra, *zero(stage), outputs=outs,
                    distributed_line=f"ZeRO-{stage}: rank 0 of 2")
        assert "predicted bytes per rank" in outs[0], outs[0][-2000:]
        same(got, ref, f"stage {stage}, 2 ranks")
    got = train(tmp_path / "z3nodes", mode, (2, 2, 1), *extra, *zero(3), distributed_line="ZeRO-3: rank 0 of 4")
    same(got, ref, "stage 3, 2 nodes x 2 ranks")


def test_a_checkpoint_resumes_at_another_world_size_and_stage(tmp_path):
    """Saved by 4 ranks at stage 3 (each writing its moment ranges), resumed by 2 ranks at stage 2
    and by one process at stage 0: steps 11-20 and the final weights equal the uninterrupted
    4-rank run's. The global batch stays 8 (4 x 1 x 2, 2 x 2 x 2, 1 x 4 x 2)."""
    whole = train(tmp_path / "whole", "full", (1, 4, 1), *zero(3), "save_steps=10",
                  distributed_line="ZeRO-3: rank 0 of 4")
    ckpt = tmp_path / "whole" / "checkpoint-10"
    files = sorted(os.listdir(ckpt))
    assert [f for f in files if f.startswith("optimizer")] == [f"optimizer-rank{r}.safetensors" for r in range(4)]
    manifest = json.load(open(ckpt / "lf_manifest.json"))["files"]
    assert manifest["optimizer-rank3.safetensors"]["rank"] == 3
    for layout, stage, line in (((1, 2, 2), 2, "ZeRO-2: rank 0 of 2"), ((1, 1, 4), 0, None)):
        resumed = train(tmp_path / f"resumed{stage}", "full", layout, *zero(stage), f"resume_from_checkpoint={ckpt}",
                        **({"distributed_line": line} if line else {}))
        # whole: 20 step losses, evals at 10, 20 and the end; resumed: steps 11-20, evals at 20, end.
        same((resumed[0], resumed[1]), (whole[0][10:20] + whole[0][-2:], whole[1]), f"resumed at stage {stage}")


def test_a_missing_rank_file_is_refused_on_resume(tmp_path):
    train(tmp_path / "whole", "full", (1, 2, 2), *zero(2), "save_steps=10", "max_steps=10",
          distributed_line="ZeRO-2: rank 0 of 2")
    ckpt = tmp_path / "whole" / "checkpoint-10"
    os.remove(ckpt / "optimizer-rank1.safetensors")
    import subprocess
    from train_runs import LF_TRAIN, free_port
    p = subprocess.run([LF_TRAIN, "configs/tiny_cpu.yaml", f"output_dir={tmp_path / 'again'}",
                        f"resume_from_checkpoint={ckpt}", "zero_stage=2", "max_steps=12"], cwd=ROOT,
                       env=dict(os.environ, NPROC_PER_NODE="2", MASTER_PORT=str(free_port()), OMP_NUM_THREADS="1"),
                       capture_output=True, text=True, timeout=120)
    text = p.stdout + p.stderr
    assert p.returncode == 2, text[-3000:]
    assert "optimizer-rank1.safetensors (written by rank 1) is missing" in text, text[-3000:]


def test_outputs_load_in_transformers_and_peft_like_the_data_parallel_run(tmp_path, base_model):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    peft = pytest.importorskip("peft")
    ids = torch.tensor([[1, 5, 9, 17, 33, 65, 129, 257]])

    def logits(model):
        with torch.no_grad():
            return model(ids).logits.double()

    train(tmp_path / "ddp", "full", (1, 2, 2))
    train(tmp_path / "zero", "full", (1, 2, 2), *zero(3), distributed_line="ZeRO-3: rank 0 of 2")
    a = logits(transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "ddp"))
    b = logits(transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "zero"))
    assert float((a - b).abs().max()) <= 1e-4
    lora = (f"model_name_or_path={base_model}", "init_weights=pretrained")
    train(tmp_path / "ddp_lora", "lora", (1, 2, 2), *lora)
    train(tmp_path / "zero_lora", "lora", (1, 2, 2), *lora, *zero(3), distributed_line="ZeRO-3: rank 0 of 2")
    outs = []
    for d in ("ddp_lora", "zero_lora"):
        base = transformers.AutoModelForCausalLM.from_pretrained(base_model)
        outs.append(logits(peft.PeftModel.from_pretrained(base, tmp_path / d)))
    assert float((outs[0] - outs[1]).abs().max()) <= 1e-4
    # and the adapter is not empty (ZeRO-3 + peft's best-known failure)
    from safetensors.numpy import load_file
    adapter = load_file(str(tmp_path / "zero_lora" / "adapter_model.safetensors"))
    assert adapter and all(v.size > 0 for v in adapter.values())
    assert any(np.abs(v).max() > 0 for k, v in adapter.items() if "lora_B" in k), "lora_B all zero: nothing trained"


@pytest.mark.parametrize("source, line", [
    ("deepspeed=tests/fixtures/config/ds_z2_config.json", "ZeRO-2: rank 0 of 4"),
    ("deepspeed=tests/fixtures/config/ds_z3_config.json", "ZeRO-3: rank 0 of 4"),
    ("deepspeed=tests/fixtures/config/ds_z3_offload_config.json", "ZeRO-3: rank 0 of 4"),
    ("fsdp=full_shard auto_wrap", "ZeRO-3: rank 0 of 4"),
])
def test_llamafactory_sharding_configs_train_as_the_stage_they_name(tmp_path, source, line):
    """LLaMA-Factory's own DeepSpeed files and `fsdp: full_shard auto_wrap`, on 2 nodes x 2 ranks:
    the run is the stage (and offload) the file names, and equals one process."""
    ref = train(tmp_path / "one", "full", (1, 1, 4), "max_steps=8", "eval_strategy=no")
    outs = []
    got = train(tmp_path / "sharded", "full", (2, 2, 1), "max_steps=8", "eval_strategy=no", source, outputs=outs,
                distributed_line=line)
    assert ("optimizer offloaded" in outs[0]) == ("offload" in source), outs[0][-2000:]
    same(got, ref, source)
