#include "lf/config/export_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "config_reader.h"
#include "did_you_mean.h"
#include "key_table.h"
#include "lf/common/error.h"
#include "lf/config/train_config.h"

namespace lf::config {

namespace {

struct Value {
  YAML::Node node;
  std::string where;
};

std::map<std::string, Value> read_values(const std::string& path, const std::vector<std::string>& overrides) {
  std::ifstream in(path);
  LF_CHECK(in, ConfigError, "cannot read export config '{}': {}", path, std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  YAML::Node root;
  try {
    root = YAML::Load(ss.str());
  } catch (const YAML::Exception& e) {
    LF_THROW(ConfigError, "{}:{}:{}: malformed YAML: {}", path, e.mark.line + 1, e.mark.column + 1, e.msg);
  }
  LF_CHECK(root.IsNull() || root.IsMap(), ConfigError, "{}: expected a mapping of `key: value` lines", path);
  std::map<std::string, Value> v;
  if (root.IsMap())
    for (const auto& kv : root)
      v[kv.first.as<std::string>()] = {kv.second, fmt::format("{}:{}", path, kv.first.Mark().line + 1)};
  for (const auto& o : overrides) {
    const auto eq = o.find('=');
    LF_CHECK(eq != std::string::npos && eq > 0, ConfigError, "override '{}' is not key=value (e.g. export_size=2)", o);
    try {
      v[o.substr(0, eq)] = {YAML::Load(o.substr(eq + 1)), "override " + o};
    } catch (const YAML::Exception& e) {
      LF_THROW(ConfigError, "override '{}': malformed value: {}", o, e.msg);
    }
  }
  return v;
}

std::string text_of(const std::map<std::string, Value>& v, const std::string& key) {
  auto it = v.find(key);
  return it == v.end() || it->second.node.IsNull() ? std::string() : scalar_text(it->second.node);
}

}  // namespace

ExportConfig load_export_config(const std::string& path, const std::vector<std::string>& overrides) {
  const auto values = read_values(path, overrides);
  std::vector<std::string> problems, ignored;
  const std::vector<std::string> read = {"model_name_or_path", "adapter_name_or_path", "export_dir", "export_size",
                                         "infer_dtype", "export_device", "export_legacy_format",
                                         "export_quantization_bit", "export_hub_model_id", "finetuning_type"};
  for (const auto& [key, value] : values) {
    if (!find_key(key)) {
      const auto near = did_you_mean(key, known_keys());
      problems.push_back(fmt::format("{}: unknown key `{}`{}", value.where, key,
                                     near.empty() ? std::string(" (not a LLaMA-Factory or lf-train key)")
                                                  : fmt::format(": did you mean {}?", fmt::join(near, ", "))));
    } else if (std::find(read.begin(), read.end(), key) == read.end()) {
      ignored.push_back(key);
    }
  }
  ExportConfig c;
  c.model_name_or_path = text_of(values, "model_name_or_path");
  c.adapter_name_or_path = text_of(values, "adapter_name_or_path");
  c.export_dir = text_of(values, "export_dir");
  auto where = [&](const std::string& k) { return values.count(k) ? values.at(k).where : path; };
  if (c.model_name_or_path.empty()) problems.push_back(path + ": `model_name_or_path` (the base model folder) is required");
  if (c.export_dir.empty()) problems.push_back(path + ": `export_dir` (where the merged model goes) is required");
  if (c.adapter_name_or_path.find(',') != std::string::npos)
    problems.push_back(where("adapter_name_or_path") + ": several adapters are not merged by lf-train; give one folder");
  if (auto s = text_of(values, "export_size"); !s.empty()) {
    char* end = nullptr;
    c.export_size_gb = std::strtod(s.c_str(), &end);
    if (end == s.c_str() || *end != '\0' || !(c.export_size_gb > 0) || !std::isfinite(c.export_size_gb))
      problems.push_back(fmt::format("{}: `export_size: {}` must be a number of GB > 0", where("export_size"), s));
  }
  if (auto d = text_of(values, "infer_dtype"); !d.empty()) c.infer_dtype = d;
  const std::vector<std::string> dtypes = {"auto", "float32", "bfloat16", "float16"};
  if (std::find(dtypes.begin(), dtypes.end(), c.infer_dtype) == dtypes.end())
    problems.push_back(fmt::format("{}: `infer_dtype: {}` is not one of {}", where("infer_dtype"), c.infer_dtype,
                                   fmt::join(dtypes, ", ")));
  if (auto f = text_of(values, "finetuning_type"); !f.empty() && f != "lora" && !c.adapter_name_or_path.empty())
    problems.push_back(fmt::format("{}: `finetuning_type: {}` with an adapter: \"Adapter is only valid for the LoRA "
                                   "method\" (LLaMA-Factory's rule); set `finetuning_type: lora` (or leave it unset): "
                                   "it merges LoRA and OFT adapters alike",
                                   where("finetuning_type"), f));
  // QLoRA: the adapter merges into the unquantized base (LLaMA-Factory's examples/merge_lora: "DO NOT use
  // quantized model or quantization_bit when merging LoRA adapters").
  if (auto q = text_of(values, "quantization_bit"); !q.empty() && !c.adapter_name_or_path.empty())
    problems.push_back(fmt::format("{}: `quantization_bit: {}` with an adapter: cannot merge adapters to a quantized "
                                   "model (LLaMA-Factory's rule); remove quantization_bit and give the unquantized "
                                   "base (bf16 / fp16) as model_name_or_path: a QLoRA adapter merges into it",
                                   where("quantization_bit"), q));
  if (auto b = text_of(values, "export_quantization_bit"); !b.empty())
    problems.push_back(fmt::format("{}: `export_quantization_bit: {}` is refused: lf-train does not quantize "
                                   "(export unquantized, then quantize with the tool of your server)",
                                   where("export_quantization_bit"), b));
  if (auto l = text_of(values, "export_legacy_format"); l == "true" || l == "True")
    problems.push_back(where("export_legacy_format") +
                       ": `export_legacy_format: true` (.bin files) is refused: lf-train writes safetensors only");
  if (auto h = text_of(values, "export_hub_model_id"); !h.empty())
    problems.push_back(fmt::format("{}: `export_hub_model_id: {}` is refused: lf-train never uploads (push export_dir "
                                   "with `huggingface-cli upload {} {}`)",
                                   where("export_hub_model_id"), h, h, c.export_dir));
  LF_CHECK(problems.empty(), ConfigError, "{} problem{} in the export config:\n  {}", problems.size(),
           problems.size() == 1 ? "" : "s", fmt::join(problems, "\n  "));
  if (!ignored.empty())
    c.notes.push_back(fmt::format("export reads model_name_or_path, adapter_name_or_path, export_dir, export_size and "
                                  "infer_dtype; ignored here: {}", fmt::join(ignored, ", ")));
  return c;
}

}  // namespace lf::config
