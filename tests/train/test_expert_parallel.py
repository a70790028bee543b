"""Expert parallelism (`expert_model_parallel_size`, issue 30) through the real lf-train on fp32 CPU,
2 worker processes over the TCP backend: each rank keeps half of every sparse layer's experts, the
tokens travel to their experts' rank and back by all_to_all, the expert weights' gradients stay with
their owner and the other parameters train data-parallel. The aux loss is each micro-batch's own
statistic (the router is local), so the reference is one process replaying the same micro-batches:
one process x 2 rows x 4 micro-steps against 2 ranks x 2 rows x 2 micro-steps (rank r's micro-step k
holds the global batch's rows 4k + 2r, 4k + 2r + 1). Per-step and eval losses and final weights within
1e-5, full fine-tuning (Qwen3-MoE with non-reentrant activation checkpointing: the dispatch runs again
in the recompute; Mixtral) and LoRA (attention adapters, experts frozen and still placed per rank);
the saved model is the single process's: the Hub's per-expert tensors gathered, the same safetensors
header byte for byte. Each rank holds the dense part and half the experts (its log line's counts, and
`lf-train plan`'s per_rank counts and state bytes, both against the fixture's safetensors header). `lf-train
plan` shows the placement and refuses what does not fit (exit 2)."""
import json, math, os, re, shutil, subprocess, sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from test_zero_equivalence import same  # noqa: E402
from train_runs import LF_TRAIN, ROOT, train  # noqa: E402

FIX = os.path.join(ROOT, "tests", "fixtures", "train", "lf_families")


def family_model(tmp_path, family):
    model = tmp_path / f"{family}_model"
    if not model.exists():
        shutil.copytree(os.path.join(FIX, family, "model"), model)
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(ROOT, "configs", "models", "tiny", f), model)
    return model


def header(path):
    """A safetensors file's header bytes: every tensor's name, dtype, shape and offsets, in order."""
    with open(path, "rb") as f:
        n = int.from_bytes(f.read(8), "little")
        return f.read(n)


@pytest.mark.parametrize("family,mode,checkpointing", [("qwen3_moe", "full", True), ("mixtral", "full", False),
                                                       ("qwen3_moe", "lora", False)])
def test_expert_parallel_equals_one_process(tmp_path, family, mode, checkpointing):
    extra = [f"model_name_or_path={family_model(tmp_path, family)}", "moe_aux_loss_coef=0.1", "max_steps=6",
             "eval_steps=3", "cutoff_len=64", f"disable_gradient_checkpointing={str(not checkpointing).lower()}",
             "use_reentrant_gc=false"]
    ref = train(tmp_path / "one", mode, (1, 1, 2), *extra, "gradient_accumulation_steps=4")
    outs = []
    got = train(tmp_path / "ep", mode, (1, 2, 2), *extra, "expert_model_parallel_size=2", outputs=outs,
                distributed_line="expert parallel over 2 ranks: experts 0-")
    assert "experts 2-3 of 4 a layer on this rank" in outs[0], outs[0][-3000:]  # rank 1's line, relayed
    if mode == "full":  # what each rank holds once its experts are sliced: `lf-train plan`'s per_rank counts
        held = re.findall(r"(\d+) parameters on this rank, (\d+) trainable", outs[0])
        dense, experts = written_elements(family_model(tmp_path, family))
        assert len(held) >= 2 and {tuple(map(int, h)) for h in held} == {(dense + experts // 2,) * 2}, held
    same(got, ref, f"{family} {mode}, expert parallel on 2 ranks")
    saved = "adapter_model.safetensors" if mode == "lora" else "model.safetensors"
    assert header(tmp_path / "ep" / saved) == header(tmp_path / "one" / saved)
    if mode == "full":
        names = json.loads(header(tmp_path / "ep" / saved))
        assert "model.layers.0.mlp.experts.3.down_proj.weight" in names or \
            "model.layers.0.block_sparse_moe.experts.3.w2.weight" in names, sorted(names)[:20]


def test_a_checkpoint_resumes_in_one_process_and_at_expert_parallel(tmp_path):
    """Each rank writes its expert slices' optimizer state as element ranges (optimizer-rank<R>), rank 0 the
    rest (optimizer.safetensors); resumed from step 3 by one process (assembling the ranges) and by 2 expert-
    parallel ranks, steps 4-6 and the final weights equal the uninterrupted expert-parallel run's."""
    extra = [f"model_name_or_path={family_model(tmp_path, 'qwen3_moe')}", "moe_aux_loss_coef=0.1", "max_steps=6",
             "eval_strategy=no", "cutoff_len=64"]
    ep = ("expert_model_parallel_size=2",)
    whole = train(tmp_path / "whole", "full", (1, 2, 2), *extra, *ep, "save_steps=3",
                  distributed_line="expert parallel over 2 ranks")
    ckpt = tmp_path / "whole" / "checkpoint-3"
    files = sorted(f for f in os.listdir(ckpt) if f.startswith("optimizer"))
    assert files == ["optimizer-rank0.safetensors", "optimizer-rank1.safetensors", "optimizer.safetensors"], files
    for layout, more in (((1, 1, 2), ("gradient_accumulation_steps=4",)), ((1, 2, 2), ep)):
        resumed = train(tmp_path / f"resumed{layout[1]}", "full", layout, *extra, *more, f"resume_from_checkpoint={ckpt}",
                        distributed_line="expert parallel over 2 ranks")
        same(resumed, (whole[0][3:], whole[1]), f"resumed on {layout[1]} rank(s)")


def plan_run(*args):
    env = {k: v for k, v in os.environ.items() if k not in ("NNODES", "NPROC_PER_NODE", "CUDA_VISIBLE_DEVICES")}
    env["CUDA_VISIBLE_DEVICES"] = ""
    return subprocess.run([LF_TRAIN, "plan", "configs/tiny_cpu.yaml", *args, "--no-data"], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)


def written_elements(model):
    """(dense, experts): the elements of a model folder's tensors, the Hub's per-expert ones apart."""
    dense = experts = 0
    for name, t in json.loads(header(model / "model.safetensors")).items():
        if name != "__metadata__":
            n = math.prod(t["shape"])
            dense, experts = (dense, experts + n) if ".experts." in name else (dense + n, experts)
    return dense, experts


def test_plan_shows_the_placement_and_refuses_what_does_not_fit(tmp_path):
    folder = family_model(tmp_path, "qwen3_moe")
    model = f"model_name_or_path={folder}"
    r = plan_run(model, "expert_model_parallel_size=2", "--nproc-per-node", "2", "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["parallel"]["expert_parallel"] == {"size": 2, "experts_per_rank": 2, "dispatch": "all_to_all"}
    # A rank's share (full fine-tuning, fp32): the dense part and half the experts, 16 bytes each of state.
    dense, experts = written_elements(folder)
    mine = dense + experts // 2
    assert s["model"]["parameters"] == dense + experts
    assert s["model"]["per_rank"] == {"parameters": mine, "trainable": mine, "frozen": 0}
    terms = {t["kind"]: t["bytes"] for t in s["memory"]["gpu_per_rank"]["terms"]}
    assert (terms["master"], terms["gradients"], terms["moments"]) == (4 * mine, 4 * mine, 8 * mine), terms
    r = plan_run(model, "expert_model_parallel_size=2", "--nproc-per-node", "2")
    assert "expert parallel over 2 ranks, 2 experts a layer per rank (all_to_all)" in r.stdout, r.stdout
    assert f"(per rank: {mine}, {mine} trainable)" in r.stdout, r.stdout
    refusals = [
        ((model, "expert_model_parallel_size=2", "zero_stage=3"), "expert parallelism under ZeRO is not implemented"),
        ((model, "expert_model_parallel_size=2", "finetuning_type=freeze"), "with finetuning_type freeze"),
        ((model, "expert_model_parallel_size=2", "--nproc-per-node", "1"), "does not divide the world size 1"),
        ((model, "expert_model_parallel_size=4", "--nproc-per-node", "8"), "places the experts over the whole world"),
        (("expert_model_parallel_size=2",), "is a dense model"),
        ((model, "expert_model_parallel_size=0"), "expert_model_parallel_size"),
    ]
    for args, why in refusals:
        nproc = () if "--nproc-per-node" in args else ("--nproc-per-node", "2")
        r = plan_run(*args, *nproc)
        assert r.returncode == 2 and why in r.stderr, (args, r.returncode, r.stderr[-2000:])
