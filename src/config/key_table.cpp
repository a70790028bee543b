#include "key_table.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "llamafactory_keys.inc"  // kLlamaFactoryKeysTsv, generated from llamafactory_keys.tsv

namespace lf::config {

namespace {

// Keys lf-train reads (TrainConfig) — plus its own.
const std::set<std::string, std::less<>> kImplemented = {
    "model_name_or_path", "init_weights", "stage", "finetuning_type", "lora_rank", "lora_alpha", "lora_dropout",
    "lora_target", "dataset", "eval_dataset", "dataset_dir", "template", "cutoff_len", "max_samples", "val_size",
    "train_on_prompt", "mask_history", "packing", "tokenized_path", "per_device_train_batch_size",
    "per_device_eval_batch_size", "gradient_accumulation_steps", "learning_rate", "lr_scheduler_type",
    "warmup_ratio", "warmup_steps", "num_train_epochs", "max_steps", "weight_decay", "adam_beta1", "adam_beta2",
    "adam_epsilon", "max_grad_norm", "bf16", "fp16", "seed", "gradient_checkpointing",
    "disable_gradient_checkpointing", "eval_strategy", "eval_steps", "logging_steps", "save_strategy", "save_steps",
    "save_total_limit", "plot_loss", "output_dir", "overwrite_output_dir", "resume_from_checkpoint", "do_train",
    "ddp_bucket_cap_mb", "ddp_reduce_dtype", "optim", "mix_strategy", "interleave_probs", "default_system", "tool_format",
    "enable_thinking", "preserve_thinking", "preprocessing_batch_size", "preprocessing_num_workers",
    "include_num_input_tokens_seen", "use_rslora", "loraplus_lr_ratio", "additional_target",
    "freeze_trainable_layers", "freeze_trainable_modules", "freeze_extra_modules", "adapter_name_or_path",
    "create_new_adapter"};

// Ignoring these would silently change what is trained or how: refuse non-default values.
const std::map<std::string, std::string, std::less<>> kRefused = {
    {"quantization_bit", "quantized (QLoRA) training is not supported: remove quantization_bit"},
    {"quantization_method", "quantized training is not supported"},
    {"double_quantization", "quantized training is not supported"},
    {"use_dora", "DoRA is not supported (plain LoRA only)"},
    {"pissa_init", "PiSSA initialisation is not supported"},
    {"pissa_convert", "PiSSA is not supported"},
    {"loraplus_lr_embedding", "LoRA+ on embedding adapters is not supported (no LoRA embedding adapters)"},
    {"use_galore", "GaLore is not supported"},
    {"use_apollo", "APOLLO is not supported"},
    {"use_badam", "BAdam is not supported"},
    {"use_muon", "the Muon optimizer is not supported"},
    {"use_adam_mini", "Adam-mini is not supported"},
    {"use_llama_pro", "LLaMA Pro block expansion is not supported"},
    {"freeze_vision_tower", "multimodal training is not supported"},
    {"train_mm_proj_only", "multimodal training is not supported"},
    {"neftune_noise_alpha", "NEFTune noise is not supported"},
    {"rope_scaling", "changing the RoPE scaling of the checkpoint is not supported"},
    {"shift_attn", "shift short attention (LongLoRA) is not supported"},
    {"mixture_of_depths", "mixture of depths is not supported"},
    {"train_from_scratch", "use `init_weights: random` (lf-train's key) to train from a config.json alone"},
    {"resize_vocab", "resizing the vocabulary is not supported"},
    {"new_special_tokens", "adding special tokens is not supported"},
    {"add_tokens", "adding tokens is not supported"},
    {"add_special_tokens", "adding special tokens is not supported"},
    {"split_special_tokens", "split_special_tokens changes tokenisation and is not supported"},
    {"neat_packing", "neat_packing is not supported (packing: true is)"},
    {"streaming", "streaming datasets are not supported"},
    {"label_smoothing_factor", "label smoothing is not supported"},
    {"lr_scheduler_kwargs", "scheduler arguments are not supported"},
    {"group_by_length", "group_by_length changes the example order and is not supported"},
    {"dataloader_drop_last", "dropping the last batch is not supported"},
    {"data_seed", "a separate data seed is not supported: the order comes from `seed`"},
    {"average_tokens_across_devices", "lf-train always normalises the loss over every target token of the step"},
    {"do_predict", "prediction runs are not supported (training only)"},
    {"predict_with_generate", "prediction runs are not supported (training only)"},
    {"pure_bf16", "pure bf16 training (no fp32 master weights) is not supported: use bf16: true"},
    {"disable_shuffling", "an unshuffled example order is not supported (each epoch is a permutation from `seed`)"},
    {"use_dft_loss", "the DFT loss is not supported"},
    {"use_eaft_loss", "the EAFT loss is not supported"},
    {"ignore_pad_token_for_loss", "training on pad tokens is not supported"},
    {"load_best_model_at_end", "keeping the best checkpoint instead of the last is not supported"},
    {"early_stopping_steps", "early stopping is not supported"},
    {"stage", ""},            // value-checked in train_config.cpp
    {"finetuning_type", ""},  // value-checked in train_config.cpp
};

std::vector<KeySpec> parse_table() {
  std::vector<KeySpec> out;
  std::istringstream in(kLlamaFactoryKeysTsv);
  std::string line;
  bool header_seen = false;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    // Exactly the header, then rows of four fields: anything else is a broken generation (a
    // log line once took the header's place, and the header became a key named "name").
    if (!header_seen) {
      if (line != "name\tdataclass\ttype\tdefault")
        throw std::logic_error("llamafactory_keys.tsv: expected the header line, got: " + line);
      header_seen = true;
      continue;
    }
    KeySpec k;
    std::istringstream fields(line);
    std::getline(fields, k.name, '\t');
    std::getline(fields, k.dataclass, '\t');
    std::getline(fields, k.type, '\t');
    if (!std::getline(fields, k.default_repr) || k.name.empty())
      throw std::logic_error("llamafactory_keys.tsv: a row without four tab-separated fields: " + line);
    out.push_back(std::move(k));
  }
  out.push_back({"init_weights", "lf-train", "str", "'pretrained'"});
  out.push_back({"ddp_reduce_dtype", "lf-train", "str", "'fp32'"});
  std::sort(out.begin(), out.end(), [](const KeySpec& a, const KeySpec& b) { return a.name < b.name; });
  return out;
}

std::string strip_quotes(const std::string& s) {
  if (s.size() >= 2 && (s.front() == '\'' || s.front() == '"') && s.back() == s.front()) return s.substr(1, s.size() - 2);
  // Enum reprs: <AttentionFunction.AUTO: 'auto'>
  auto colon = s.find(": '");
  if (s.rfind("<", 0) == 0 && colon != std::string::npos) return s.substr(colon + 3, s.size() - colon - 5);
  return s;
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

const std::vector<KeySpec>& key_specs() {
  static const std::vector<KeySpec> table = parse_table();
  return table;
}

const KeySpec* find_key(std::string_view name) {
  const auto& t = key_specs();
  auto it = std::lower_bound(t.begin(), t.end(), name, [](const KeySpec& k, std::string_view n) { return k.name < n; });
  return it != t.end() && it->name == name ? &*it : nullptr;
}

KeyPolicy key_policy(std::string_view name) {
  if (kImplemented.count(name)) return KeyPolicy::kImplemented;
  if (kRefused.count(name)) return KeyPolicy::kRefused;
  return KeyPolicy::kNoEffect;
}

std::string refusal_reason(std::string_view name) {
  auto it = kRefused.find(name);
  return it == kRefused.end() ? std::string() : it->second;
}

bool equals_python_default(const std::string& yaml_value, const std::string& default_repr) {
  std::string v = lower(yaml_value);
  std::string d = strip_quotes(default_repr);
  if (default_repr == "None") return v.empty() || v == "null" || v == "~" || v == "none";
  if (default_repr == "True" || default_repr == "False") return v == lower(default_repr);
  if (default_repr == "[]" || default_repr == "{}") return v.empty() || v == default_repr;
  char* end = nullptr;
  double dv = std::strtod(d.c_str(), &end);
  if (!d.empty() && end && *end == '\0') {
    char* vend = nullptr;
    double vv = std::strtod(v.c_str(), &vend);
    return !v.empty() && vend && *vend == '\0' && vv == dv;
  }
  return v == lower(d);
}

}  // namespace lf::config
