#include "config_rules.h"

#include "config_schema.h"
#include "quantization_keys.h"
#include "reference_keys.h"

namespace lf::config {

namespace {

void check_required(const JobPlan& c) {
  LF_CHECK(!c.model.model_name_or_path.empty(), ConfigError,
           "`model_name_or_path` is required: a local folder with config.json (and weights unless `init_weights: "
           "random`)");
  LF_CHECK(!c.data.dataset.empty() || !c.predict.do_train, ConfigError, "`dataset` is required: one or more names from {}/dataset_info.json",
           c.data.dataset_dir);
}

// ASFT: LLaMA-Factory's sft workflow builds the frozen copy it compares with (create_ref_model) only for full and
// freeze tuning; for LoRA it builds none and its trainer's first step calls that None.
void check_asft(const Reader& r, const JobPlan& c) {
  LF_CHECK(!c.objective.use_asft_loss || c.objective.stage == "sft", ConfigError,
           "{}: the ASFT loss is sft's (LLaMA-Factory's sft workflow; stage {} would ignore it): remove the key or set "
           "`stage: sft`", r.where("use_asft_loss"), c.objective.stage);
  LF_CHECK(!c.objective.use_asft_loss || c.adapter.finetuning_type != "lora", ConfigError,
           "{}: `use_asft_loss` with LoRA: LLaMA-Factory 0.9.5 builds no reference model for LoRA (create_ref_model "
           "returns None) and its first step fails calling it; use finetuning_type full or freeze",
           r.where("use_asft_loss"));
  LF_CHECK(!c.objective.use_asft_loss || !(c.objective.use_dft_loss || c.objective.use_eaft_loss), ConfigError,
           "{}: `use_asft_loss` with `{}`: LLaMA-Factory would pass the reference logits to the DFT/EAFT loss as its "
           "token count (a mis-scaled loss); keep one (ASFT already holds DFT's term)",
           r.where("use_asft_loss"), c.objective.use_dft_loss ? "use_dft_loss" : "use_eaft_loss");
}

// The adapter methods' keys against finetuning_type (LLaMA-Factory's rules for LoRA, OFT, PiSSA, LLaMA Pro).
void check_adapter_keys(const Reader& r, const JobPlan& c) {
  // LoRA's options need LoRA (LLaMA-Factory's rules).
  // LLaMA-Factory 0.9.5 refuses it with OFT too; under lora it loads any peft adapter (an OFT one included).
  LF_CHECK(c.adapter.adapter_name_or_path.empty() || c.adapter.lora(), ConfigError,
           "{}: `adapter_name_or_path` is only valid for the LoRA method (LLaMA-Factory's rule); finetuning_type is "
           "{}: set `finetuning_type: lora` (it loads, merges or trains on LoRA and OFT adapters alike, as "
           "LLaMA-Factory's PeftModel.from_pretrained)",
           r.where("adapter_name_or_path"), c.adapter.finetuning_type);
  LF_CHECK(c.adapter.additional_target.empty() || c.adapter.peft(), ConfigError,
           "{}: `additional_target` names modules to train beside LoRA or OFT; finetuning_type is {}",
           r.where("additional_target"), c.adapter.finetuning_type);
  // peft's OFTConfig: r x oft_block_size = in_features, so exactly one of them is given.
  LF_CHECK(!c.adapter.oft() || (c.adapter.oft_rank == 0) != (c.adapter.oft_block_size == 0), ConfigError,
           "{}: finetuning_type oft needs exactly one of oft_rank and oft_block_size non-zero (peft's OFTConfig: "
           "r x oft_block_size = in_features); got oft_rank {} and oft_block_size {}: set oft_block_size: 0 to use "
           "oft_rank, or oft_rank: 0 (LLaMA-Factory's defaults: oft_rank 0, oft_block_size 32)",
           r.where(c.adapter.oft_rank != 0 ? "oft_rank" : "oft_block_size"), c.adapter.oft_rank,
           c.adapter.oft_block_size);
  LF_CHECK(c.optim.loraplus_lr_ratio == 0 || c.adapter.finetuning_type == "lora", ConfigError,
           "{}: `loraplus_lr_ratio` is LoRA's (lora_B learns faster); finetuning_type is {}",
           r.where("loraplus_lr_ratio"), c.adapter.finetuning_type);
  LF_CHECK(!c.adapter.use_rslora || c.adapter.finetuning_type == "lora", ConfigError,
           "{}: `use_rslora` is only valid for LoRA training (LLaMA-Factory's rule); finetuning_type is {}: set "
           "`finetuning_type: lora` or remove use_rslora",
           r.where("use_rslora"), c.adapter.finetuning_type);
  LF_CHECK(!c.adapter.use_dora || c.adapter.finetuning_type == "lora", ConfigError,
           "{}: `use_dora` is only valid for LoRA training (LLaMA-Factory's rule); finetuning_type is {}: set "
           "`finetuning_type: lora` or remove use_dora",
           r.where("use_dora"), c.adapter.finetuning_type);
  // LLaMA-Factory's parser refuses full; its LoRA variant (adapters on the expanded blocks only) is not built here.
  LF_CHECK(!c.adapter.use_llama_pro || c.adapter.freeze(), ConfigError,
           "{}: `use_llama_pro` is implemented for finetuning_type freeze (LLaMA-Factory: \"only valid for Freeze or "
           "LoRA training\"; its LoRA variant is not implemented in lf-train); finetuning_type is {}",
           r.where("use_llama_pro"), c.adapter.finetuning_type);
  // LLaMA-Factory's FinetuningArguments: PiSSA is LoRA's, and not with a reference model.
  LF_CHECK(!c.adapter.pissa_init || c.adapter.finetuning_type == "lora", ConfigError,
           "{}: `pissa_init` is only valid for LoRA training (LLaMA-Factory's rule); finetuning_type is {}",
           r.where("pissa_init"), c.adapter.finetuning_type);
  LF_CHECK(!c.adapter.pissa_init || !c.objective.uses_reference(), ConfigError,
           "{}: Cannot use PiSSA for current training stage (LLaMA-Factory's rule: stage {} compares with a reference "
           "model, which PiSSA's residual base would change)",
           r.where("pissa_init"), c.objective.stage);
  LF_CHECK(!c.adapter.pissa_init || !c.adapter.use_dora, ConfigError,
           "{}: `pissa_init` with `use_dora` is not implemented in lf-train; choose one", r.where("pissa_init"));
}

void check_between_keys(const Reader& r, const JobPlan& c) {
  LF_CHECK(!(c.precision.bf16 && c.precision.fp16), ConfigError, "{}: `bf16` and `fp16` are both true: choose one", r.where("fp16"));
  LF_CHECK(!(c.precision.pure_bf16 && c.precision.fp16), ConfigError,
           "{}: `pure_bf16` and `fp16` are both true: pure_bf16 trains in bf16 (LLaMA-Factory's compute dtype then is "
           "bf16 and fp16's loss scaler would act on bf16 gradients); choose one", r.where("fp16"));
  LF_CHECK(c.schedule.max_steps > 0 || c.schedule.num_train_epochs > 0, ConfigError,
           "set `max_steps` > 0 or `num_train_epochs` > 0 (got {} and {})", c.schedule.max_steps, c.schedule.num_train_epochs);
  // LLaMA-Factory refuses this too (HF turns eval_strategy into do_eval): evaluation with no data.
  LF_CHECK(c.eval.eval_strategy == "no" || !c.data.eval_dataset.empty() || c.data.val_size >= 1e-6, ConfigError,
           "{}: `eval_strategy: {}` but there is nothing to evaluate on: set `val_size` (a fraction, e.g. 0.1, or a "
           "number of examples) or `eval_dataset`, or `eval_strategy: no`",
           r.where("eval_strategy"), c.eval.eval_strategy);
  check_adapter_keys(r, c);
  // LLaMA-Factory's get_train_args: these are SFT's.
  if (c.objective.stage != "sft") {
    LF_CHECK(!c.data.neat_packing, ConfigError,
             "{}: `neat_packing` cannot be set as True except SFT (LLaMA-Factory's rule); stage is {}: remove it",
             r.where("neat_packing"), c.objective.stage);
    LF_CHECK(!c.data.train_on_prompt && !c.data.mask_history, ConfigError,
             "{}: `train_on_prompt` or `mask_history` cannot be set as True except SFT (LLaMA-Factory's rule); stage "
             "is {}: remove it (pt trains on every token)",
             r.where(c.data.train_on_prompt ? "train_on_prompt" : "mask_history"), c.objective.stage);
  }
  // LLaMA-Factory's sft trainer alone reads them (pt's and the preference stages' trainers ignore them).
  LF_CHECK(!(c.objective.use_dft_loss || c.objective.use_eaft_loss) || c.objective.stage == "sft", ConfigError,
           "{}: the DFT and EAFT losses are sft's (LLaMA-Factory's sft trainer; stage {} would ignore them): remove "
           "the key or set `stage: sft`",
           r.where(c.objective.use_dft_loss ? "use_dft_loss" : "use_eaft_loss"), c.objective.stage);
  LF_CHECK(!(c.objective.use_dft_loss && c.objective.use_eaft_loss), ConfigError,
           "{}: `use_dft_loss` and `use_eaft_loss` are both true; LLaMA-Factory would train with DFT alone and ignore "
           "EAFT: keep one",
           r.where("use_eaft_loss"));
  check_asft(r, c);
  // LLaMA-Factory's FinetuningArguments.__post_init__.
  LF_CHECK(c.objective.stage != "dpo" || c.objective.pref_loss == "sigmoid" || c.objective.dpo_label_smoothing <= 1e-6,
           ConfigError, "{}: `dpo_label_smoothing` is only valid for the sigmoid loss (LLaMA-Factory's rule); pref_loss is "
           "{}", r.where("dpo_label_smoothing"), c.objective.pref_loss);
  // LLaMA-Factory's DataArguments refuse the pair: which examples would be evaluated?
  LF_CHECK(c.data.eval_dataset.empty() || c.data.val_size <= 1e-6, ConfigError,
           "{}: `val_size: {}` and `eval_dataset` ({}) are both set: choose one, as LLaMA-Factory requires",
           r.where("val_size"), c.data.val_size, r.where("eval_dataset"));
}

// What one section needs of another, copied once so that each component takes its section alone.
void derive(JobPlan& c) {
  if (c.adapter.lora_alpha <= 0) c.adapter.lora_alpha = 2.0 * static_cast<double>(c.adapter.lora_rank);  // LLaMA-Factory's rule
  if (c.data.neat_packing) c.data.packing = true;  // LLaMA-Factory: neat_packing packs
  c.data.model_name_or_path = c.model.model_name_or_path;  // the tokenizer's folder
  c.data.stage = c.objective.stage;
  c.data.seed = static_cast<uint64_t>(c.seed);
}

}  // namespace

void check_parallel_rules(const JobPlan& c) {
  LF_CHECK(!c.adapter.pissa_init || c.parallel.zero_stage < 3, ConfigError,
           "pissa_init under zero_stage 3 (from {}): LLaMA-Factory refuses it too (\"Please use scripts/pissa_init.py to "
           "initialize PiSSA in DeepSpeed ZeRO-3\"); use zero_stage 0, 1 or 2",
           c.parallel.sharding_source);
  LF_CHECK(!c.precision.pure_bf16 || c.parallel.zero_stage < 3, ConfigError,
           "pure_bf16 under zero_stage 3 (from {}): LLaMA-Factory refuses it too (\"`pure_bf16` is incompatible with "
           "DeepSpeed ZeRO-3.\"); use zero_stage 0 (data parallel), or bf16: true under ZeRO-3",
           c.parallel.sharding_source);
  LF_CHECK(!c.precision.pure_bf16 || c.parallel.zero_stage == 0, ConfigError,
           "pure_bf16 under zero_stage {} (from {}) is not implemented: lf-train's ZeRO-1/2 steps fp32 master shards, "
           "which pure_bf16 means not to keep; use zero_stage 0 (data parallel), or bf16: true under ZeRO",
           c.parallel.zero_stage, c.parallel.sharding_source);
  LF_CHECK(!c.adapter.freeze() || c.parallel.zero_stage < 3, ConfigError,
           "finetuning_type freeze under zero_stage 3 (from {}) is not supported yet (the frozen part is sharded and "
           "the saved model needs it); use zero_stage 0, 1 or 2",
           c.parallel.sharding_source);
  LF_CHECK(c.adapter.adapter_name_or_path.size() <= 1 || c.parallel.zero_stage < 3, ConfigError,
           "zero_stage 3 (from {}) takes one adapter in adapter_name_or_path, {} given (LLaMA-Factory's rule: no "
           "merging under ZeRO-3): merge them first (lf-train export), or train under zero_stage 2",
           c.parallel.sharding_source, c.adapter.adapter_name_or_path.size());
}

void check_config(const Reader& r, JobPlan& c) {
  // HF's do_train defaults to false: LLaMA-Factory's predict YAMLs (examples/extras/nlg_eval) leave it unset.
  if (c.predict.do_predict && !r.has("do_train")) c.predict.do_train = false;
  check_required(c);
  check_offline(r, c);
  // LLaMA-Factory's DataArguments.__post_init__: `packing: true` or neat_packing packs into cutoff_len - 1 tokens
  // and pads each row to cutoff_len ("avoid pad_to_multiple_of"); pt's packing left unset keeps cutoff_len.
  const bool packing_asked = c.data.packing || c.data.neat_packing;
  if (c.objective.stage == "pt" && !r.has("packing")) c.data.packing = true;  // LLaMA-Factory: packing unset packs for pt
  for (const KeyDecl& d : config_schema())
    if (d.check) d.check(r, c);
  check_between_keys(r, c);
  check_quantization(r, c);
  check_reference(r, c);
  derive(c);
  if (packing_asked) c.data.cutoff_len -= 1;
}

}  // namespace lf::config
