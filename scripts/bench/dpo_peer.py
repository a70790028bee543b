#!/usr/bin/env python3
"""Peer side of issue 31's DPO benchmark: TRL's DPOTrainer (+ peft for LoRA) on the very pairs lf-train
trained on, in its batches, reading lf-train's tokenized cache of the ranking dataset.

  dpo_peer.py --cache TOK/train.lftok --config configs/models/qwen2.5-7b.json --mode lora|full \
              --mbs 2 --steps 20 [--warmup 3] [--ckpt] [--beta 0.1]

- pairs: lf-train's cache (include/lf/data/tokenized_dataset.h, flag 4: rows 2i / 2i+1 are a pair's chosen and
  rejected rows): the prompt is the rows' leading -100 labels, chosen_ids / rejected_ids the rest, handed to
  DPOTrainer already tokenized (its _prepare_dataset is skipped; its collator pads chosen and rejected
  together, as lf-train's);
- model: a random Qwen2 of `--config`'s published shape, bf16 weights under bf16 (TRL/HF's usual GPU setup),
  LoRA r16 / alpha 32 on the seven linear layers (lf-train: lora_rank 16, lora_alpha 32, lora_target all);
  full fine-tuning (--master fp32, the default): the policy's weights in fp32 under bf16 autocast and the
  frozen reference copy in bf16, as LLaMA-Factory 0.9.5 runs it (its _setup_full_tuning casts trainable
  parameters to fp32 unless pure_bf16; create_ref_model loads the reference in the compute dtype) and as
  lf-train does (fp32 master weights, gradients and AdamW moments: 16 bytes a parameter); --master bf16 is
  pure bf16 (8 bytes a parameter, torch's AdamW moments in bf16: LLaMA-Factory's pure_bf16, which lf-train
  refuses), the 2026-12-04 row's peer (its 35.4 GiB against lf-train's 39.6: 8.6 GiB less state);
  the reference: peft's adapters off (LoRA) or TRL's frozen copy (full), computed every step, as TRL does;
- the step: --mbs pairs per micro-batch, 1 accumulation step, sigmoid loss, beta 0.1, AdamW, lr constant;
  gradient checkpointing with --ckpt.
Prints `RESULT {json}`: pairs/s over the steps after --warmup (callback timing, every step synchronised),
HF's train_samples_per_second over the whole train() (what lf-train's all_results.json gives), and the peak
allocated GiB. CPU dry run: --device cpu (fp32; a small --config).
"""
import argparse
import json
import os
import struct
import sys
import time

import numpy as np
import torch


def read_pairs(path):
    """(prompt_ids, chosen_ids, rejected_ids) of each pair of lf-train's tokenized cache."""
    with open(path, "rb") as f:
        head = f.read(64)
        magic, _version, flags, _key, n, tokens = struct.unpack("<8sIIQQQ", head[:40])
        assert magic == b"LFTOKDS1", f"{path}: not an lf-train tokenized cache"
        assert flags & 4, f"{path}: not a pairwise cache (stage dpo or rm writes one)"
        offsets = np.frombuffer(f.read(8 * (n + 1)), dtype="<u8")
        ids = np.frombuffer(f.read(4 * tokens), dtype="<i4")
        labels = np.frombuffer(f.read(4 * tokens), dtype="<i4")
    pairs = []
    for i in range(0, n, 2):
        c = slice(offsets[i], offsets[i + 1])
        r = slice(offsets[i + 1], offsets[i + 2])
        plen = int(np.argmax(labels[c] != -100))
        pairs.append({"prompt_ids": ids[c][:plen].tolist(), "chosen_ids": ids[c][plen:].tolist(),
                      "rejected_ids": ids[r][plen:].tolist()})
    return pairs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--mode", choices=["lora", "full"], default="lora")
    ap.add_argument("--mbs", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--ckpt", action="store_true")
    ap.add_argument("--master", choices=["fp32", "bf16"], default="fp32",
                    help="full: the policy's weight dtype (fp32: LLaMA-Factory's and lf-train's master weights)")
    ap.add_argument("--beta", type=float, default=0.1)
    ap.add_argument("--lr", type=float, default=5e-6)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--out", default="/tmp/dpo_peer")
    a = ap.parse_args()

    from datasets import Dataset
    from transformers import AutoTokenizer, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM, TrainerCallback
    from trl import DPOConfig, DPOTrainer
    import trl

    cfg = json.load(open(a.config))
    cfg = Qwen2Config(**{k: v for k, v in cfg.items() if k not in ("architectures", "model_type", "torch_dtype")})
    cfg._attn_implementation = "sdpa"
    gpu = a.device != "cpu"
    torch.manual_seed(0)
    master_fp32 = a.mode == "full" and a.master == "fp32"
    with torch.device(a.device):
        model = Qwen2ForCausalLM(cfg).to(torch.bfloat16 if gpu and not master_fp32 else torch.float32)
    peft_config = None
    if a.mode == "lora":
        from peft import LoraConfig
        peft_config = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, task_type="CAUSAL_LM", target_modules=[
            "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    tok_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "configs", "models", "tiny")
    tokenizer = AutoTokenizer.from_pretrained(tok_dir)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token

    pairs = read_pairs(a.cache)
    need = a.mbs * (a.steps + a.warmup)
    rows = (pairs * (need // max(1, len(pairs)) + 1))[:need]
    dataset = Dataset.from_list(rows)

    class PreTokenized(DPOTrainer):
        def _prepare_dataset(self, dataset, *args, **kwargs):  # lf-train's tokens as they are
            return dataset

    times = []

    class StepTimer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            if gpu:
                torch.cuda.synchronize()
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            if gpu:
                torch.cuda.synchronize()
            times.append(time.perf_counter() - self.t0)

    args = DPOConfig(output_dir=a.out, per_device_train_batch_size=a.mbs, gradient_accumulation_steps=1,
                     max_steps=a.steps + a.warmup, learning_rate=a.lr, lr_scheduler_type="constant", beta=a.beta,
                     loss_type=["sigmoid"], bf16=gpu, logging_steps=1, save_strategy="no", report_to=[],
                     gradient_checkpointing=a.ckpt, max_length=None, pad_to_multiple_of=8,
                     remove_unused_columns=False, dataloader_num_workers=0, seed=42, use_cpu=not gpu,
                     disable_tqdm=True)
    # Full fine-tuning: the frozen reference copy LLaMA-Factory hands DPOTrainer (TRL 1.16 would otherwise
    # reload it from model.config._name_or_path, empty for a model built from its config).
    ref = None
    if peft_config is None:
        import copy
        ref = copy.deepcopy(model).eval().requires_grad_(False)
        if gpu:
            ref = ref.to(torch.bfloat16)  # LLaMA-Factory's create_ref_model: the compute dtype
    trainer = PreTokenized(model=model, ref_model=ref, args=args, train_dataset=dataset, processing_class=tokenizer,
                           peft_config=peft_config, callbacks=[StepTimer()])
    if gpu:
        torch.cuda.reset_peak_memory_stats()
    result = trainer.train()
    steady = times[a.warmup:]
    out = {"peer": f"trl {trl.__version__} DPOTrainer" + (" + peft" if peft_config else "")
           + (f" (master {a.master})" if a.mode == "full" else ""),
           "mode": a.mode, "mbs_pairs": a.mbs, "steps": len(steady),
           "pairs_per_s": a.mbs * len(steady) / max(sum(steady), 1e-9),
           "train_samples_per_second": result.metrics.get("train_samples_per_second"),
           "tokens_per_step": None,
           "peak_allocated_gib": torch.cuda.max_memory_allocated() / 2**30 if gpu else None,
           "losses": [l["loss"] for l in trainer.state.log_history if "loss" in l][:5]}
    print("RESULT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    sys.exit(main())
