#include "lf/config/train_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "did_you_mean.h"
#include "key_table.h"
#include "lf/common/error.h"

namespace lf::config {

namespace {

struct Entry {
  YAML::Node value;
  std::string where;  // "config.yaml:12" or "override"
};

std::string scalar_text(const YAML::Node& n) {
  if (n.IsScalar()) return n.Scalar();
  if (n.IsNull()) return "";
  YAML::Emitter e;
  e << YAML::Flow << n;
  return e.c_str();
}

// Typed reads with one message format: key, where, what was expected, what was seen.
class Reader {
 public:
  explicit Reader(const std::map<std::string, Entry>& entries) : entries_(entries) {}

  bool has(const std::string& key) const { return entries_.count(key) && !entries_.at(key).value.IsNull(); }

  template <typename T>
  void read(const std::string& key, T& out, const char* expected) const {
    if (!has(key)) return;
    const Entry& e = entries_.at(key);
    try {
      out = e.value.as<T>();
    } catch (const YAML::Exception&) {
      LF_THROW(ConfigError, "{}: `{}` must be {}, got '{}'", e.where, key, expected, scalar_text(e.value));
    }
  }

  template <typename T>
  void read_optional(const std::string& key, std::optional<T>& out, const char* expected) const {
    if (!has(key)) return;
    T v{};
    read(key, v, expected);
    out = v;
  }

  // "a,b" or [a, b] -> {"a", "b"}.
  void read_list(const std::string& key, std::vector<std::string>& out) const {
    if (!has(key)) return;
    const YAML::Node& n = entries_.at(key).value;
    out.clear();
    auto add = [&](const std::string& s) {
      std::stringstream ss(s);
      std::string item;
      while (std::getline(ss, item, ',')) {
        auto b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
        if (b != std::string::npos) out.push_back(item.substr(b, e - b + 1));
      }
    };
    if (n.IsSequence())
      for (const auto& item : n) add(scalar_text(item));
    else
      add(scalar_text(n));
  }

  std::string where(const std::string& key) const { return has(key) ? entries_.at(key).where : "default"; }

 private:
  const std::map<std::string, Entry>& entries_;
};

void check_one_of(const Reader& r, const std::string& key, const std::string& value,
                  std::initializer_list<const char*> allowed, const std::string& hint = "") {
  for (const char* a : allowed)
    if (value == a) return;
  LF_THROW(ConfigError, "{}: `{}: {}` is not supported; lf-train supports {}{}", r.where(key), key, value,
           fmt::join(allowed, ", "), hint.empty() ? "" : ". " + hint);
}

void apply(const Reader& r, TrainConfig& c) {
  r.read("model_name_or_path", c.model_name_or_path, "a path");
  r.read_list("adapter_name_or_path", c.adapter_name_or_path);
  r.read("create_new_adapter", c.create_new_adapter, "true or false");
  r.read("init_weights", c.init_weights, "pretrained or random");
  r.read("stage", c.stage, "a string");
  r.read("finetuning_type", c.finetuning_type, "a string");
  r.read("freeze_trainable_layers", c.freeze_trainable_layers, "an integer");
  r.read_list("freeze_trainable_modules", c.freeze_trainable_modules);
  r.read_list("freeze_extra_modules", c.freeze_extra_modules);
  r.read("lora_rank", c.lora_rank, "an integer");
  r.read("lora_alpha", c.lora_alpha, "a number");
  r.read("lora_dropout", c.lora_dropout, "a number");
  r.read_list("lora_target", c.lora_target);
  r.read("use_rslora", c.use_rslora, "true or false");
  r.read_list("additional_target", c.additional_target);
  r.read("loraplus_lr_ratio", c.loraplus_lr_ratio, "a number");
  r.read_list("dataset", c.dataset);
  r.read_list("eval_dataset", c.eval_dataset);
  r.read("dataset_dir", c.dataset_dir, "a path");
  r.read("template", c.template_name, "a template name");
  r.read("cutoff_len", c.cutoff_len, "an integer");
  r.read_optional("max_samples", c.max_samples, "an integer");
  r.read("val_size", c.val_size, "a number");
  r.read("train_on_prompt", c.train_on_prompt, "true or false");
  r.read("mask_history", c.mask_history, "true or false");
  r.read("packing", c.packing, "true or false");
  r.read("tokenized_path", c.tokenized_path, "a path");
  r.read("mix_strategy", c.mix_strategy, "concat, interleave_under or interleave_over");
  if (r.has("interleave_probs")) {
    std::vector<std::string> probs;
    r.read_list("interleave_probs", probs);
    c.interleave_probs.clear();
    for (const auto& p : probs) {
      char* end = nullptr;
      double v = std::strtod(p.c_str(), &end);
      LF_CHECK(end && *end == '\0' && v >= 0, ConfigError, "{}: `interleave_probs` entry '{}' is not a probability",
               r.where("interleave_probs"), p);
      c.interleave_probs.push_back(v);
    }
  }
  r.read_optional("default_system", c.default_system, "a string");
  r.read_optional("tool_format", c.tool_format, "a tool format name");
  r.read("enable_thinking", c.enable_thinking, "true or false");
  r.read("preserve_thinking", c.preserve_thinking, "true or false");
  r.read("preprocessing_batch_size", c.preprocessing_batch_size, "an integer");
  r.read("preprocessing_num_workers", c.preprocessing_num_workers, "an integer");
  r.read("per_device_train_batch_size", c.per_device_train_batch_size, "an integer");
  r.read("per_device_eval_batch_size", c.per_device_eval_batch_size, "an integer");
  r.read("gradient_accumulation_steps", c.gradient_accumulation_steps, "an integer");
  r.read("learning_rate", c.learning_rate, "a number");
  r.read("lr_scheduler_type", c.lr_scheduler_type, "a scheduler name");
  r.read("warmup_ratio", c.warmup_ratio, "a number");
  r.read("warmup_steps", c.warmup_steps, "a number");
  r.read("num_train_epochs", c.num_train_epochs, "a number");
  r.read("max_steps", c.max_steps, "an integer");
  r.read("weight_decay", c.weight_decay, "a number");
  r.read("adam_beta1", c.adam_beta1, "a number");
  r.read("adam_beta2", c.adam_beta2, "a number");
  r.read("adam_epsilon", c.adam_epsilon, "a number");
  r.read("max_grad_norm", c.max_grad_norm, "a number");
  r.read("bf16", c.bf16, "true or false");
  r.read("fp16", c.fp16, "true or false");
  r.read("seed", c.seed, "an integer");
  if (r.has("disable_gradient_checkpointing")) {
    bool disable = false;
    r.read("disable_gradient_checkpointing", disable, "true or false");
    c.gradient_checkpointing = !disable;
  }
  r.read("gradient_checkpointing", c.gradient_checkpointing, "true or false");
  r.read("eval_strategy", c.eval_strategy, "no, steps or epoch");
  r.read_optional("eval_steps", c.eval_steps, "a number");
  r.read("logging_steps", c.logging_steps, "a number");
  r.read("save_strategy", c.save_strategy, "no, steps or epoch");
  r.read("save_steps", c.save_steps, "a number");
  r.read_optional("save_total_limit", c.save_total_limit, "an integer");
  r.read("plot_loss", c.plot_loss, "true or false");
  r.read("include_num_input_tokens_seen", c.include_num_input_tokens_seen, "no, all, non_padding, true or false");
  if (c.include_num_input_tokens_seen == "true" || c.include_num_input_tokens_seen == "True")
    c.include_num_input_tokens_seen = "all";  // HF maps booleans so
  if (c.include_num_input_tokens_seen == "false" || c.include_num_input_tokens_seen == "False")
    c.include_num_input_tokens_seen = "no";
  r.read("output_dir", c.output_dir, "a path");
  r.read("overwrite_output_dir", c.overwrite_output_dir, "true or false");
  r.read("resume_from_checkpoint", c.resume_from_checkpoint, "a checkpoint path");
  r.read("ddp_bucket_cap_mb", c.ddp_bucket_cap_mb, "a number");
  r.read("ddp_reduce_dtype", c.ddp_reduce_dtype, "fp32 or bf16");
}

void validate(const Reader& r, TrainConfig& c) {
  LF_CHECK(!c.model_name_or_path.empty(), ConfigError,
           "`model_name_or_path` is required: a local folder with config.json (and weights unless `init_weights: "
           "random`)");
  LF_CHECK(!c.dataset.empty(), ConfigError, "`dataset` is required: one or more names from {}/dataset_info.json",
           c.dataset_dir);
  check_one_of(r, "stage", c.stage, {"sft"}, "Other stages (pt, rm, ppo, dpo, kto) are not implemented");
  check_one_of(r, "finetuning_type", c.finetuning_type, {"lora", "full", "freeze"});
  check_one_of(r, "init_weights", c.init_weights, {"pretrained", "random"});
  check_one_of(r, "lr_scheduler_type", c.lr_scheduler_type, {"linear", "cosine", "constant", "constant_with_warmup"});
  check_one_of(r, "eval_strategy", c.eval_strategy, {"no", "steps", "epoch"});
  check_one_of(r, "mix_strategy", c.mix_strategy, {"concat", "interleave_under", "interleave_over"});
  check_one_of(r, "save_strategy", c.save_strategy, {"no", "steps", "epoch"});
  check_one_of(r, "ddp_reduce_dtype", c.ddp_reduce_dtype, {"fp32", "bf16"});
  check_one_of(r, "include_num_input_tokens_seen", c.include_num_input_tokens_seen, {"no", "all", "non_padding"});
  LF_CHECK(!(c.bf16 && c.fp16), ConfigError, "{}: `bf16` and `fp16` are both true: choose one", r.where("fp16"));
  auto positive = [&](const char* key, double v) {
    LF_CHECK(v > 0, ConfigError, "{}: `{}` must be > 0, got {}", r.where(key), key, v);
  };
  positive("lora_rank", static_cast<double>(c.lora_rank));
  positive("cutoff_len", static_cast<double>(c.cutoff_len));
  positive("per_device_train_batch_size", static_cast<double>(c.per_device_train_batch_size));
  positive("per_device_eval_batch_size", static_cast<double>(c.per_device_eval_batch_size));
  positive("gradient_accumulation_steps", static_cast<double>(c.gradient_accumulation_steps));
  positive("learning_rate", c.learning_rate);
  positive("logging_steps", c.logging_steps);
  positive("save_steps", c.save_steps);
  positive("ddp_bucket_cap_mb", c.ddp_bucket_cap_mb);
  positive("preprocessing_batch_size", static_cast<double>(c.preprocessing_batch_size));
  LF_CHECK(c.max_steps > 0 || c.num_train_epochs > 0, ConfigError,
           "set `max_steps` > 0 or `num_train_epochs` > 0 (got {} and {})", c.max_steps, c.num_train_epochs);
  LF_CHECK(c.lora_dropout >= 0 && c.lora_dropout < 1, ConfigError, "{}: `lora_dropout` must be in [0, 1), got {}",
           r.where("lora_dropout"), c.lora_dropout);
  LF_CHECK(c.val_size >= 0, ConfigError, "{}: `val_size` must be >= 0, got {}", r.where("val_size"), c.val_size);
  // LLaMA-Factory refuses this too (HF turns eval_strategy into do_eval): evaluation with no data.
  LF_CHECK(c.eval_strategy == "no" || !c.eval_dataset.empty() || c.val_size >= 1e-6, ConfigError,
           "{}: `eval_strategy: {}` but there is nothing to evaluate on: set `val_size` (a fraction, e.g. 0.1, or a "
           "number of examples) or `eval_dataset`, or `eval_strategy: no`",
           r.where("eval_strategy"), c.eval_strategy);
  LF_CHECK(c.warmup_ratio >= 0 && c.warmup_ratio <= 1, ConfigError, "{}: `warmup_ratio` must be in [0, 1], got {}",
           r.where("warmup_ratio"), c.warmup_ratio);
  LF_CHECK(c.max_grad_norm >= 0, ConfigError, "{}: `max_grad_norm` must be >= 0", r.where("max_grad_norm"));
  LF_CHECK(!c.lora_target.empty(), ConfigError, "{}: `lora_target` is empty", r.where("lora_target"));
  LF_CHECK(c.adapter_name_or_path.empty() || c.finetuning_type == "lora", ConfigError,
           "{}: `adapter_name_or_path` is only valid for the LoRA method (LLaMA-Factory's rule); finetuning_type is {}",
           r.where("adapter_name_or_path"), c.finetuning_type);
  LF_CHECK(c.additional_target.empty() || c.finetuning_type == "lora", ConfigError,
           "{}: `additional_target` names modules to train beside LoRA; finetuning_type is {}",
           r.where("additional_target"), c.finetuning_type);
  LF_CHECK(c.loraplus_lr_ratio >= 0, ConfigError, "{}: `loraplus_lr_ratio` must be > 0, got {}",
           r.where("loraplus_lr_ratio"), c.loraplus_lr_ratio);
  LF_CHECK(c.loraplus_lr_ratio == 0 || c.finetuning_type == "lora", ConfigError,
           "{}: `loraplus_lr_ratio` is LoRA's (lora_B learns faster); finetuning_type is {}",
           r.where("loraplus_lr_ratio"), c.finetuning_type);
  if (c.lora_alpha <= 0) c.lora_alpha = 2.0 * static_cast<double>(c.lora_rank);  // LLaMA-Factory's rule
}

}  // namespace

const std::vector<std::string>& known_keys() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& k : key_specs()) v.push_back(k.name);
    return v;
  }();
  return names;
}

LoadedConfig parse_train_config(const std::string& yaml_text, const std::vector<std::string>& overrides,
                                const std::string& source_name) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    LF_THROW(ConfigError, "{}:{}:{}: malformed YAML: {}", source_name, e.mark.line + 1, e.mark.column + 1, e.msg);
  }
  LF_CHECK(root.IsNull() || root.IsMap(), ConfigError, "{}: expected a mapping of `key: value` lines at the top level",
           source_name);

  std::map<std::string, Entry> entries;
  if (root.IsMap())
    for (const auto& kv : root)
      entries[kv.first.as<std::string>()] = {kv.second, fmt::format("{}:{}", source_name, kv.first.Mark().line + 1)};
  for (const auto& o : overrides) {
    auto eq = o.find('=');
    LF_CHECK(eq != std::string::npos && eq > 0, ConfigError,
             "override '{}' is not key=value (e.g. learning_rate=1e-4)", o);
    YAML::Node value;
    try {
      value = YAML::Load(o.substr(eq + 1));
    } catch (const YAML::Exception& e) {
      LF_THROW(ConfigError, "override '{}': malformed value: {}", o, e.msg);
    }
    entries[o.substr(0, eq)] = {value, fmt::format("override {}", o)};
  }

  LoadedConfig out;
  std::vector<std::string> problems;
  for (const auto& [key, entry] : entries) {
    const KeySpec* spec = find_key(key);
    if (!spec) {
      auto near = did_you_mean(key, known_keys());
      problems.push_back(fmt::format("{}: unknown key `{}`{}", entry.where, key,
                                     near.empty() ? std::string(" (not a LLaMA-Factory or lf-train key)")
                                                  : fmt::format(": did you mean {}?", fmt::join(near, ", "))));
      continue;
    }
    std::string text = scalar_text(entry.value);
    bool is_default = equals_python_default(text, spec->default_repr);
    switch (key_policy(key)) {
      case KeyPolicy::kImplemented:
        break;
      case KeyPolicy::kRefused: {
        std::string reason = refusal_reason(key);
        if (!is_default && !reason.empty())
          problems.push_back(fmt::format("{}: `{}: {}` is refused: {}", entry.where, key, text, reason));
        break;
      }
      case KeyPolicy::kNoEffect:
        if (!is_default && key != "deepspeed" && key != "fsdp")  // these get their own warning below
          out.warnings.push_back(fmt::format("{}: `{}: {}` has no effect in lf-train (accepted for LLaMA-Factory "
                                             "compatibility)", entry.where, key, text));
        break;
    }
  }
  LF_CHECK(problems.empty(), ConfigError, "{} problem{} in the config:\n  {}", problems.size(),
           problems.size() == 1 ? "" : "s", fmt::join(problems, "\n  "));

  Reader reader(entries);
  // do_train: false would make LLaMA-Factory skip training; lf-train only trains.
  if (reader.has("do_train")) {
    bool do_train = true;
    reader.read("do_train", do_train, "true or false");
    LF_CHECK(do_train, ConfigError, "{}: `do_train: false` asks for no training; lf-train only trains",
             reader.where("do_train"));
  }
  if (reader.has("optim")) {
    std::string optim;
    reader.read("optim", optim, "an optimizer name");
    check_one_of(reader, "optim", optim, {"adamw_torch", "adamw_torch_fused", "adamw_hf"});
  }
  for (const char* key : {"deepspeed", "fsdp"})
    if (reader.has(key) && !equals_python_default(scalar_text(entries.at(key).value), find_key(key)->default_repr))
      out.warnings.push_back(fmt::format("{}: `{}` requests sharding; lf-train runs it data-parallel (same result, "
                                         "more memory per GPU) until ZeRO/FSDP lands", reader.where(key), key));
  apply(reader, out.config);
  validate(reader, out.config);

  for (const auto& [key, entry] : entries) out.canonical += key + "=" + scalar_text(entry.value) + "\n";
  return out;
}

LoadedConfig load_train_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::ifstream in(path);
  LF_CHECK(in, ConfigError, "cannot read config '{}': {}", path, std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_train_config(ss.str(), overrides, path);
}

}  // namespace lf::config
