#include "config_schema.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "schema_builders.h"

namespace lf::config {

namespace {

using namespace schema;

KeyDecl refused(std::string name, std::string reason) {
  KeyDecl d;
  d.name = std::move(name);
  d.policy = KeyPolicy::kRefused;
  d.note = std::move(reason);
  return d;
}

// Keys whose accepted values describe what lf-train always does: no field to set.
KeyDecl only_values(std::string name, std::vector<std::string> allowed, std::string note) {
  KeyDecl d;
  d.name = std::move(name);
  d.policy = KeyPolicy::kOnlyValues;
  d.note = std::move(note);
  d.type = "text";
  d.choices = std::move(allowed);
  d.check = [key = d.name, allowed = d.choices](const Reader& r, const TrainConfig&) {
    if (r.has(key)) check_choice(r, key, r.text(key), allowed, "");
  };
  return d;
}

// The sharding keys are read together (sharding.cpp), after every other key: their
// `read` is that step, so here they only say what they are.
KeyDecl sharding_key(std::string name, std::string type, std::string note, bool own, std::string default_text,
                     std::string sample = "", std::string sample_context = "") {
  KeyDecl d;
  d.name = std::move(name);
  d.policy = KeyPolicy::kImplemented;
  d.own = own;
  d.type = std::move(type);
  d.note = std::move(note);
  d.default_text = std::move(default_text);
  d.sample = std::move(sample);
  d.sample_context = std::move(sample_context);
  d.field = "zero_stage";
  d.show = [](const TrainConfig& c) {
    return fmt::format("zero_stage {}, offload {} (ratio {}) ({})", c.zero_stage, c.offload, c.offload_ratio,
                       c.sharding_source);
  };
  return d;
}

std::vector<KeyDecl> model_and_method_keys() {
  return {
      implemented("model_name_or_path", LF_FIELD(model_name_or_path),
                  "a local folder with config.json (and weights unless `init_weights: random`); lf-train never "
                  "downloads")
          .data(LF_DATA(model_name_or_path)),
      implemented("init_weights", LF_FIELD(init_weights),
                  "lf-train's own: auto (the folder's safetensors; random from config.json when the folder holds "
                  "none, said in one line), pretrained (weights required), random (the folder's weights ignored, "
                  "said in one line; benchmarks)")
          .own()
          .choices({"auto", "pretrained", "random"}),
      implemented("stage", LF_FIELD(stage),
                  "sft (supervised fine-tuning) or pt (continued pre-training on plain text: the `text` column, "
                  "eos per text, packed into cutoff_len blocks, labels = inputs, as LLaMA-Factory)")
          .choices({"sft", "pt"}, "Other stages (rm, ppo, dpo, kto: reward models and preference training) are not "
                                  "implemented")
          .data(LF_DATA(stage)),
      implemented("finetuning_type", LF_FIELD(finetuning_type)).choices({"lora", "full", "freeze"}),
      implemented("freeze_trainable_layers", LF_FIELD(freeze_trainable_layers),
                  "freeze: the last N decoder layers train (N < 0: the first -N)"),
      implemented("freeze_trainable_modules", LF_FIELD(freeze_trainable_modules),
                  "freeze: the modules of those layers that train (self_attn, mlp, q_proj, ... or all)")
          .check(not_empty)
          .sample("mlp"),
      implemented("freeze_extra_modules", LF_FIELD(freeze_extra_modules),
                  "freeze: modules outside the layers that train too (embed_tokens, norm, lm_head)")
          .sample("norm"),
      implemented("adapter_name_or_path", LF_FIELD(adapter_name_or_path),
                  "PEFT adapter folders: merged into the base in turn, the last one trained further unless "
                  "create_new_adapter (LoRA only)"),
      implemented("create_new_adapter", LF_FIELD(create_new_adapter),
                  "with adapter_name_or_path: merge them all and train a new adapter"),
      implemented("lora_rank", LF_FIELD(lora_rank)).check(positive),
      implemented("lora_alpha", LF_FIELD(lora_alpha), "unset: 2 × lora_rank (LLaMA-Factory's rule)")
          .differs("None: 2 × lora_rank, resolved after reading")
          .shown_default("2 × lora_rank"),
      implemented("lora_dropout", LF_FIELD(lora_dropout)).check(in_range(0, 1, false)),
      implemented("lora_target", LF_FIELD(lora_target), "`all` or module names (q_proj, v_proj, ...)")
          .check(not_empty)
          .sample("q_proj,v_proj"),
      implemented("use_rslora", LF_FIELD(use_rslora), "scaling lora_alpha / sqrt(lora_rank) (rank-stabilised LoRA)"),
      implemented("use_dora", LF_FIELD(use_dora),
                  "DoRA (weight-decomposed LoRA) as peft computes and saves it: a magnitude per output row beside A "
                  "and B"),
      implemented("loraplus_lr_ratio", LF_FIELD(loraplus_lr_ratio),
                  "LoRA+: lora_B matrices (and 1-D trainables) learn at learning_rate × this")
          .check(non_negative)
          .differs("None: off (0)"),
      implemented("additional_target", LF_FIELD(additional_target),
                  "modules trained fully beside LoRA (embed_tokens, lm_head, norm), saved as peft's modules_to_save")
          .sample("norm"),
  };
}

std::vector<KeyDecl> data_keys() {
  return {
      implemented("dataset", LF_FIELD(dataset), "names in `dataset_dir`/dataset_info.json").data(LF_DATA(dataset)),
      implemented("eval_dataset", LF_FIELD(eval_dataset)).data(LF_DATA(eval_dataset)),
      implemented("dataset_dir", LF_FIELD(dataset_dir)).data(LF_DATA(dataset_dir)),
      implemented("template", &TrainConfig::template_name, "template_name").data(LF_DATA(template_name)),
      implemented("cutoff_len", LF_FIELD(cutoff_len)).check(positive).data(LF_DATA(cutoff_len)),
      implemented("max_samples", LF_FIELD(max_samples)).data(LF_DATA(max_samples)),
      implemented("val_size", LF_FIELD(val_size), "a fraction (< 1) or a number of examples")
          .check(non_negative)
          .data(LF_DATA(val_size)),
      implemented("train_on_prompt", LF_FIELD(train_on_prompt)).data(LF_DATA(train_on_prompt)),
      implemented("mask_history", LF_FIELD(mask_history)).data(LF_DATA(mask_history)),
      implemented("packing", LF_FIELD(packing))
          .data(LF_DATA(packing))
          .differs("None: off for sft, on for pt (LLaMA-Factory's rule)"),
      implemented("neat_packing", LF_FIELD(neat_packing),
                  "packing without attention across the packed sequences (per-sequence positions; flash varlen "
                  "attention on a GPU, a block-diagonal causal mask elsewhere); implies packing, as LLaMA-Factory's")
          .data(LF_DATA(neat_packing)),
      implemented("tokenized_path", LF_FIELD(tokenized_path), "a tokenized cache folder: written once, then loaded")
          .data(LF_DATA(tokenized_path)),
      implemented("mix_strategy", LF_FIELD(mix_strategy))
          .choices({"concat", "interleave_under", "interleave_over"})
          .data(LF_DATA(mix_strategy)),
      implemented("interleave_probs", LF_FIELD(interleave_probs), "empty: round robin")
          .data(LF_DATA(interleave_probs))
          .sample("1.0"),
      implemented("default_system", LF_FIELD(default_system)).data(LF_DATA(default_system)),
      implemented("tool_format", LF_FIELD(tool_format)).data(LF_DATA(tool_format)),
      implemented("enable_thinking", LF_FIELD(enable_thinking)).data(LF_DATA(enable_thinking)),
      implemented("preserve_thinking", LF_FIELD(preserve_thinking)).data(LF_DATA(preserve_thinking)),
      implemented("preprocessing_batch_size", LF_FIELD(preprocessing_batch_size),
                  "packing groups examples within each batch of this many, as LLaMA-Factory does")
          .check(positive)
          .data(LF_DATA(preprocessing_batch_size)),
      implemented("preprocessing_num_workers", LF_FIELD(preprocessing_num_workers),
                  "tokenizer threads (0: all cores); the result does not depend on it")
          .data(LF_DATA(preprocessing_num_workers))
          .differs("None: all cores (0)"),
  };
}

KeyDecl disable_gradient_checkpointing() {
  KeyDecl d;
  d.name = "disable_gradient_checkpointing";
  d.policy = KeyPolicy::kImplemented;
  d.field = "gradient_checkpointing";
  d.type = "bool";
  d.note = "LLaMA-Factory checkpoints every decoder layer unless this is true";
  d.sample = "true";
  d.read = [](const Reader& r, TrainConfig& c) {
    if (!r.has("disable_gradient_checkpointing")) return;
    bool disable = false;
    r.read("disable_gradient_checkpointing", disable, "true or false");
    c.gradient_checkpointing = !disable;
  };
  d.show = [](const TrainConfig& c) { return show_value(!c.gradient_checkpointing); };
  return d;
}

std::vector<KeyDecl> optimisation_keys() {
  return {
      implemented("per_device_train_batch_size", LF_FIELD(per_device_train_batch_size)).check(positive),
      implemented("per_device_eval_batch_size", LF_FIELD(per_device_eval_batch_size)).check(positive),
      implemented("gradient_accumulation_steps", LF_FIELD(gradient_accumulation_steps)).check(positive),
      implemented("learning_rate", LF_FIELD(learning_rate)).check(positive),
      implemented("lr_scheduler_type", LF_FIELD(lr_scheduler_type))
          .choices({"linear", "cosine", "constant", "constant_with_warmup"}),
      implemented("warmup_ratio", LF_FIELD(warmup_ratio))
          .check(in_range(0, 1, true))
          .differs("None (transformers 5: warmup_steps took over): no warmup"),
      implemented("warmup_steps", LF_FIELD(warmup_steps), ">= 1: steps, wins over warmup_ratio; in (0, 1): a ratio"),
      implemented("num_train_epochs", LF_FIELD(num_train_epochs)),
      implemented("max_steps", LF_FIELD(max_steps), "> 0 wins over num_train_epochs"),
      implemented("weight_decay", LF_FIELD(weight_decay), "not on biases and norm weights (HF's rule)"),
      implemented("adam_beta1", LF_FIELD(adam_beta1)),
      implemented("adam_beta2", LF_FIELD(adam_beta2)),
      implemented("adam_epsilon", LF_FIELD(adam_epsilon)),
      implemented("max_grad_norm", LF_FIELD(max_grad_norm), "clipping on the global norm; 0: none")
          .check(non_negative),
      implemented("bf16", LF_FIELD(bf16)),
      implemented("fp16", LF_FIELD(fp16), "with a dynamic loss scaler (torch's GradScaler)"),
      implemented("seed", LF_FIELD(seed), "the example order and every rank's dropout").data(LF_DATA(seed)),
      disable_gradient_checkpointing(),
      implemented("gradient_checkpointing", LF_FIELD(gradient_checkpointing), "wins over disable_gradient_checkpointing")
          .differs("False in HF; LLaMA-Factory checkpoints unless disable_gradient_checkpointing: true"),
      only_values("optim", {"adamw_torch", "adamw_torch_fused", "adamw_hf"},
                  "lf-train's AdamW (HF's defaults) is all three"),
  };
}

std::vector<KeyDecl> eval_and_output_keys() {
  KeyDecl do_train;
  do_train.name = "do_train";
  do_train.policy = KeyPolicy::kOnlyValues;
  do_train.type = "bool";
  do_train.choices = {"true"};
  do_train.note = "lf-train only trains";
  do_train.check = [](const Reader& r, const TrainConfig&) {
    if (!r.has("do_train")) return;
    bool v = true;
    r.read("do_train", v, "true or false");
    LF_CHECK(v, ConfigError, "{}: `do_train: false` asks for no training; lf-train only trains", r.where("do_train"));
  };
  // HF's TrainingArguments turn true / false into all / no.
  KeyDecl tokens_seen = implemented("include_num_input_tokens_seen", LF_FIELD(include_num_input_tokens_seen),
                                    "the input tokens counted over every rank: all (or true), non_padding, no")
                            .choices({"no", "all", "non_padding"});
  tokens_seen.read = [](const Reader& r, TrainConfig& c) {
    r.read("include_num_input_tokens_seen", c.include_num_input_tokens_seen, "no, all, non_padding, true or false");
    std::string& v = c.include_num_input_tokens_seen;
    if (v == "true" || v == "True") v = "all";
    if (v == "false" || v == "False") v = "no";
  };
  return {
      implemented("eval_strategy", LF_FIELD(eval_strategy)).choices({"no", "steps", "epoch"}).sample("steps", "val_size: 0.1"),
      implemented("eval_steps", LF_FIELD(eval_steps), "unset: logging_steps (HF); < 1: a fraction of the steps"),
      implemented("logging_steps", LF_FIELD(logging_steps), "< 1: a fraction of the steps").check(positive),
      implemented("save_strategy", LF_FIELD(save_strategy)).choices({"no", "steps", "epoch"}),
      implemented("save_steps", LF_FIELD(save_steps)).check(positive),
      implemented("save_total_limit", LF_FIELD(save_total_limit)),
      implemented("plot_loss", LF_FIELD(plot_loss), "writes training_loss.png"),
      implemented("output_dir", LF_FIELD(output_dir)).differs("None: trainer_output (HF's)"),
      implemented("overwrite_output_dir", LF_FIELD(overwrite_output_dir),
                  "false: resume from the last checkpoint in output_dir"),
      implemented("resume_from_checkpoint", LF_FIELD(resume_from_checkpoint),
                  "a checkpoint folder, or true: the last one in output_dir"),
      implemented("report_to", LF_FIELD(report_to),
                  "tensorboard (or all): TensorBoard event files under output_dir/runs/, the scalars of "
                  "trainer_log.jsonl; wandb, mlflow and the other integrations: one info line, no effect (nothing "
                  "reaches their services from here)")
          .sample("tensorboard")
          .differs("'none': the empty list"),
      std::move(tokens_seen),
      std::move(do_train),
  };
}

std::vector<KeyDecl> distribution_keys() {
  return {
      implemented("ddp_bucket_cap_mb", LF_FIELD(ddp_bucket_cap_mb), "DDP's gradient buckets (a 1 MiB first one)")
          .check(positive)
          .differs("None: 25, torch DDP's default"),
      implemented("ddp_reduce_dtype", LF_FIELD(ddp_reduce_dtype),
                  "lf-train's own: the dtype gradients travel in over the all-reduce (bf16 halves the bytes)")
          .own()
          .choices({"fp32", "bf16"}),
      sharding_key("zero_stage", "0|1|2|3",
                   "lf-train's own: 0 data parallel (DDP), 1 optimizer state sharded, 2 + gradients, 3 + parameters",
                   true, "0", "2"),
      sharding_key("offload", "none|optimizer|params",
                   "lf-train's own: optimizer (its state and step on the CPU) or params (parameters too); needs "
                   "zero_stage 2 or 3 (params: 3)",
                   true, "none", "optimizer", "zero_stage: 2"),
      sharding_key("offload_ratio", "number in (0, 1]",
                   "lf-train's own (DeepSpeed's offload_optimizer.ratio): the share of the trainable parameters whose "
                   "optimizer state and step go to the host, whole units from the head down; the rest stay on the GPU "
                   "(16 bytes a parameter there) and step there",
                   true, "1.0", "0.5", "offload: optimizer\nzero_stage: 3"),
      // The test that every implemented key is read gives these a file (a sample here would need one).
      sharding_key("deepspeed", "path or mapping",
                   "a DeepSpeed JSON (LLaMA-Factory's examples/deepspeed/*.json work as they are): see the DeepSpeed "
                   "table",
                   false, "null"),
      sharding_key("fsdp", "text or list", "HF's FSDP options: full_shard (stage 3), shard_grad_op (stage 2), offload",
                   false, "null", "full_shard auto_wrap"),
      sharding_key("fsdp_config", "mapping or path", "HF's fsdp_config (used only with `fsdp`): see the FSDP table",
                   false, "null", "{reshard_after_forward: false}", "fsdp: true"),
  };
}

std::vector<KeyDecl> refused_keys() {
  return {
      refused("quantization_bit", "quantized (QLoRA) training is not supported: remove quantization_bit"),
      refused("quantization_method", "quantized training is not supported"),
      refused("double_quantization", "quantized training is not supported"),
      refused("pissa_init", "PiSSA initialisation is not supported"),
      refused("pissa_convert", "PiSSA is not supported"),
      refused("loraplus_lr_embedding", "LoRA+ on embedding adapters is not supported (no LoRA embedding adapters)"),
      refused("use_galore", "GaLore is not supported"),
      refused("use_apollo", "APOLLO is not supported"),
      refused("use_badam", "BAdam is not supported"),
      refused("use_muon", "the Muon optimizer is not supported"),
      refused("use_adam_mini", "Adam-mini is not supported"),
      refused("use_llama_pro", "LLaMA Pro block expansion is not supported"),
      refused("freeze_vision_tower", "multimodal training is not supported"),
      refused("neftune_noise_alpha", "NEFTune noise is not supported"),
      refused("rope_scaling", "changing the RoPE scaling of the checkpoint is not supported"),
      refused("shift_attn", "shift short attention (LongLoRA) is not supported"),
      refused("mixture_of_depths", "mixture of depths is not supported"),
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
      refused("do_predict", "prediction runs are not supported (training only)"),
      refused("predict_with_generate", "prediction runs are not supported (training only)"),
      refused("pure_bf16", "pure bf16 training (no fp32 master weights) is not supported: use bf16: true"),
      refused("disable_shuffling", "an unshuffled example order is not supported (each epoch is a permutation from `seed`)"),
      refused("use_dft_loss", "the DFT loss is not supported"),
      refused("use_eaft_loss", "the EAFT loss is not supported"),
      refused("ignore_pad_token_for_loss", "training on pad tokens is not supported"),
      refused("load_best_model_at_end", "keeping the best checkpoint instead of the last is not supported"),
      refused("early_stopping_steps", "early stopping is not supported"),
  };
}

std::vector<KeyDecl> build_schema() {
  std::vector<KeyDecl> all;
  for (auto part : {model_and_method_keys(), data_keys(), optimisation_keys(), eval_and_output_keys(),
                    distribution_keys(), refused_keys()})
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
  return d.show(TrainConfig{});
}

void check_choice(const Reader& r, const std::string& key, const std::string& value,
                  const std::vector<std::string>& allowed, const std::string& hint) {
  if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return;
  LF_THROW(ConfigError, "{}: `{}: {}` is not supported; lf-train supports {}{}", r.where(key), key, value,
           fmt::join(allowed, ", "), hint.empty() ? "" : ". " + hint);
}

}  // namespace lf::config
