#include "config_rules.h"

#include "config_schema.h"

namespace lf::config {

namespace {

void check_required(const TrainConfig& c) {
  LF_CHECK(!c.model_name_or_path.empty(), ConfigError,
           "`model_name_or_path` is required: a local folder with config.json (and weights unless `init_weights: "
           "random`)");
  LF_CHECK(!c.dataset.empty(), ConfigError, "`dataset` is required: one or more names from {}/dataset_info.json",
           c.dataset_dir);
}

void check_between_keys(const Reader& r, const TrainConfig& c) {
  LF_CHECK(!(c.bf16 && c.fp16), ConfigError, "{}: `bf16` and `fp16` are both true: choose one", r.where("fp16"));
  LF_CHECK(c.max_steps > 0 || c.num_train_epochs > 0, ConfigError,
           "set `max_steps` > 0 or `num_train_epochs` > 0 (got {} and {})", c.max_steps, c.num_train_epochs);
  // LLaMA-Factory refuses this too (HF turns eval_strategy into do_eval): evaluation with no data.
  LF_CHECK(c.eval_strategy == "no" || !c.eval_dataset.empty() || c.val_size >= 1e-6, ConfigError,
           "{}: `eval_strategy: {}` but there is nothing to evaluate on: set `val_size` (a fraction, e.g. 0.1, or a "
           "number of examples) or `eval_dataset`, or `eval_strategy: no`",
           r.where("eval_strategy"), c.eval_strategy);
  // LoRA's options need LoRA (LLaMA-Factory's rules).
  LF_CHECK(c.adapter_name_or_path.empty() || c.finetuning_type == "lora", ConfigError,
           "{}: `adapter_name_or_path` is only valid for the LoRA method (LLaMA-Factory's rule); finetuning_type is {}",
           r.where("adapter_name_or_path"), c.finetuning_type);
  LF_CHECK(c.additional_target.empty() || c.finetuning_type == "lora", ConfigError,
           "{}: `additional_target` names modules to train beside LoRA; finetuning_type is {}",
           r.where("additional_target"), c.finetuning_type);
  LF_CHECK(c.loraplus_lr_ratio == 0 || c.finetuning_type == "lora", ConfigError,
           "{}: `loraplus_lr_ratio` is LoRA's (lora_B learns faster); finetuning_type is {}",
           r.where("loraplus_lr_ratio"), c.finetuning_type);
  LF_CHECK(!c.use_dora || c.finetuning_type == "lora", ConfigError,
           "{}: `use_dora` is only valid for LoRA training (LLaMA-Factory's rule); finetuning_type is {}: set "
           "`finetuning_type: lora` or remove use_dora",
           r.where("use_dora"), c.finetuning_type);
  // LLaMA-Factory's get_train_args: these are SFT's.
  if (c.stage != "sft") {
    LF_CHECK(!c.neat_packing, ConfigError,
             "{}: `neat_packing` cannot be set as True except SFT (LLaMA-Factory's rule); stage is {}: remove it",
             r.where("neat_packing"), c.stage);
    LF_CHECK(!c.train_on_prompt && !c.mask_history, ConfigError,
             "{}: `train_on_prompt` or `mask_history` cannot be set as True except SFT (LLaMA-Factory's rule); stage "
             "is {}: remove it (pt trains on every token)",
             r.where(c.train_on_prompt ? "train_on_prompt" : "mask_history"), c.stage);
  }
  // LLaMA-Factory's DataArguments refuse the pair: which examples would be evaluated?
  LF_CHECK(c.eval_dataset.empty() || c.val_size <= 1e-6, ConfigError,
           "{}: `val_size: {}` and `eval_dataset` ({}) are both set: choose one, as LLaMA-Factory requires",
           r.where("val_size"), c.val_size, r.where("eval_dataset"));
}

void derive(TrainConfig& c) {
  if (c.lora_alpha <= 0) c.lora_alpha = 2.0 * static_cast<double>(c.lora_rank);  // LLaMA-Factory's rule
  if (c.neat_packing) c.packing = true;  // LLaMA-Factory: neat_packing packs
}

}  // namespace

void check_config(const Reader& r, TrainConfig& c) {
  check_required(c);
  if (c.stage == "pt" && !r.has("packing")) c.packing = true;  // LLaMA-Factory: packing unset packs for pt
  for (const KeyDecl& d : config_schema())
    if (d.check) d.check(r, c);
  check_between_keys(r, c);
  derive(c);
}

}  // namespace lf::config
