#include "lf/data/data_args.h"

#include <yaml-cpp/yaml.h>

#include "lf/common/error.h"

namespace lf {
namespace fs = std::filesystem;

namespace {

template <typename T>
T scalar(const YAML::Node& n, const char* key, const std::string& where, const char* type) {
  try {
    return n.as<T>();
  } catch (const YAML::Exception&) {
    LF_THROW(ConfigError, "{}:{}: `{}` must be {}, got '{}'", where, n.Mark().line + 1, key, type,
             n.IsScalar() ? n.Scalar() : std::string("a non-scalar"));
  }
}

// LLaMA-Factory splits `dataset: a, b` on commas and strips each name.
std::vector<std::string> name_list(const YAML::Node& n, const char* key, const std::string& where) {
  std::vector<std::string> out;
  auto add = [&](std::string s) {
    size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
    if (b != std::string::npos) out.push_back(s.substr(b, e - b + 1));
  };
  if (n.IsSequence()) {
    for (const auto& item : n) add(scalar<std::string>(item, key, where, "a name"));
    return out;
  }
  std::string s = scalar<std::string>(n, key, where, "a comma-separated list of names");
  size_t pos = 0;
  while (true) {
    size_t comma = s.find(',', pos);
    add(s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

}  // namespace

fs::path DataArgs::resolve(const std::string& p) const {
  fs::path path(p);
  return path.is_absolute() ? path : base_dir / path;
}

DataArgs parse_data_args(const YAML::Node& root, const std::string& where) {
  DataArgs a;
  LF_CHECK(root.IsMap(), ConfigError, "{}: expected a YAML mapping of LLaMA-Factory keys", where);
  const YAML::Node& croot = root;  // const access never inserts keys
  auto set = [&](const char* key) -> std::optional<YAML::Node> {
    YAML::Node n = croot[key];
    if (!n.IsDefined() || n.IsNull()) return std::nullopt;
    return n;
  };
  if (auto n = set("dataset")) a.dataset = name_list(*n, "dataset", where);
  if (auto n = set("eval_dataset")) a.eval_dataset = name_list(*n, "eval_dataset", where);
  if (auto n = set("dataset_dir")) a.dataset_dir = scalar<std::string>(*n, "dataset_dir", where, "a path");
  if (auto n = set("template")) a.template_name = scalar<std::string>(*n, "template", where, "a name");
  if (auto n = set("cutoff_len")) a.cutoff_len = scalar<int64_t>(*n, "cutoff_len", where, "an integer");
  if (auto n = set("train_on_prompt")) a.train_on_prompt = scalar<bool>(*n, "train_on_prompt", where, "true/false");
  if (auto n = set("mask_history")) a.mask_history = scalar<bool>(*n, "mask_history", where, "true/false");
  if (auto n = set("packing")) a.packing = scalar<bool>(*n, "packing", where, "true/false");
  if (auto n = set("max_samples")) a.max_samples = scalar<int64_t>(*n, "max_samples", where, "an integer");
  if (auto n = set("val_size")) a.val_size = scalar<double>(*n, "val_size", where, "a number");
  if (auto n = set("mix_strategy")) a.mix_strategy = scalar<std::string>(*n, "mix_strategy", where, "a name");
  if (auto n = set("interleave_probs")) {
    for (const std::string& v : name_list(*n, "interleave_probs", where)) {
      try {
        a.interleave_probs.push_back(std::stod(v));
      } catch (const std::exception&) {
        LF_THROW(ConfigError, "{}: interleave_probs entry '{}' is not a number", where, v);
      }
    }
  }
  if (auto n = set("default_system")) a.default_system = scalar<std::string>(*n, "default_system", where, "a string");
  if (auto n = set("tool_format")) a.tool_format = scalar<std::string>(*n, "tool_format", where, "a name");
  if (auto n = set("enable_thinking")) a.enable_thinking = scalar<bool>(*n, "enable_thinking", where, "true/false");
  if (auto n = set("preserve_thinking"))
    a.preserve_thinking = scalar<bool>(*n, "preserve_thinking", where, "true/false");
  if (auto n = set("tokenized_path")) a.tokenized_path = scalar<std::string>(*n, "tokenized_path", where, "a path");
  if (auto n = set("model_name_or_path"))
    a.model_name_or_path = scalar<std::string>(*n, "model_name_or_path", where, "a path");
  if (auto n = set("stage")) a.stage = scalar<std::string>(*n, "stage", where, "a name");
  if (auto n = set("seed")) a.seed = scalar<uint64_t>(*n, "seed", where, "an integer");
  if (auto n = set("preprocessing_num_workers"))
    a.preprocessing_num_workers = scalar<int>(*n, "preprocessing_num_workers", where, "an integer");
  if (auto n = set("preprocessing_batch_size"))
    a.preprocessing_batch_size = scalar<int64_t>(*n, "preprocessing_batch_size", where, "an integer");
  if (auto n = set("neat_packing")) a.neat_packing = scalar<bool>(*n, "neat_packing", where, "true/false");
  if (a.neat_packing) a.packing = true;  // as LLaMA-Factory's DataArguments does
  if (a.stage == "pt" && !set("packing")) a.packing = true;  // LLaMA-Factory: packing unset packs for pt
  if (auto n = set("streaming"))
    LF_CHECK(!scalar<bool>(*n, "streaming", where, "true/false"), ConfigError,
             "{}: streaming is not supported; lf-train tokenizes up front (and caches with "
             "tokenized_path)", where);

  LF_CHECK(a.cutoff_len > 0, ConfigError, "{}: cutoff_len must be positive, got {}", where, a.cutoff_len);
  LF_CHECK(a.preprocessing_batch_size > 0, ConfigError,
           "{}: preprocessing_batch_size must be positive, got {}", where, a.preprocessing_batch_size);
  LF_CHECK(a.val_size >= 0, ConfigError, "{}: val_size must be >= 0, got {}", where, a.val_size);
  LF_CHECK(a.mix_strategy == "concat" || a.mix_strategy == "interleave_under" ||
               a.mix_strategy == "interleave_over",
           ConfigError,
           "{}: mix_strategy '{}' is not supported (concat, interleave_under, interleave_over; "
           "LLaMA-Factory's interleave_once fails on map-style datasets too)",
           where, a.mix_strategy);
  LF_CHECK(a.interleave_probs.empty() || a.interleave_probs.size() == a.dataset.size(), ConfigError,
           "{}: interleave_probs has {} entries for {} datasets", where, a.interleave_probs.size(),
           a.dataset.size());
  LF_CHECK(a.stage == "sft" || a.stage == "pt", ConfigError,
           "{}: stage '{}' is not supported by lf-train's data pipeline (sft, pt)", where, a.stage);
  LF_CHECK(a.eval_dataset.empty() || a.val_size <= 1e-6, ConfigError,
           "{}: cannot set both val_size and eval_dataset (as in LLaMA-Factory)", where);
  return a;
}

DataArgs load_data_args(const fs::path& yaml_file, const std::vector<std::string>& overrides) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(yaml_file.string());
  } catch (const YAML::BadFile&) {
    LF_THROW(ConfigError, "cannot read config {}", yaml_file.string());
  } catch (const YAML::Exception& e) {
    LF_THROW(ConfigError, "{}:{}: YAML error: {}", yaml_file.string(), e.mark.line + 1, e.msg);
  }
  for (const std::string& kv : overrides) {
    size_t eq = kv.find('=');
    LF_CHECK(eq != std::string::npos && eq > 0, ConfigError,
             "override '{}' must be key=value", kv);
    root[kv.substr(0, eq)] = YAML::Load(kv.substr(eq + 1));
  }
  return parse_data_args(root, yaml_file.string());
}

}  // namespace lf
