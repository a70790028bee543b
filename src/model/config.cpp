#include "lf/model/config.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model_spec.h"
#include "lf/common/error.h"

namespace lf::model {
using nlohmann::json;

namespace {

template <typename T>
T get_or(const json& j, const char* key, T fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  return it->get<T>();
}

template <typename T>
T require(const json& j, const char* key, const std::string& source) {
  auto it = j.find(key);
  LF_CHECK(it != j.end() && !it->is_null(), ConfigError, "{}: missing required key '{}'", source, key);
  return it->get<T>();
}

// transformers' _compute_yarn_parameters: factor (else max_position_embeddings / original), the
// attention factor from mscale / mscale_all_dim when not given, beta_fast 32, beta_slow 1.
void parse_yarn(const json& j, const json& params, ModelConfig& c, const std::string& where) {
  auto& r = c.rope;
  r.original_max_position_embeddings = get_or<int64_t>(
      params, "original_max_position_embeddings", get_or<int64_t>(j, "original_max_position_embeddings", 0));
  LF_CHECK(r.original_max_position_embeddings > 0, ConfigError, "{}: missing original_max_position_embeddings", where);
  r.factor = get_or<double>(params, "factor", static_cast<double>(c.max_position_embeddings) /
                                                  static_cast<double>(r.original_max_position_embeddings));
  const auto mscale = [](double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; };
  const double ms = get_or<double>(params, "mscale", 0.0), ms_all = get_or<double>(params, "mscale_all_dim", 0.0);
  r.attention_factor = get_or<double>(
      params, "attention_factor", ms != 0 && ms_all != 0 ? mscale(r.factor, ms) / mscale(r.factor, ms_all) : mscale(r.factor, 1.0));
  const double fast = get_or<double>(params, "beta_fast", 0.0), slow = get_or<double>(params, "beta_slow", 0.0);
  r.beta_fast = fast != 0 ? fast : 32;  // transformers: `or 32`
  r.beta_slow = slow != 0 ? slow : 1;
  r.truncate = get_or<bool>(params, "truncate", true);
}

void parse_rope(const json& j, ModelConfig& c, const std::string& source) {
  // transformers 5 folds rope_theta into rope_parameters; 4.x has rope_theta + rope_scaling.
  json params = json::object();
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) params = j["rope_parameters"];
  else if (j.contains("rope_scaling") && j["rope_scaling"].is_object()) params = j["rope_scaling"];
  c.rope = read_rope(j, params, c, get_or<double>(j, "rope_theta", 10000.0), source);
}

}  // namespace

RopeConfig read_rope(const json& j, const json& params, const ModelConfig& mc, double default_theta,
                     const std::string& source) {
  ModelConfig c = mc;  // parse_yarn reads max_position_embeddings
  c.rope = RopeConfig{};
  c.rope.theta = get_or<double>(params, "rope_theta", default_theta);
  c.rope.type = get_or<std::string>(params, "rope_type", get_or<std::string>(params, "type", "default"));
  const double partial = get_or<double>(params, "partial_rotary_factor", get_or<double>(j, "partial_rotary_factor", 1.0));
  LF_CHECK(partial == 1.0, ConfigError,
           "{}: partial_rotary_factor {} is not supported (lf-train rotates every dimension of a head)", source, partial);
  const std::string where = source + " rope " + c.rope.type;
  if (c.rope.type == "llama3") {
    c.rope.factor = require<double>(params, "factor", where);
    c.rope.low_freq_factor = require<double>(params, "low_freq_factor", where);
    c.rope.high_freq_factor = require<double>(params, "high_freq_factor", where);
    c.rope.original_max_position_embeddings = require<int64_t>(params, "original_max_position_embeddings", where);
  } else if (c.rope.type == "linear" || c.rope.type == "dynamic") {
    c.rope.factor = require<double>(params, "factor", where);
  } else if (c.rope.type == "yarn") {
    parse_yarn(j, params, c, where);
  } else {
    LF_CHECK(c.rope.type == "default", ConfigError,
             "{}: rope_type '{}' is not supported (supported: default, linear, dynamic, yarn, llama3)", source,
             c.rope.type);
  }
  return c.rope;
}

ModelConfig parse_model_config(const std::string& json_text, const std::string& source) {
  json j;
  try {
    j = json::parse(json_text);
  } catch (const std::exception& e) {
    LF_THROW(ConfigError, "{}: not valid JSON: {}", source, e.what());
  }
  LF_CHECK(j.is_object(), ConfigError, "{}: expected a JSON object", source);
  // A checkpoint stored quantized (GPTQ, AWQ, AQLM, ...): its linear weights are packed integers that
  // lf-train's loader would not read as what they are (issue 34: never train on a stand-in). bitsandbytes'
  // folders are QLoRA's (model/bnb4_checkpoint.cpp reads the 4-bit ones and refuses the rest).
  if (j.contains("quantization_config") && j["quantization_config"].is_object()) {
    const auto& q = j["quantization_config"];
    const std::string method = q.contains("quant_method") && q["quant_method"].is_string() ? q["quant_method"].get<std::string>() : "unknown";
    if (method != "bitsandbytes")
      LF_THROW(ConfigError,
               "{}: the checkpoint is stored quantized (quantization_config, quant_method '{}'); lf-train does not train "
               "on {}-quantized weights (LLaMA-Factory's GPTQ / AWQ / AQLM examples): point model_name_or_path at the "
               "model's unquantized checkpoint (quantization_bit: 4 quantizes it as bitsandbytes at load)",
               source, method, method);
  }
  ModelConfig c;
  c.raw_json = json_text;
  const ModelSpec* family = nullptr;
  try {
    std::string arch;
    if (j.contains("architectures") && j["architectures"].is_array() && !j["architectures"].empty())
      arch = j["architectures"][0].get<std::string>();
    c.model_type = get_or<std::string>(j, "model_type", "");
    family = find_model_spec(arch, c.model_type);
    if (!family) {
      const auto why = refused_architecture_reason(arch, c.model_type);
      LF_CHECK(why.empty(), ConfigError, "{}: architecture '{}' (model_type '{}') is not supported: {}; supported: {}",
               source, arch, c.model_type, why, supported_architectures());
    }
    LF_CHECK(family, ConfigError, "{}: unknown architecture '{}' (model_type '{}'); supported: {}", source, arch,
             c.model_type, supported_architectures());
    c.spec = family;
    c.architecture_name = family->architecture;
    c.model_type = family->model_type;
    c.vocab_size = require<int64_t>(j, "vocab_size", source);
    c.hidden_size = require<int64_t>(j, "hidden_size", source);
    c.intermediate_size = require<int64_t>(j, "intermediate_size", source);
    c.num_layers = require<int64_t>(j, "num_hidden_layers", source);
    c.num_heads = require<int64_t>(j, "num_attention_heads", source);
    c.num_kv_heads = get_or<int64_t>(j, "num_key_value_heads", c.num_heads);
    LF_CHECK(c.num_heads > 0 && c.hidden_size > 0, ConfigError, "{}: sizes must be positive", source);
    c.head_dim = get_or<int64_t>(j, "head_dim", c.hidden_size / c.num_heads);
    c.max_position_embeddings = get_or<int64_t>(j, "max_position_embeddings", 2048);
    c.rms_norm_eps = get_or<double>(j, "rms_norm_eps", 1e-6);
    c.initializer_range = get_or<double>(j, "initializer_range", 0.02);
    c.tie_word_embeddings = get_or<bool>(j, "tie_word_embeddings", false);
    c.torch_dtype = get_or<std::string>(j, "torch_dtype", get_or<std::string>(j, "dtype", "float32"));
    const std::string act = get_or<std::string>(j, "hidden_act", "silu");
    LF_CHECK(act == "silu", ConfigError, "{}: hidden_act '{}' is not supported (silu only)", source, act);
    parse_rope(j, c, source);
    family->read_config(j, c, source);  // the family's own keys (biases, q/k norms, sliding window, its RoPE)
  } catch (const nlohmann::json::exception& e) {
    LF_THROW(ConfigError, "{}: bad value: {}", source, e.what());
  }
  LF_CHECK(c.num_kv_heads > 0 && c.num_heads % c.num_kv_heads == 0, ConfigError,
           "{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", source, c.num_heads,
           c.num_kv_heads);
  LF_CHECK(c.head_dim % 2 == 0, ConfigError, "{}: head_dim {} must be even for RoPE", source, c.head_dim);
  return c;
}

ModelConfig load_model_config(const std::filesystem::path& config_json) {
  std::ifstream in(config_json);
  LF_CHECK(in.good(), ConfigError, "cannot read model config {}", config_json.string());
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_model_config(ss.str(), config_json.string());
}

std::string model_config_json_for_save(const ModelConfig& config, const std::string& dtype_name) {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(config.raw_json);
  j["architectures"] = {config.architecture_name};
  j["model_type"] = config.model_type;
  if (j.contains("dtype")) j["dtype"] = dtype_name;
  else j["torch_dtype"] = dtype_name;
  j.erase("init_weights");
  return j.dump(2) + "\n";
}

}  // namespace lf::model
