"""`lf-train export CONFIG` (issue 17): a PEFT LoRA adapter merged into its base model gives the
logits of peft's merge_and_unload() (within 1e-5), in an HF folder that transformers loads with no
missing or unexpected keys, sharded by export_size with an index, with config.json (torch_dtype),
generation_config.json and the tokenizer files. The folders lf-train writes carry what vLLM reads
(issue 17, vLLM-ready outputs). The base and the adapter are made here by transformers and peft."""
import json, os, shutil, subprocess

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
peft = pytest.importorskip("peft")

from harness import LF_TRAIN  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TINY = os.path.join(ROOT, "configs", "models", "tiny")


def make_base(d):
    torch.manual_seed(0)
    cfg = transformers.AutoConfig.from_pretrained(TINY)
    model = transformers.AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.float32)
    model.save_pretrained(d, safe_serialization=True)
    transformers.GenerationConfig(eos_token_id=2, temperature=0.7, top_p=0.8, do_sample=True).save_pretrained(d)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(TINY, f), d)
    return model


def make_adapter(base_model, d, r=4, alpha=8, targets=("q_proj", "v_proj", "down_proj")):
    cfg = peft.LoraConfig(r=r, lora_alpha=alpha, target_modules=list(targets), lora_dropout=0.0, bias="none",
                          task_type="CAUSAL_LM")
    model = peft.get_peft_model(base_model, cfg)
    torch.manual_seed(1)
    with torch.no_grad():  # peft starts B at zero: a merge would change nothing
        for n, p in model.named_parameters():
            if "lora_" in n:
                p.copy_(torch.randn_like(p) * 0.05)
    model.save_pretrained(d)
    return model


def export(tmp_path, **keys):
    cfg = tmp_path / "merge.yaml"
    cfg.write_text("".join(f"{k}: {v}\n" for k, v in keys.items()))
    return subprocess.run([LF_TRAIN, "export", str(cfg)], capture_output=True, text=True, timeout=120)


def logits(model, ids):
    with torch.no_grad():
        return model(input_ids=ids).logits.double()


def test_export_equals_peft_merge_and_unload_and_loads_without_missing_keys(tmp_path):
    base, adapter, out = tmp_path / "base", tmp_path / "adapter", tmp_path / "merged"
    base_model = make_base(base)
    peft_model = make_adapter(base_model, adapter)
    reference = peft_model.merge_and_unload()
    r = export(tmp_path, model_name_or_path=base, adapter_name_or_path=adapter, template="qwen",
               finetuning_type="lora", export_dir=out, export_size=0.0002, export_device="cpu",
               export_legacy_format="false")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "12 LoRA layers merged" in r.stderr, r.stderr  # 3 modules x 4 layers
    # 0.0002 GB = 200 kB a shard: the ~1.3 MB model is sharded, with an index naming every tensor.
    index = json.load(open(out / "model.safetensors.index.json"))
    shards = sorted(set(index["weight_map"].values()))
    assert len(shards) > 1 and all((out / s).exists() for s in shards), shards
    assert not (out / "model.safetensors").exists()
    merged, info = transformers.AutoModelForCausalLM.from_pretrained(out, output_loading_info=True,
                                                                     torch_dtype=torch.float32)
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    ids = torch.randint(0, 1088, (2, 17), generator=torch.Generator().manual_seed(3))
    worst = float((logits(merged, ids) - logits(reference, ids)).abs().max())
    assert worst <= 1e-5, f"merged logits differ from peft's merge_and_unload() by {worst:.2e}"
    assert json.load(open(out / "config.json"))["torch_dtype"] == "float32"
    assert json.load(open(out / "generation_config.json"))["top_p"] == 0.8
    for f in ("tokenizer.json", "tokenizer_config.json"):
        assert (out / f).exists(), f


def test_export_dtype_and_one_file_when_it_fits(tmp_path):
    base, adapter, out = tmp_path / "base", tmp_path / "adapter", tmp_path / "merged"
    peft_model = make_adapter(make_base(base), adapter)
    reference = peft_model.merge_and_unload().to(torch.bfloat16)
    r = export(tmp_path, model_name_or_path=base, adapter_name_or_path=adapter, export_dir=out,
               infer_dtype="bfloat16")
    assert r.returncode == 0, r.stdout + r.stderr
    assert (out / "model.safetensors").exists() and not (out / "model.safetensors.index.json").exists()
    from safetensors.torch import load_file
    ours = load_file(out / "model.safetensors")
    ref = reference.state_dict()
    assert all(t.dtype == torch.bfloat16 for t in ours.values())
    # The same fp32 sum rounded to bf16 once: equal up to one bf16 rounding step of the sum's order.
    for k, t in ours.items():
        assert torch.allclose(t.float(), ref[k].float(), rtol=1e-2, atol=1e-3), k
    assert json.load(open(out / "config.json"))["torch_dtype"] == "bfloat16"


@pytest.mark.parametrize("keys,expected", [
    (dict(export_quantization_bit=4), "export_quantization_bit: 4` is refused"),
    (dict(export_legacy_format="true"), "export_legacy_format: true` (.bin files) is refused"),
    (dict(export_sise=2), "unknown key `export_sise`: did you mean export_size"),
    (dict(infer_dtype="int8"), "`infer_dtype: int8` is not one of auto, float32, bfloat16, float16"),
])
def test_bad_export_configs_exit_2_saying_why(tmp_path, keys, expected):
    r = export(tmp_path, model_name_or_path=TINY, export_dir=tmp_path / "o", **keys)
    assert r.returncode == 2 and expected in r.stderr, r.stderr


def test_a_qlora_adapter_merges_only_into_the_unquantized_base(tmp_path):
    """LLaMA-Factory's rule ("Cannot merge adapters to a quantized model"): quantization_bit in the export
    config, or a base folder bitsandbytes saved in 4 bits, with an adapter is refused saying what to give."""
    base, adapter = tmp_path / "base", tmp_path / "adapter"
    make_adapter(make_base(base), adapter)
    r = export(tmp_path, model_name_or_path=base, adapter_name_or_path=adapter, export_dir=tmp_path / "o",
               quantization_bit=4)
    assert r.returncode == 2 and "cannot merge adapters to a quantized model" in r.stderr, r.stderr
    quantized = tmp_path / "bnb4"
    shutil.copytree(base, quantized)
    cfg = json.load(open(quantized / "config.json"))
    cfg["quantization_config"] = {"quant_method": "bitsandbytes", "load_in_4bit": True}
    json.dump(cfg, open(quantized / "config.json", "w"))
    r = export(tmp_path, model_name_or_path=quantized, adapter_name_or_path=adapter, export_dir=tmp_path / "o")
    assert r.returncode == 2 and "is a quantized model (bitsandbytes)" in r.stderr, r.stderr


def test_an_adapter_of_another_model_is_refused_naming_the_tensor(tmp_path):
    base, adapter = tmp_path / "base", tmp_path / "adapter"
    make_base(base)
    other = transformers.AutoConfig.from_pretrained(TINY)
    other.hidden_size, other.intermediate_size = 64, 192
    make_adapter(transformers.AutoModelForCausalLM.from_config(other), adapter)
    r = export(tmp_path, model_name_or_path=base, adapter_name_or_path=adapter, export_dir=tmp_path / "o")
    assert r.returncode == 2 and "do not fit the base weight" in r.stderr, r.stderr


def test_export_folder_and_adapters_are_checked_from_vllms_side(tmp_path):
    """The exported folder is vLLM-ready (and says how to serve it); an adapter vLLM would refuse
    or need flags for is named: bias other than none, modules_to_save, r above --max-lora-rank."""
    base, adapter, out = tmp_path / "base", tmp_path / "adapter", tmp_path / "merged"
    make_adapter(make_base(base), adapter)
    # The tiny tokenizer has no chat template: vLLM's chat API would refuse, and lf-train says so.
    r = export(tmp_path, model_name_or_path=base, adapter_name_or_path=adapter, export_dir=out)
    assert r.returncode == 0, r.stderr
    assert "has no chat_template" in r.stderr and "--chat-template" in r.stderr, r.stderr
    assert "vllm serve" not in r.stderr, r.stderr
    tc = json.load(open(base / "tokenizer_config.json"))
    tc["chat_template"] = "{% for m in messages %}{{ m['content'] }}{% endfor %}"
    json.dump(tc, open(base / "tokenizer_config.json", "w"))
    r = export(tmp_path, model_name_or_path=base, adapter_name_or_path=adapter, export_dir=out)
    assert r.returncode == 0, r.stderr
    assert f"vLLM: serve it with `vllm serve {out}`" in r.stderr and "warning" not in r.stderr, r.stderr
    # A folder whose name has a space: the hint is one shell word (issue 29), ready to paste.
    spaced = tmp_path / "my merged"
    r = export(tmp_path, model_name_or_path=base, adapter_name_or_path=adapter, export_dir=spaced)
    assert r.returncode == 0 and f"vLLM: serve it with `vllm serve '{spaced}'`" in r.stderr, r.stderr
    cfg = json.load(open(out / "config.json"))
    assert cfg["architectures"] == ["Qwen2ForCausalLM"] and cfg["torch_dtype"] == "float32"
    assert json.load(open(out / "tokenizer_config.json"))["chat_template"] == tc["chat_template"]
    assert (out / "generation_config.json").exists()
    # The adapter side, as written by peft (lf-train writes the same fields: test_zero_equivalence).
    ac = json.load(open(adapter / "adapter_config.json"))
    assert ac["r"] == 4 and ac["lora_alpha"] == 8 and ac["bias"] == "none" and sorted(ac["target_modules"])


def test_lf_train_lora_output_has_what_vllm_reads(tmp_path):
    """A LoRA run's output_dir: adapter_config.json with r, lora_alpha, target_modules, bias none,
    no modules_to_save; r above vLLM's default --max-lora-rank gets the flag to pass."""
    worker = os.environ.get("LF_WORKER_BIN") or os.path.join(os.path.dirname(LF_TRAIN), "..", "worker", "lf-worker")
    if not os.path.exists(worker):
        pytest.skip("needs lf-worker (a build with LF_WITH_TORCH=ON)")
    base, out = tmp_path / "base", tmp_path / "lora"
    make_base(base)
    r = subprocess.run([LF_TRAIN, "configs/tiny_cpu.yaml", f"model_name_or_path={base}", "finetuning_type=lora",
                        "lora_rank=32", f"output_dir={out}", "max_steps=2", "eval_strategy=no", "val_size=0",
                        "plot_loss=false", "save_strategy=no", "per_device_train_batch_size=2"], cwd=ROOT,
                       capture_output=True, text=True, timeout=300, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    ac = json.load(open(out / "adapter_config.json"))
    assert ac["r"] == 32 and ac["lora_alpha"] == 64 and ac["bias"] == "none" and ac["target_modules"]
    assert ac.get("modules_to_save") is None
    assert "above vLLM's default --max-lora-rank 16: serve it with --max-lora-rank 32" in r.stderr, r.stderr[-3000:]


def test_a_dora_adapter_exports_as_peft_merges_it(tmp_path):
    """use_dora: each merged row is magnitude / ||W + dW|| x (W + dW), peft's merge_and_unload."""
    base, adapter, out = tmp_path / "base", tmp_path / "adapter", tmp_path / "merged"
    cfg = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "down_proj"], lora_dropout=0.0,
                          use_dora=True, task_type="CAUSAL_LM")
    model = peft.get_peft_model(make_base(base), cfg)
    torch.manual_seed(2)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.copy_(torch.randn_like(p) * 0.05)
            elif "lora_magnitude_vector" in n:
                p.mul_(1 + torch.randn_like(p) * 0.1)
    model.save_pretrained(adapter)
    reference = model.merge_and_unload()
    r = export(tmp_path, model_name_or_path=base, adapter_name_or_path=adapter, export_dir=out)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "vLLM does not serve DoRA adapters" not in r.stderr  # the merged folder is plain
    merged = transformers.AutoModelForCausalLM.from_pretrained(out, torch_dtype=torch.float32)
    ids = torch.randint(0, 1088, (2, 17), generator=torch.Generator().manual_seed(3))
    worst = float((logits(merged, ids) - logits(reference, ids)).abs().max())
    assert worst <= 1e-5, f"merged DoRA logits differ from peft's merge_and_unload() by {worst:.2e}"
    # Without its magnitudes the adapter is refused, naming the module.
    from safetensors.torch import load_file, save_file
    st = load_file(adapter / "adapter_model.safetensors")
    save_file({k: v for k, v in st.items() if "magnitude" not in k}, adapter / "adapter_model.safetensors")
    r = export(tmp_path, model_name_or_path=base, adapter_name_or_path=adapter, export_dir=out)
    assert r.returncode == 2 and "use_dora is set but" in r.stderr and "lora_magnitude_vector" in r.stderr, r.stderr


def test_an_oft_adapter_exports_as_peft_merges_it(tmp_path):
    """finetuning_type oft's adapter (LLaMA-Factory merges it with finetuning_type lora, its default): each weight
    becomes W R_bdᵀ, R each block's Cayley-Neumann rotation, as peft's merge_and_unload; a block size that does not
    divide a layer's width moves to peft's divisor (20 -> 16 here)."""
    base, adapter, out = tmp_path / "base", tmp_path / "adapter", tmp_path / "merged"
    cfg = peft.OFTConfig(r=0, oft_block_size=20, target_modules=["q_proj", "down_proj"], task_type="CAUSAL_LM")
    model = peft.get_peft_model(make_base(base), cfg)
    torch.manual_seed(4)
    with torch.no_grad():  # peft starts oft_R at zero (the identity rotation)
        for n, p in model.named_parameters():
            if "oft_R" in n:
                p.copy_(torch.randn_like(p) * 0.05)
    model.save_pretrained(adapter)
    reference = model.merge_and_unload()
    r = export(tmp_path, model_name_or_path=base, adapter_name_or_path=adapter, export_dir=out)
    assert r.returncode == 0, r.stdout + r.stderr
    merged = transformers.AutoModelForCausalLM.from_pretrained(out, torch_dtype=torch.float32)
    ids = torch.randint(0, 1088, (2, 17), generator=torch.Generator().manual_seed(3))
    worst = float((logits(merged, ids) - logits(reference, ids)).abs().max())
    assert worst <= 1e-5, f"merged OFT logits differ from peft's merge_and_unload() by {worst:.2e}"
    # finetuning_type oft with an adapter is LLaMA-Factory's refusal.
    r = export(tmp_path, model_name_or_path=base, adapter_name_or_path=adapter, export_dir=out, finetuning_type="oft")
    assert r.returncode == 2 and "Adapter is only valid for the LoRA method" in r.stderr, r.stderr
