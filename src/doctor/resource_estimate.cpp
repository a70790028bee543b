#include "lf/doctor/resource_estimate.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <tuple>
#include <vector>

#include "lf/common/error.h"

namespace lf::doctor {

namespace {

int64_t get(const nlohmann::json& j, const char* key, const std::filesystem::path& file) {
  const auto it = j.find(key);
  LF_CHECK(it != j.end() && it->is_number_integer(), ConfigError, "{}: no integer `{}` (a Llama/Qwen2 config.json?)",
           file.string(), key);
  return it->get<int64_t>();
}

}  // namespace

ResourceEstimate estimate_resources(const config::TrainConfig& c, const std::filesystem::path& config_json,
                                    int64_t world) {
  std::ifstream in(config_json);
  LF_CHECK(in, ConfigError, "cannot read {}", config_json.string());
  const auto j = nlohmann::json::parse(in, nullptr, false);
  LF_CHECK(j.is_object(), ConfigError, "{} is not a JSON object", config_json.string());
  const int64_t V = get(j, "vocab_size", config_json), H = get(j, "hidden_size", config_json),
                I = get(j, "intermediate_size", config_json), L = get(j, "num_hidden_layers", config_json),
                nh = get(j, "num_attention_heads", config_json);
  const int64_t nkv = j.value("num_key_value_heads", nh);
  const int64_t hd = j.contains("head_dim") && j["head_dim"].is_number_integer() ? j["head_dim"].get<int64_t>() : H / nh;
  const bool tied = j.value("tie_word_embeddings", false);
  const bool qkv_bias = j.value("model_type", std::string()) == "qwen2" || j.value("attention_bias", false);
  // [in, out] of each linear of a layer, by the names lora_target uses.
  const std::vector<std::tuple<std::string, int64_t, int64_t>> linears = {
      {"q_proj", H, nh * hd}, {"k_proj", H, nkv * hd}, {"v_proj", H, nkv * hd}, {"o_proj", nh * hd, H},
      {"gate_proj", H, I},    {"up_proj", H, I},       {"down_proj", I, H}};
  int64_t per_layer = 2 * H + (qkv_bias ? nh * hd + 2 * nkv * hd : 0);
  for (const auto& [name, in_f, out_f] : linears) per_layer += in_f * out_f;
  ResourceEstimate e;
  e.parameters = V * H * (tied ? 1 : 2) + L * per_layer + H;
  const bool full = c.finetuning_type == "full";
  if (full) {
    e.trainable = e.parameters;
  } else {
    const std::set<std::string> targets(c.lora_target.begin(), c.lora_target.end());
    for (const auto& [name, in_f, out_f] : linears)
      if (targets.count("all") || targets.count(name)) e.trainable += L * c.lora_rank * (in_f + out_f);
  }
  e.checkpoint_bytes = 12.0 * static_cast<double>(e.trainable);
  const double low = c.bf16 || c.fp16 ? 2 : 4;  // bytes of the compute copy
  const double shards = static_cast<double>(std::max<int64_t>(world, 1));
  const double P = static_cast<double>(e.parameters), T = static_cast<double>(e.trainable);
  // Full: fp32 master + AdamW moments (12 B), the gradient (4 B), the compute copy when lower
  // precision; ZeRO-1 shards the optimizer, -2 the gradients too, -3 the parameters as well.
  double copy = full ? (low < 4 ? low * P : 0) : low * P;  // LoRA: the frozen base in the compute dtype
  double master = 4 * T, grads = 4 * T, moments = 8 * T;
  if (c.zero_stage >= 1) moments /= shards, master /= shards;
  if (c.zero_stage >= 2) grads /= shards;
  if (c.zero_stage >= 3) copy /= shards;
  const double weights = copy + master;
  e.gpu_weights_bytes = weights;
  e.gpu_optimizer_bytes = moments + grads;
  // Activations of one micro-batch: with checkpointing each layer keeps its input
  // ([B, T, H] in the compute dtype) and one layer is recomputed at a time (~34 H per token
  // as in Korthikanti et al.); fp32 logits and their gradient ([B, T, V]).
  const double tokens = static_cast<double>(c.per_device_train_batch_size * c.cutoff_len);
  const double per_token_layer = c.gradient_checkpointing ? low * H : 34.0 * H;
  e.gpu_activation_bytes = tokens * (static_cast<double>(L) * per_token_layer + 34.0 * H + 8.0 * V);
  return e;
}

}  // namespace lf::doctor
