"""Peer baseline: the PyTorch + transformers + peft stack on the same GPUs, same shapes.

Runs one configuration and prints one JSON line:
  python hf_reference.py --model 0.5b|1.5b|7b|30b-a3b|moe-small --mode lora|full|fsdp --seq 2048 --mbs 4 --steps 12 [--compile] [--liger] [--offload] [--ckpt] [--qlora] [--fp8 rowwise|tensorwise]
MoE shapes (Qwen3-MoE): --experts grouped_mm (default: transformers 5's torch._grouped_mm path, its fastest), batched_mm or
eager (a loop over experts); LoRA there adapts the attention projections (the experts are fused 3-D parameters).
FLOPs count the parameters a token passes through (active parameters).
Under torchrun it wraps the model in DDP (lora, full) or FSDP2 (fsdp).
--liger: Liger Kernel's Triton kernels (RMSNorm, RoPE, SwiGLU, fused linear cross-entropy), as
LLaMA-Factory's `enable_liger_kernel: true` applies them (PyPI liger-kernel; carry its wheel to the GPU machine).
--qlora (with --mode lora): QLoRA as LLaMA-Factory's `quantization_bit: 4` runs it: every decoder linear a
bitsandbytes Linear4bit (NF4, double quantization, bf16 compute and quant storage), peft's LoRA on top, the
embedding, norms and lm_head left in bf16 (LLaMA-Factory does not call prepare_model_for_kbit_training).
bitsandbytes is not in the GPU image: carry its wheel (scripts/device/qlora_check.sh says how).
--fp8 RECIPE: FP8 training as LLaMA-Factory 0.9.5's `fp8: true` (fp8_backend auto / torchao) runs it: torchao's
convert_to_float8_training with Float8LinearConfig.from_recipe_name(RECIPE) (LLaMA-Factory uses rowwise) over every
linear but embed / lm_head / output / classifier and those with a dimension not divisible by 16 (its module filter,
after peft as accelerate applies it); use with --compile (torchao's float8 is meant to be compiled). torchao is not
in the GPU image: carry its wheel (scripts/device/fp8_bench.sh says how).
(A copy of ../shared/bench/hf_reference.py with --qlora added, issue 32, and --fp8, issue 33.)
"""
import argparse, json, os, sys, time
import torch, torch.distributed as dist

SHAPES = {  # Qwen2.5 published configs
    "0.5b": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True),
    "1.5b": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12, num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True),
    "7b": dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28, num_key_value_heads=4, vocab_size=152064, tie_word_embeddings=False),
}
MOE_SHAPES = {  # Qwen3-MoE: the published Qwen3-30B-A3B config, and a small shape of the same family for full fine-tuning on one GPU
    "30b-a3b": dict(hidden_size=2048, intermediate_size=6144, moe_intermediate_size=768, num_hidden_layers=48, num_attention_heads=32, num_key_value_heads=4, head_dim=128,
                    num_experts=128, num_experts_per_tok=8, norm_topk_prob=True, router_aux_loss_coef=0.001, vocab_size=151936, tie_word_embeddings=False),
    "moe-small": dict(hidden_size=1024, intermediate_size=3072, moe_intermediate_size=384, num_hidden_layers=16, num_attention_heads=16, num_key_value_heads=4, head_dim=64,
                      num_experts=64, num_experts_per_tok=8, norm_topk_prob=True, router_aux_loss_coef=0.001, vocab_size=151936, tie_word_embeddings=True),
}

def quantize_nf4_(model, moe):
    """transformers' load_in_4bit on a model built in memory: each decoder nn.Linear replaced by a
    bitsandbytes Linear4bit whose Params4bit quantizes the layer's bf16 weight on the GPU (one layer's
    dense weight at a time), as BitsAndBytesConfig(load_in_4bit, bnb_4bit_quant_type nf4,
    bnb_4bit_use_double_quant, bnb_4bit_compute_dtype and quant_storage bf16) under LLaMA-Factory."""
    import bitsandbytes as bnb
    assert not moe, "--qlora: dense shapes only"
    for layer in model.model.layers:
        for parent in (layer.self_attn, layer.mlp):
            for name, lin in list(parent.named_children()):
                if not isinstance(lin, torch.nn.Linear):
                    continue
                q = bnb.nn.Linear4bit(lin.in_features, lin.out_features, bias=lin.bias is not None,
                                      compute_dtype=torch.bfloat16, compress_statistics=True, quant_type="nf4",
                                      quant_storage=torch.bfloat16, device="meta")
                q.weight = bnb.nn.Params4bit(lin.weight.data, requires_grad=False, compress_statistics=True,
                                             quant_type="nf4", quant_storage=torch.bfloat16, module=q)
                if lin.bias is not None:
                    q.bias = torch.nn.Parameter(lin.bias.data, requires_grad=False)
                q = q.to(lin.weight.device)  # Params4bit quantizes as it moves
                setattr(parent, name, q)
                del lin
    torch.cuda.empty_cache() if torch.cuda.is_available() else None


def to_float8_(model, recipe):
    # torchao from LF_TORCHAO_PATH (a --target install), put on the path only now: peft 0.18 routes LoRA layers
    # through its torchao support whenever torchao is importable at get_peft_model, and fails on torchao 0.18.
    if os.environ.get("LF_TORCHAO_PATH"): sys.path.insert(0, os.environ["LF_TORCHAO_PATH"])
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training
    def keep(mod, name):  # LLaMA-Factory 0.9.5's module_filter_func (train/fp8_utils.py)
        if any(s in name.lower() for s in ("embed", "lm_head", "output", "classifier")): return False
        return mod.weight.shape[0] % 16 == 0 and mod.weight.shape[1] % 16 == 0
    convert_to_float8_training(model, config=Float8LinearConfig.from_recipe_name(recipe), module_filter_fn=keep)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="0.5b"); p.add_argument("--mode", default="lora")
    p.add_argument("--seq", type=int, default=2048); p.add_argument("--mbs", type=int, default=4)
    p.add_argument("--steps", type=int, default=12); p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--ckpt", action="store_true")
    p.add_argument("--compile", action="store_true", help="torch.compile the model (the strongest eager-free peer)")
    p.add_argument("--offload", action="store_true", help="with --mode fsdp: FSDP2 CPUOffloadPolicy (params, grads, optimizer on the host)")
    p.add_argument("--liger", action="store_true", help="Liger Kernel's fused Triton kernels (LLaMA-Factory enable_liger_kernel)")
    p.add_argument("--experts", default="grouped_mm", help="MoE shapes: transformers' experts implementation (eager | batched_mm | grouped_mm)")
    p.add_argument("--layers", type=int, default=0, help="override the layer count (smoke tests)")
    p.add_argument("--qlora", action="store_true", help="with --mode lora: the decoder linears in bitsandbytes' NF4")
    p.add_argument("--fp8", default="", help="tensorwise | rowwise | rowwise_with_gw_hp: torchao float8 training (LLaMA-Factory's fp8: true)")
    p.add_argument("--device", default="cuda", help="cuda, or cpu for a smoke test")
    a = p.parse_args()
    ddp = "RANK" in os.environ
    rank = int(os.environ.get("RANK", 0)); world = int(os.environ.get("WORLD_SIZE", 1))
    local = int(os.environ.get("LOCAL_RANK", 0))
    dev = a.device
    if dev == "cuda": torch.cuda.set_device(local)
    if ddp: dist.init_process_group("nccl")
    from transformers import Qwen2Config, Qwen2ForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM
    if a.liger:
        from liger_kernel.transformers import apply_liger_kernel_to_qwen2
        apply_liger_kernel_to_qwen2(rope=True, rms_norm=True, swiglu=True, fused_linear_cross_entropy=True)
    moe = a.model in MOE_SHAPES
    shape = dict(MOE_SHAPES[a.model] if moe else SHAPES[a.model])
    if a.layers: shape["num_hidden_layers"] = a.layers
    Config, Model = (Qwen3MoeConfig, Qwen3MoeForCausalLM) if moe else (Qwen2Config, Qwen2ForCausalLM)
    cfg = Config(**shape, rope_theta=1e6, max_position_embeddings=32768, attn_implementation="sdpa", torch_dtype="bfloat16")
    if moe: cfg._experts_implementation = a.experts
    torch.manual_seed(0)
    t0 = time.time()
    with torch.device(dev):
        model = Model(cfg).to(torch.bfloat16)
    n_params = sum(p.numel() for p in model.parameters())
    if a.qlora:
        quantize_nf4_(model, moe)
    init_s = time.time() - t0
    if a.ckpt: model.gradient_checkpointing_enable()
    if a.mode == "fsdp":  # full fine-tuning, FSDP2: fp32 sharded master params, bf16 compute, fp32 reduce
        from torch.distributed.fsdp import fully_shard, MixedPrecisionPolicy, CPUOffloadPolicy, OffloadPolicy
        model = model.float()
        mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        off = CPUOffloadPolicy(pin_memory=True) if a.offload else OffloadPolicy()
        for layer in model.model.layers: fully_shard(layer, mp_policy=mp, offload_policy=off)
        fully_shard(model, mp_policy=mp, offload_policy=off)
    if a.mode == "lora":
        from peft import LoraConfig, get_peft_model
        # MoE: experts are fused 3-D parameters in transformers 5 (no nn.Linear to adapt): LoRA on attention
        targets = ["q_proj","k_proj","v_proj","o_proj"] + ([] if moe else ["gate_proj","up_proj","down_proj"])
        model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, target_modules=targets))
        if a.ckpt: model.enable_input_require_grads()
    trainable = [p for p in model.parameters() if p.requires_grad]
    n_train = sum(p.numel() for p in trainable)
    if a.mode in ("full", "lora"):
        for q in trainable: q.data = q.data.float()  # fp32 master weights, bf16 autocast compute
    if a.fp8:
        to_float8_(model, a.fp8)
    try:
        opt = torch.optim.AdamW(trainable, lr=1e-5, fused=True)
    except Exception:
        opt = torch.optim.AdamW(trainable, lr=1e-5, foreach=True)
    if ddp and a.mode != "fsdp":
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
    if a.compile:
        model = torch.compile(model)
    g = torch.Generator(device=dev).manual_seed(rank)
    def batch():
        return torch.randint(0, cfg.vocab_size, (a.mbs, a.seq), device=dev, generator=g)
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    if dev == "cuda": torch.cuda.reset_peak_memory_stats()
    times = []
    for i in range(a.warmup + a.steps):
        ids = batch()
        sync(); t = time.time()
        with torch.autocast(dev, dtype=torch.bfloat16, enabled=a.mode != "fsdp"):
            out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        opt.step(); opt.zero_grad(set_to_none=True)
        sync()
        if i >= a.warmup: times.append(time.time() - t)
    times.sort(); med = times[len(times)//2]
    tok = a.mbs * a.seq
    L, H, S = cfg.num_hidden_layers, cfg.hidden_size, a.seq
    attn = 12 * L * H * S  # per token, fwd+bwd, no causal discount (torchtitan/PaLM convention)
    n_active = n_params
    if moe:  # parameters a token passes through: all but the experts it is not routed to
        per_expert = 3 * cfg.hidden_size * cfg.moe_intermediate_size
        n_active = n_params - cfg.num_hidden_layers * (cfg.num_experts - cfg.num_experts_per_tok) * per_expert
    flops_tok_full = 6 * n_active + attn
    flops_tok_lora = 4 * n_active + attn  # no weight-grad GEMMs for frozen weights
    ftok = flops_tok_lora if a.mode == "lora" else flops_tok_full
    res = dict(model=a.model, mode=a.mode, qlora=a.qlora, fp8=a.fp8 or None, compile=a.compile, liger=a.liger, offload=a.offload, world=world, seq=a.seq, mbs=a.mbs, ckpt=a.ckpt,
               params=n_params, active_params=n_active, experts=a.experts if moe else None, trainable=n_train, init_s=round(init_s,1),
               step_s=round(med,4), tok_s_per_gpu=round(tok/med), tok_s_total=round(tok*world/med),
               tflops_per_gpu=round(ftok*tok/med/1e12,1), mfu_vs_790=round(ftok*tok/med/790e12,3),
               peak_mem_gib=round(torch.cuda.max_memory_allocated()/2**30,1) if dev == "cuda" else None, loss=round(out.loss.item(),3))
    if rank == 0: print("RESULT " + json.dumps(res), flush=True)
    if ddp: dist.destroy_process_group()

if __name__ == "__main__":
    main()
