#include "config_schema.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "fp8_keys.h"
#include "method_keys.h"
#include "optimizer_keys.h"
#include "predict_keys.h"
#include "quantization_keys.h"
#include "reference_keys.h"
#include "schema_builders.h"

namespace lf::config {

namespace {

using namespace schema;

// The sharding keys are read together (sharding.cpp), after every other key: their
// `read` is that step, so here they only say what they are.
KeyDecl sharding_key(std::string name, std::string type, std::string note, bool own, std::string default_text,
                     std::string observable, std::string sample = "", std::string sample_context = "") {
  KeyDecl d;
  d.name = std::move(name);
  d.policy = KeyPolicy::kImplemented;
  d.own = own;
  d.type = std::move(type);
  d.note = std::move(note);
  d.default_text = std::move(default_text);
  d.sample = std::move(sample);
  d.sample_context = std::move(sample_context);
  d.observable = std::move(observable);
  d.ranks = 2;
  d.field = "parallel.zero_stage";
  d.show = [](const JobPlan& c) {
    const auto& p = c.parallel;
    return fmt::format("zero_stage {}, offload {} (ratio {}) ({})", p.zero_stage, p.offload, p.offload_ratio,
                       p.sharding_source);
  };
  return d;
}

std::vector<KeyDecl> model_keys() {
  return {
      implemented("model_name_or_path", LF_FIELD(model, model_name_or_path),
                  "a local folder with config.json (and weights unless `init_weights: random`); lf-train never "
                  "downloads")
          .observe("losses"),
      implemented("init_weights", LF_FIELD(model, init_weights),
                  "lf-train's own: auto (the folder's safetensors; random from config.json when the folder holds "
                  "none, said in one line), pretrained (weights required), random (the folder's weights ignored, "
                  "said in one line; benchmarks)")
          .own()
          .choices({"auto", "pretrained", "random"})
          .observe("losses"),
      implemented("moe_aux_loss_coef", LF_FIELD(model, moe_aux_loss_coef),
                  "mixture-of-experts models: router_aux_loss_coef x the load-balancing loss joins each "
                  "micro-batch's loss (transformers' load_balancing_loss_func over every sparse layer, padding "
                  "masked), as LLaMA-Factory sets output_router_logits; unset: the config.json's, when it says "
                  "output_router_logits. No effect on a dense model (a warning), as in LLaMA-Factory")
          .check([](const Reader& r, const std::string& key, const std::optional<double>& v) {
            LF_CHECK(!v || (*v >= 0 && std::isfinite(*v)), ConfigError, "{}: `{}` must be >= 0, got {}",
                     r.where(key), key, v ? *v : 0.0);
          })
          .sample("0.5")
          .observe("losses"),
      implemented("use_reentrant_gc", LF_FIELD(model, use_reentrant_gc),
                  "with gradient checkpointing and moe_aux_loss_coef: true (LLaMA-Factory's default) is reentrant "
                  "checkpointing, under which transformers' load-balancing loss is logged but trains nothing (its "
                  "router logits come from the no-grad forward), and lf-train does the same; false trains the "
                  "routers with it. The checkpointing itself is lf-train's either way")
          .sample("false")
          .observe("losses"),
  };
}

std::vector<KeyDecl> method_keys() {
  return {
      implemented("stage", LF_FIELD(objective, stage),
                  "sft (supervised fine-tuning), pt (continued pre-training on plain text: the `text` column, "
                  "eos per text, packed into cutoff_len blocks, labels = inputs, as LLaMA-Factory), dpo (pairs of a "
                  "ranking dataset, pref_loss), kto (examples tagged by a kto_tag column), rm (a value head trained "
                  "on pairs); docs/preference.md")
          .choices({"sft", "pt", "dpo", "kto", "rm"},
                   "ppo (PPO generates responses in the training loop) is not implemented")
          .observe("losses"),
      implemented("finetuning_type", LF_FIELD(adapter, finetuning_type)).choices({"lora", "full", "freeze", "oft"})
          .observe("file:adapter_config.json"),
      implemented("freeze_trainable_layers", LF_FIELD(adapter, freeze_trainable_layers),
                  "freeze: the last N decoder layers train (N < 0: the first -N)")
          .observe("losses"),
      implemented("freeze_trainable_modules", LF_FIELD(adapter, freeze_trainable_modules),
                  "freeze: the modules of those layers that train (self_attn, mlp, q_proj, ... or all)")
          .check(not_empty)
          .sample("mlp")
          .observe("losses"),
      implemented("freeze_extra_modules", LF_FIELD(adapter, freeze_extra_modules),
                  "freeze: modules outside the layers that train too (embed_tokens, norm, lm_head)")
          .sample("norm")
          .observe("losses"),
      implemented("adapter_name_or_path", LF_FIELD(adapter, adapter_name_or_path),
                  "PEFT adapter folders: merged into the base in turn, the last one trained further unless "
                  "create_new_adapter (LoRA only)")
          .observe("losses"),
      implemented("create_new_adapter", LF_FIELD(adapter, create_new_adapter),
                  "with adapter_name_or_path: merge them all and train a new adapter")
          .observe("losses"),
      implemented("lora_rank", LF_FIELD(adapter, lora_rank)).check(positive)
          .observe("losses"),
      implemented("lora_alpha", LF_FIELD(adapter, lora_alpha), "unset: 2 × lora_rank (LLaMA-Factory's rule)")
          .check(non_negative)
          .differs("None: 2 × lora_rank, resolved after reading")
          .shown_default("2 × lora_rank")
          .observe("losses"),
      implemented("lora_dropout", LF_FIELD(adapter, lora_dropout)).check(in_range(0, 1, false))
          .observe("losses"),
      implemented("lora_target", LF_FIELD(adapter, lora_target), "`all` or module names (q_proj, v_proj, ...)")
          .check(not_empty)
          .sample("q_proj,v_proj")
          .observe("losses"),
      implemented("use_rslora", LF_FIELD(adapter, use_rslora), "scaling lora_alpha / sqrt(lora_rank) (rank-stabilised LoRA)")
          .observe("losses"),
      implemented("use_dora", LF_FIELD(adapter, use_dora),
                  "DoRA (weight-decomposed LoRA) as peft computes and saves it: a magnitude per output row beside A "
                  "and B")
          .observe("losses"),
      implemented("loraplus_lr_ratio", LF_FIELD(optim, loraplus_lr_ratio),
                  "LoRA+: lora_B matrices (and 1-D trainables) learn at learning_rate × this")
          .check(non_negative)
          .differs("None: off (0)")
          .observe("losses"),
      implemented("additional_target", LF_FIELD(adapter, additional_target),
                  "modules trained fully beside LoRA (embed_tokens, lm_head, norm), saved as peft's modules_to_save")
          .sample("norm")
          .observe("losses"),
  };
}

// The preference stages' keys (LLaMA-Factory's RLHFArguments): each acts only under its stage, which its
// sample context sets (tests/train/test_key_effects.py gives the stage its demo dataset).
std::vector<KeyDecl> preference_keys() {
  const std::string dpo = "stage: dpo", kto = "stage: kto";
  return {
      implemented("pref_beta", LF_FIELD(objective, pref_beta), "dpo, kto: the beta of the preference loss")
          .check(positive)
          .sample("0.5", dpo)
          .observe("losses"),
      implemented("pref_ftx", LF_FIELD(objective, pref_ftx), "dpo, kto: the SFT loss coefficient (on the chosen responses)")
          .check(non_negative)
          .sample("1.0", dpo)
          .observe("losses"),
      implemented("pref_loss", LF_FIELD(objective, pref_loss),
                  "dpo: sigmoid (DPO), hinge (SLiC), ipo, orpo and simpo (no reference model)")
          .choices({"sigmoid", "hinge", "ipo", "orpo", "simpo"},
                   "kto_pair was dropped by TRL (LLaMA-Factory 0.9.5's TRL stops with \"Unknown loss type\"): use stage: kto "
                   "on a dataset with a kto_tag column")
          .sample("ipo", dpo)
          .observe("losses"),
      implemented("dpo_label_smoothing", LF_FIELD(objective, dpo_label_smoothing),
                  "dpo sigmoid: cDPO's label smoothing, in [0, 0.5]")
          .check(in_range(0, 0.5, true))
          .sample("0.2", dpo)
          .observe("losses"),
      implemented("simpo_gamma", LF_FIELD(objective, simpo_gamma), "dpo simpo: the target reward margin")
          .sample("2.0", dpo + "\npref_loss: simpo")
          .observe("losses"),
      implemented("kto_chosen_weight", LF_FIELD(objective, kto_chosen_weight), "kto: the desirable examples' loss weight")
          .check(non_negative)
          .sample("3.0", kto)
          .observe("losses"),
      implemented("kto_rejected_weight", LF_FIELD(objective, kto_rejected_weight),
                  "kto: the undesirable examples' loss weight")
          .check(non_negative)
          .sample("3.0", kto)
          .observe("losses"),
  };
}

std::vector<KeyDecl> data_keys() {
  return {
      implemented("dataset", LF_FIELD(data, dataset), "names in `dataset_dir`/dataset_info.json")
          .observe("losses"),
      implemented("eval_dataset", LF_FIELD(data, eval_dataset))
          .observe("log:eval examples"),
      implemented("dataset_dir", LF_FIELD(data, dataset_dir))
          .observe("losses"),
      implemented("template", LF_FIELD(data, template_name))
          .observe("losses"),
      implemented("cutoff_len", LF_FIELD(data, cutoff_len)).check(positive)
          .observe("losses"),
      implemented("max_samples", LF_FIELD(data, max_samples))
          .observe("losses"),
      implemented("val_size", LF_FIELD(data, val_size), "a fraction (< 1) or a number of examples")
          .check(non_negative)
          .observe("log:eval examples"),
      implemented("train_on_prompt", LF_FIELD(data, train_on_prompt))
          .observe("losses"),
      implemented("mask_history", LF_FIELD(data, mask_history))
          .observe("losses"),
      implemented("packing", LF_FIELD(data, packing),
                  "sft: examples packed by greedy knapsack into rows of cutoff_len tokens (at most cutoff_len - 1 "
                  "of them examples), positions restarting with each, attention across them; pt: texts cut into "
                  "blocks of cutoff_len tokens (cutoff_len - 1 when set true). LLaMA-Factory's rules")
          .differs("None: off for sft, on for pt (LLaMA-Factory's rule)")
          .observe("losses"),
      implemented("neat_packing", LF_FIELD(data, neat_packing),
                  "packing without attention across the packed sequences (flash varlen attention on a GPU, a "
                  "block-diagonal causal mask elsewhere); implies packing, as LLaMA-Factory's")
          .observe("losses"),
      implemented("tokenized_path", LF_FIELD(data, tokenized_path), "a tokenized cache folder: written once, then loaded")
          .observe("file:../tokenized"),
      implemented("mix_strategy", LF_FIELD(data, mix_strategy))
          .choices({"concat", "interleave_under", "interleave_over"})
          .observe("losses"),
      implemented("interleave_probs", LF_FIELD(data, interleave_probs), "empty: round robin")
          .sample("1.0")
          .observe("losses"),
      implemented("default_system", LF_FIELD(data, default_system))
          .observe("losses"),
      implemented("tool_format", LF_FIELD(data, tool_format))
          .observe("losses"),
      implemented("enable_thinking", LF_FIELD(data, enable_thinking))
          .observe("losses"),
      implemented("preserve_thinking", LF_FIELD(data, preserve_thinking))
          .observe("losses"),
      implemented("preprocessing_batch_size", LF_FIELD(data, preprocessing_batch_size),
                  "packing groups examples within each batch of this many, as LLaMA-Factory does")
          .check(positive)
          .observe("losses"),
      implemented("preprocessing_num_workers", LF_FIELD(data, preprocessing_num_workers),
                  "tokenizer threads (0: all cores); the result does not depend on it")
          .differs("None: all cores (0)")
          .observe("log:tokenizer threads"),
      implemented("invalid_records", LF_FIELD(data, invalid_records),
                  "lf-train's own: records no training example can be made of (an alpaca `output` that is null or "
                  "not a string, a Parquet null cell there) are dropped as LLaMA-Factory drops them, with one warning "
                  "counting them by cause and file:line (warn), or stop the job (error)")
          .own()
          .choices({"warn", "error"})
          .observe("refused"),
  };
}

KeyDecl disable_gradient_checkpointing() {
  KeyDecl d;
  d.name = "disable_gradient_checkpointing";
  d.policy = KeyPolicy::kImplemented;
  d.field = "model.gradient_checkpointing";
  d.type = "bool";
  d.note = "LLaMA-Factory checkpoints every decoder layer unless this is true";
  d.sample = "true";
  d.observable = "log:gradient checkpointing";
  d.read = [](const Reader& r, JobPlan& c) {
    if (!r.has("disable_gradient_checkpointing")) return;
    bool disable = false;
    r.read("disable_gradient_checkpointing", disable, "true or false");
    c.model.gradient_checkpointing = !disable;
  };
  d.show = [](const JobPlan& c) { return show_value(!c.model.gradient_checkpointing); };
  return d;
}

std::vector<KeyDecl> optimisation_keys() {
  return {
      implemented("per_device_train_batch_size", LF_FIELD(schedule, per_device_train_batch_size)).check(positive)
          .observe("losses"),
      implemented("per_device_eval_batch_size", LF_FIELD(eval, per_device_eval_batch_size)).check(positive)
          .observe("eval"),
      implemented("gradient_accumulation_steps", LF_FIELD(schedule, gradient_accumulation_steps)).check(positive)
          .observe("losses"),
      implemented("learning_rate", LF_FIELD(optim, learning_rate)).check(torch_rule("learning rate", 0, kNoLimit))
          .observe("losses"),
      implemented("lr_scheduler_type", LF_FIELD(schedule, lr_scheduler_type))
          .choices({"linear", "cosine", "constant", "constant_with_warmup"})
          .observe("lr"),
      implemented("warmup_ratio", LF_FIELD(schedule, warmup_ratio))
          .check(in_range(0, 1, true))
          .differs("None (transformers 5: warmup_steps took over): no warmup")
          .observe("lr"),
      implemented("warmup_steps", LF_FIELD(schedule, warmup_steps), ">= 1: steps, wins over warmup_ratio; in (0, 1): a ratio")
          .check(non_negative)
          .observe("lr"),
      implemented("num_train_epochs", LF_FIELD(schedule, num_train_epochs)).check(non_negative)
          .observe("log_entries"),
      implemented("max_steps", LF_FIELD(schedule, max_steps), "> 0 wins over num_train_epochs")
          .observe("log_entries"),
      implemented("weight_decay", LF_FIELD(optim, weight_decay), "not on biases and norm weights (HF's rule)")
          .check(torch_rule("weight_decay value", 0, kNoLimit))
          .observe("losses"),
      implemented("adam_beta1", LF_FIELD(optim, adam_beta1)).check(torch_rule("beta parameter at index 0", 0, 1))
          .observe("losses"),
      implemented("adam_beta2", LF_FIELD(optim, adam_beta2)).check(torch_rule("beta parameter at index 1", 0, 1))
          .observe("losses"),
      implemented("adam_epsilon", LF_FIELD(optim, adam_epsilon)).check(torch_rule("epsilon value", 0, kNoLimit))
          .observe("losses"),
      implemented("max_grad_norm", LF_FIELD(optim, max_grad_norm), "clipping on the global norm; 0: none")
          .check(non_negative)
          .observe("losses"),
      implemented("bf16", LF_FIELD(precision, bf16))
          .observe("losses"),
      implemented("fp16", LF_FIELD(precision, fp16), "with a dynamic loss scaler (torch's GradScaler)")
          .observe("refused"),
      implemented("pure_bf16", LF_FIELD(precision, pure_bf16),
                  "the trainable weights kept in the checkpoint's dtype (bf16 for the usual checkpoint) and trained "
                  "so: no fp32 master weights, gradients and AdamW moments in that dtype, no autocast "
                  "(LLaMA-Factory's pure_bf16; one process and DDP)")
          .observe("losses"),
      implemented("seed", LF_TOP_FIELD(seed), "the example order and every rank's dropout")
          .observe("losses"),
      disable_gradient_checkpointing(),
      implemented("gradient_checkpointing", LF_FIELD(model, gradient_checkpointing), "wins over disable_gradient_checkpointing")
          .differs("False in HF; LLaMA-Factory checkpoints unless disable_gradient_checkpointing: true")
          .observe("log:gradient checkpointing"),
  };
}

std::vector<KeyDecl> eval_and_output_keys() {
  // HF's TrainingArguments turn true / false into all / no.
  KeyDecl tokens_seen = implemented("include_num_input_tokens_seen", LF_FIELD(logging, include_num_input_tokens_seen),
                                    "the input tokens counted over every rank: all (or true), non_padding, no")
                            .choices({"no", "all", "non_padding"})
          .observe("tokens");
  tokens_seen.read = [](const Reader& r, JobPlan& c) {
    r.read("include_num_input_tokens_seen", c.logging.include_num_input_tokens_seen,
           "no, all, non_padding, true or false");
    std::string& v = c.logging.include_num_input_tokens_seen;
    if (v == "true" || v == "True") v = "all";
    if (v == "false" || v == "False") v = "no";
  };
  return {
      implemented("eval_strategy", LF_FIELD(eval, eval_strategy)).choices({"no", "steps", "epoch"}).sample("steps", "val_size: 0.1")
          .observe("eval"),
      implemented("eval_steps", LF_FIELD(eval, eval_steps), "unset: logging_steps (HF); < 1: a fraction of the steps")
          .check(positive_when_set)
          .observe("eval"),
      implemented("logging_steps", LF_FIELD(logging, logging_steps), "< 1: a fraction of the steps").check(positive)
          .observe("log_entries"),
      implemented("save_strategy", LF_FIELD(output, save_strategy)).choices({"no", "steps", "epoch"})
          .observe("file:checkpoint-*"),
      implemented("save_steps", LF_FIELD(output, save_steps)).check(positive)
          .observe("file:checkpoint-*"),
      implemented("save_total_limit", LF_FIELD(output, save_total_limit)).check(positive_when_set)
          .observe("file:checkpoint-*"),
      implemented("plot_loss", LF_FIELD(output, plot_loss), "writes training_loss.png")
          .observe("file:training_loss.png"),
      implemented("output_dir", LF_FIELD(output, output_dir)).differs("None: trainer_output (HF's)")
          .observe("outdir"),
      implemented("overwrite_output_dir", LF_FIELD(output, overwrite_output_dir),
                  "false: resume from the last checkpoint in output_dir")
          .observe("log:resuming"),
      implemented("resume_from_checkpoint", LF_FIELD(output, resume_from_checkpoint),
                  "a checkpoint folder, or true: the last one in output_dir")
          .observe("log:resuming"),
      implemented("report_to", LF_FIELD(logging, report_to),
                  "tensorboard (or all): TensorBoard event files under output_dir/runs/, the scalars of "
                  "trainer_log.jsonl; wandb, mlflow and the other integrations: one info line, no effect (nothing "
                  "reaches their services from here)")
          .sample("tensorboard")
          .differs("'none': the empty list")
          .observe("file:runs"),
      std::move(tokens_seen),
  };
}

std::vector<KeyDecl> distribution_keys() {
  return {
      implemented("ddp_bucket_cap_mb", LF_FIELD(parallel, ddp_bucket_cap_mb), "DDP's gradient buckets (a 1 MiB first one)")
          .check(positive)
          .differs("None: 25, torch DDP's default")
          .observe("log:gradient buckets", 2),
      implemented("ddp_reduce_dtype", LF_FIELD(parallel, ddp_reduce_dtype),
                  "lf-train's own: the dtype gradients travel in over the all-reduce (bf16 halves the bytes)")
          .own()
          .choices({"fp32", "bf16"})
          .observe("losses", 2),
      implemented("expert_model_parallel_size", LF_FIELD(parallel, expert_parallel_size),
                  "LLaMA-Factory's Megatron (mcore) key: mixture-of-experts models, each sparse layer's experts "
                  "placed over this many ranks (E / size each), tokens sent to their experts' ranks and back by "
                  "all-to-all; the expert weights' gradients stay with their owner, the other parameters train "
                  "data-parallel. Equal to the world size, zero_stage 0 (docs/training.md, mixture of experts)")
          .own()
          .check(positive)
          .sample("2")
          .observe("log:expert parallel over 2 ranks", 2),
      sharding_key("zero_stage", "0|1|2|3",
                   "lf-train's own: 0 data parallel (DDP), 1 optimizer state sharded, 2 + gradients, 3 + parameters",
                   true, "0", "log:ZeRO-", "2"),
      sharding_key("offload", "none|optimizer|params",
                   "lf-train's own: optimizer (its state and step on the CPU) or params (parameters too); needs "
                   "zero_stage 2 or 3 (params: 3)",
                   true, "none", "log:in host memory", "optimizer", "zero_stage: 2"),
      sharding_key("offload_ratio", "number in (0, 1]",
                   "lf-train's own (DeepSpeed's offload_optimizer.ratio): the share of the trainable parameters whose "
                   "optimizer state and step go to the host, whole units from the head down; the rest stay on the GPU "
                   "(16 bytes a parameter there) and step there",
                   true, "1.0", "log:offload_ratio", "0.5", "offload: optimizer\nzero_stage: 3"),
      // The test that every implemented key is read gives these a file (a sample here would need one).
      sharding_key("deepspeed", "path or mapping",
                   "a DeepSpeed JSON (LLaMA-Factory's examples/deepspeed/*.json work as they are): see the DeepSpeed "
                   "table",
                   false, "null", "log:ZeRO-"),
      sharding_key("fsdp", "text or list", "HF's FSDP options: full_shard (stage 3), shard_grad_op (stage 2), offload",
                   false, "null", "log:ZeRO-", "full_shard auto_wrap"),
      sharding_key("fsdp_config", "mapping or path", "HF's fsdp_config (used only with `fsdp`): see the FSDP table",
                   false, "null", "log:ZeRO-", "{reshard_after_forward: false}", "fsdp: true"),
  };
}

std::vector<KeyDecl> refused_keys() {
  return {
      refused("loraplus_lr_embedding", "LoRA+ on embedding adapters is not supported (no LoRA embedding adapters)"),
      refused("freeze_vision_tower", "multimodal training is not supported"),
      refused("neftune_noise_alpha", "NEFTune noise is not supported"),
      refused("rope_scaling", "changing the RoPE scaling of the checkpoint is not supported"),
      refused("shift_attn", "shift short attention (LongLoRA) is not supported"),
      refused("mixture_of_depths",
              "mixture of depths is not implemented: LLaMA-Factory hands it to the `mixture-of-depth` package "
              "(check_version mixture-of-depth>=1.1.6, mandatory), whose apply_mod_to_hf adds a router to each decoder "
              "layer (`convert`, model types bloom, falcon, gemma, llama, mistral, mixtral, phi, starcoder2 only: "
              "\"Current model is not supported by mixture-of-depth\") or loads an MoD checkpoint (`load`); lf-train's "
              "layers have no router, and a run without one would train another model: remove mixture_of_depths"),
      refused("train_from_scratch", "use `init_weights: random` (lf-train's key) to train from a config.json alone"),
      refused("resize_vocab", "resizing the vocabulary is not supported"),
      refused("new_special_tokens_config", "adding special tokens is not supported"),
      refused("add_tokens", "adding tokens is not supported"),
      refused("add_special_tokens", "adding special tokens is not supported"),
      refused("split_special_tokens", "split_special_tokens changes tokenisation and is not supported"),

      refused("streaming", "streaming datasets are not supported"),
      refused("label_smoothing_factor", "label smoothing is not supported"),
      refused("lr_scheduler_kwargs", "scheduler arguments are not supported"),
      refused("train_sampling_strategy",
              "each epoch is one permutation from `seed` (HF's random sampler); group_by_length and sequential "
              "change the example order"),
      refused("dataloader_drop_last", "dropping the last batch is not supported"),
      refused("data_seed", "a separate data seed is not supported: the order comes from `seed`"),
      refused("average_tokens_across_devices", "lf-train always normalises the loss over every target token of the step"),
      refused("disable_shuffling", "an unshuffled example order is not supported (each epoch is a permutation from `seed`)"),
      refused("ignore_pad_token_for_loss", "training on pad tokens is not supported"),
      refused("load_best_model_at_end", "keeping the best checkpoint instead of the last is not supported"),
      refused("early_stopping_steps", "early stopping is not supported"),
      refused("use_cpu", "lf-train trains on the GPUs it sees; to train on the CPU, hide them: CUDA_VISIBLE_DEVICES= "
                         "lf-train ..."),
      refused("ignore_data_skip", "lf-train always resumes at the exact example of the checkpoint's cursor; skipping "
                                  "none would train on other examples than the uninterrupted run"),
      // transformers 4.x's TrainingArguments (LLaMA-Factory 0.9.5 allows 4.55 to 5.6; issue 34).
      refused("group_by_length", "grouping examples by length changes the example order (each epoch is one permutation "
                                 "from `seed`, HF's random sampler); remove group_by_length"),
      refused("adafactor", "the Adafactor optimizer (transformers 4.x's `adafactor: true`) is not implemented; remove it"),
      refused("per_gpu_train_batch_size", "transformers 4.x's deprecated alias: use per_device_train_batch_size"),
      refused("per_gpu_eval_batch_size", "transformers 4.x's deprecated alias: use per_device_eval_batch_size"),
      refused("no_cuda", "lf-train trains on the GPUs it sees; to train on the CPU, hide them: CUDA_VISIBLE_DEVICES= "
                         "lf-train ..."),
  };
}

// The no-effect keys whose reason is worth saying: each leaves what is trained unchanged (the
// key-effect test sets them all and requires the losses bit-equal).
std::vector<KeyDecl> no_effect_keys() {
  return {
      no_effect("upcast_layernorm", "lf-train's norms always compute in fp32"),
      no_effect("upcast_lmhead_output", "lf-train's loss always computes the logits' softmax in fp32"),
      no_effect("tf32", "lf-train's fp32 matrix products stay fp32 (a speed setting of HF on Ampere and newer)"),
      no_effect("fsdp_transformer_layer_cls_to_wrap",
                "lf-train wraps its own layers: each decoder layer is one sharding unit (`lf-train plan` lists them)"),
      no_effect("fsdp_min_num_params", "lf-train wraps its own layers: each decoder layer is one sharding unit"),
      no_effect("ray_num_workers", "LLaMA-Factory reads it only under USE_RAY=1 (a Ray cluster, which lf-train refuses): "
                                   "lf-train's workers are NPROC_PER_NODE per node"),
      no_effect("save_safetensors", "lf-train always writes safetensors (transformers 5 always does)"),
      no_effect("auto_find_batch_size", "HF retries with a smaller batch after an out-of-memory error; lf-train stops "
                                        "with the error (`lf-train plan` predicts the memory first)"),
  };
}

std::vector<KeyDecl> build_schema() {
  std::vector<KeyDecl> all;
  for (auto part : {model_keys(), method_keys(), pissa_and_llama_pro_keys(), oft_keys(), preference_keys(), sft_loss_keys(),
                    data_keys(), optimisation_keys(), eval_and_output_keys(), distribution_keys(), optimizer_keys(),
                    quantization_keys(), reference_keys(), predict_keys(), fp8_keys(), refused_keys(), no_effect_keys()})
    for (auto& d : part) all.push_back(std::move(d));
  return all;
}

}  // namespace

const std::vector<KeyDecl>& config_schema() {
  static const std::vector<KeyDecl> schema = build_schema();
  return schema;
}

const KeyDecl* find_decl(std::string_view name) {
  const auto& s = config_schema();
  auto it = std::find_if(s.begin(), s.end(), [&](const KeyDecl& d) { return d.name == name; });
  return it == s.end() ? nullptr : &*it;
}

KeyPolicy key_policy(std::string_view name) {
  const KeyDecl* d = find_decl(name);
  return d ? d->policy : KeyPolicy::kNoEffect;
}

std::string default_text(const KeyDecl& d) {
  if (!d.default_text.empty() || !d.show) return d.default_text;
  return d.show(JobPlan{});
}

void check_choice(const Reader& r, const std::string& key, const std::string& value,
                  const std::vector<std::string>& allowed, const std::string& hint) {
  if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return;
  LF_THROW(ConfigError, "{}: `{}: {}` is not supported; lf-train supports {}{}", r.where(key), key, value,
           fmt::join(allowed, ", "), hint.empty() ? "" : ". " + hint);
}

}  // namespace lf::config
