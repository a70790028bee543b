#pragma once
// The training config: a LLaMA-Factory YAML (+ `key=value` overrides) parsed
// into typed fields with LLaMA-Factory's defaults and validated before
// anything heavy starts. Every key LLaMA-Factory / HF TrainingArguments
// accepts is known (src/config/llamafactory_keys.tsv, generated): implemented
// here, accepted with a warning when it has no effect, or refused with a
// ConfigError when ignoring it would change the result. Unknown keys are a
// ConfigError with a did-you-mean. Torch-free: used by lf-train and lf-worker.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace lf::config {

struct TrainConfig {
  // ---- model
  std::string model_name_or_path;
  // LoRA: adapters merged into the base in turn, the last one trained on unless create_new_adapter
  // (then a new adapter on top of them all), as LLaMA-Factory does.
  std::vector<std::string> adapter_name_or_path;
  bool create_new_adapter = false;
  // lf-train: auto (the folder's weights; random when it holds none) | pretrained | random
  // (lf/model/initial_weights.h).
  std::string init_weights = "auto";
  // ---- method
  std::string stage = "sft";
  std::string finetuning_type = "lora";  // lora | full | freeze
  // freeze (LLaMA-Factory's _setup_freeze_tuning, model/freeze.h):
  int64_t freeze_trainable_layers = 2;                      // the last N layers (N < 0: the first -N)
  std::vector<std::string> freeze_trainable_modules = {"all"};
  std::vector<std::string> freeze_extra_modules;
  int64_t lora_rank = 8;
  double lora_alpha = 0;  // 0 in the YAML means unset: resolved to 2 x lora_rank
  double lora_dropout = 0;
  std::vector<std::string> lora_target = {"all"};
  std::vector<std::string> additional_target;  // peft's modules_to_save: trained fully beside LoRA
  bool use_rslora = false;        // scaling lora_alpha / sqrt(lora_rank) (peft's rank-stabilised LoRA)
  bool use_dora = false;          // DoRA: peft's weight-decomposed LoRA (magnitude + direction, model/dora.h)
  double loraplus_lr_ratio = 0;  // LoRA+: lora_B learns at learning_rate x this (unset / 0: off)
  // ---- data
  std::vector<std::string> dataset;
  std::vector<std::string> eval_dataset;
  std::string dataset_dir = "data";
  std::string template_name;  // YAML key `template`
  int64_t cutoff_len = 2048;
  std::optional<int64_t> max_samples;
  double val_size = 0;
  bool train_on_prompt = false;
  bool mask_history = false;
  bool packing = false;
  bool neat_packing = false;  // packing without attention across the packed sequences (implies packing)
  std::string tokenized_path;
  std::string mix_strategy = "concat";  // concat | interleave_under | interleave_over
  std::vector<double> interleave_probs;  // empty: round robin
  std::optional<std::string> default_system;
  std::optional<std::string> tool_format;
  bool enable_thinking = true;
  bool preserve_thinking = false;
  int64_t preprocessing_batch_size = 1000;  // packing groups within each batch (LLaMA-Factory)
  int64_t preprocessing_num_workers = 0;    // threads (0: all cores); no effect on the result
  // ---- optimisation
  int64_t per_device_train_batch_size = 8;
  int64_t per_device_eval_batch_size = 8;
  int64_t gradient_accumulation_steps = 1;
  double learning_rate = 5e-5;
  std::string lr_scheduler_type = "linear";  // linear | cosine | constant | constant_with_warmup
  double warmup_ratio = 0;
  double warmup_steps = 0;  // >= 1: steps, wins over warmup_ratio; in (0, 1): a ratio (transformers >= 4.5x)
  double num_train_epochs = 3;
  int64_t max_steps = -1;  // > 0 wins over num_train_epochs (HF)
  double weight_decay = 0;
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-8;
  double max_grad_norm = 1.0;
  bool bf16 = false;
  bool fp16 = false;
  int64_t seed = 42;
  // LLaMA-Factory checkpoints every decoder layer unless disable_gradient_checkpointing: true.
  bool gradient_checkpointing = true;
  // ---- evaluation
  std::string eval_strategy = "no";  // no | steps | epoch
  std::optional<double> eval_steps;  // unset: logging_steps (HF)
  // ---- logging and saving
  double logging_steps = 500;  // < 1: a fraction of total steps (HF)
  std::string save_strategy = "steps";  // no | steps | epoch
  double save_steps = 500;
  std::optional<int64_t> save_total_limit;
  bool plot_loss = false;
  // HF's include_num_input_tokens_seen: no | all (true: input_ids elements) | non_padding (false: no).
  std::string include_num_input_tokens_seen = "no";
  std::string output_dir = "trainer_output";
  bool overwrite_output_dir = false;
  std::string resume_from_checkpoint;
  // HF's report_to, resolved: "tensorboard" writes output_dir/runs/ (lf/tfevents/scalar_log.h);
  // "all" means tensorboard here; the other integrations (wandb, mlflow, ...) have no effect (a
  // warning each). Empty: none.
  std::vector<std::string> report_to;
  // ---- lf-train's own keys (documented in README)
  double ddp_bucket_cap_mb = 25;  // HF's key; unset (None) means 25 as in torch DDP
  // lf-train: the dtype gradients travel in over the all-reduce (fp32 | bf16; bf16 halves the
  // bytes on the wire, the sum is then rounded to bf16 before the fp32 optimizer sees it).
  std::string ddp_reduce_dtype = "fp32";
  // ---- sharding: from lf-train's zero_stage / offload, a DeepSpeed JSON (`deepspeed:`) or HF's
  // `fsdp:` / `fsdp_config:` (src/config/sharding.cpp; README "Sharding"). Two sources that
  // disagree are a ConfigError naming both.
  int64_t zero_stage = 0;         // 0: data parallel (DDP); 1, 2, 3: ZeRO stages
  std::string offload = "none";   // none | optimizer | params (params: parameters and optimizer)
  // The share of the trainable parameters offloaded (DeepSpeed's offload_optimizer.ratio): whole
  // units from the head down, as many as fit; the rest keep state and step on the device.
  double offload_ratio = 1.0;
  bool overlap_comm = true;
  // DeepSpeed's bucket sizes count elements; these are MiB of the gradient/parameter dtype DeepSpeed
  // would hold them in (2 bytes under bf16/fp16, 4 under fp32), so a bucket takes the memory it takes
  // under DeepSpeed: MiB = elements x bytes / 2^20. "auto" is HF's: reduce = hidden_size^2,
  // prefetch = 0.9 x hidden_size^2 elements (hidden_size from model_name_or_path/config.json).
  double reduce_bucket_mb = 25;      // DeepSpeed reduce_bucket_size
  double allgather_bucket_mb = 25;   // DeepSpeed allgather_bucket_size
  double prefetch_bucket_mb = 25;    // DeepSpeed stage3_prefetch_bucket_size
  bool pin_memory = true;            // offloaded state in page-locked host memory
  // Where the stage came from, for messages: "deepspeed: ds_z3_config.json", "fsdp: full_shard",
  // "zero_stage: 2", or "" (nothing asked: DDP).
  std::string sharding_source;
  // DeepSpeed's explicit train_batch_size (unset: "auto" or absent). It must equal
  // per_device_train_batch_size x gradient_accumulation_steps x world size, which only the
  // worker knows: it calls check_world_size (lf/config/sharding.h).
  std::optional<int64_t> train_batch_size;
};

struct LoadedConfig {
  TrainConfig config;
  // One line per key accepted without effect here ("report_to: wandb has no effect in lf-train ...").
  std::vector<std::string> warnings;
  // Information worth one line at start, not a warning ("fsdp_transformer_layer_cls_to_wrap: lf-train
  // wraps its own decoder layers").
  std::vector<std::string> notes;
  // The effective key/value pairs, sorted, and the content of every file a key names (a DeepSpeed
  // JSON): hashed to check that every node runs the same config.
  std::string canonical;
  // The same pairs one by one (the rendezvous names the keys that differ between nodes).
  std::vector<std::pair<std::string, std::string>> items;
};

// Parses YAML text (source_name is used in messages) plus `key=value` overrides.
LoadedConfig parse_train_config(const std::string& yaml_text, const std::vector<std::string>& overrides,
                                const std::string& source_name);
// Reads the file (ConfigError when missing/unreadable) and parses it.
LoadedConfig load_train_config(const std::string& path, const std::vector<std::string>& overrides);

// Every key lf-train knows (LLaMA-Factory's + its own), for did-you-mean and docs.
const std::vector<std::string>& known_keys();

}  // namespace lf::config
