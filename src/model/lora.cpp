#include "lf/model/lora.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/GradMode.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <map>
#include <regex>
#include <set>

#include "lf/common/error.h"
#include "lf/model/dora.h"
#include "lf/model/pissa.h"
#include "lf/model/safetensors.h"
#include "lf/model/tensor_io.h"

namespace lf::model {
namespace fs = std::filesystem;

namespace {

constexpr const char* kPeftPrefix = "base_model.model.";

// The short names of the model's linear modules, in model order, each once (for messages).
std::vector<std::string> linear_short_names(const CausalLM& model) {
  std::vector<std::string> out;
  for (const auto& l : model.layout().linears)
    if (std::find(out.begin(), out.end(), l.short_name) == out.end()) out.push_back(l.short_name);
  return out;
}

// torch.nn.init.kaiming_uniform_(t, a=math.sqrt(5)) on a [out, in] weight: the bound computed as
// torch computes it (gain, std, sqrt(3) * std), so that it is the same double to the last bit.
void kaiming_uniform_sqrt5(const at::Tensor& t, at::Generator& gen) {
  const double a = std::sqrt(5.0);
  const double gain = std::sqrt(2.0 / (1 + std::pow(a, 2)));
  const double std_dev = gain / std::sqrt(static_cast<double>(t.size(1)));
  const double bound = std::sqrt(3.0) * std_dev;
  t.uniform_(-bound, bound, gen);
}

// peft's modules_to_save (LLaMA-Factory's additional_target): every parameter of a module whose
// name ends with one of the names (a plain suffix, as peft matches: "norm" is every RMSNorm)
// trains fully beside the adapters, in fp32 (LLaMA-Factory upcasts what trains).
template <typename Targeted>
void mark_modules_to_save(CausalLM& model, const LoraConfig& c, const Targeted& lora_targeted) {
  std::set<std::string> used;
  for (auto& p : model.named_parameters()) {
    bool save = false;
    // The module holding p, and each module above it (a saved module saves all of its parameters).
    for (std::string m = p.name.substr(0, p.name.rfind('.')); !m.empty() && !save;
         m = m.find('.') == std::string::npos ? std::string() : m.substr(0, m.rfind('.')))
      for (const auto& t : c.modules_to_save)
        if (m.ends_with(t)) save = true, used.insert(t);
    if (!save) continue;
    const std::string module = p.name.substr(0, p.name.rfind('.'));
    LF_CHECK(!model.config().tie_word_embeddings || (module != "model.embed_tokens" && module != "lm_head"),
             ConfigError,
             "additional_target: {} is tied to the {} (tie_word_embeddings), and peft would train a copy of one "
             "and not the other; not supported", module, module == "lm_head" ? "embedding" : "lm_head");
    LF_CHECK(!lora_targeted(module), ConfigError,
             "additional_target and lora_target both name {}: a module gets an adapter or trains fully, not both",
             module);
    *p.tensor = p.tensor->to(at::kFloat).detach().set_requires_grad(true);
  }
  for (const auto& t : c.modules_to_save) {
    LF_CHECK(!(t == "lm_head" && model.config().tie_word_embeddings), ConfigError,
             "additional_target: lm_head is the embedding here (tie_word_embeddings); not supported");
    LF_CHECK(used.count(t), ConfigError, "additional_target '{}' names no module of {} (e.g. embed_tokens, lm_head, norm)",
             t, model.config().architecture_name);
  }
}

// Each of lora_target's names adapts a linear module of the model (`matched`: those that named one).
void check_targets_named(const CausalLM& model, const std::vector<std::string>& targets,
                         const std::set<std::string>& matched) {
  for (const auto& t : targets) {
    LF_CHECK(t != "lm_head" && t != "embed_tokens" && !t.ends_with(".lm_head") && !t.ends_with(".embed_tokens"),
             ConfigError,
             "lora_target '{}': LoRA on the embedding or lm_head is not supported (to train it fully beside LoRA, "
             "name it in additional_target)", t);
    LF_CHECK(matched.count(t), ConfigError,
             "lora_target '{}' names no module of {} (its linear layers: {}, also as self_attn.q_proj or "
             "model.layers.N.mlp.down_proj; or 'all'){}",
             t, model.config().architecture_name, fmt::join(linear_short_names(model), ", "),
             model.layout().moe_layers == 0
                 ? ""
                 : ". Its router (mlp.gate) and experts (mlp.experts) are fused parameters in transformers 5, not "
                   "nn.Linear modules: peft cannot adapt them through target_modules, so LLaMA-Factory's LoRA never "
                   "does; train them with finetuning_type: full or freeze");
  }
}

}  // namespace

std::vector<std::string> parse_lora_target(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(start, end - start);
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(item);
    start = end + 1;
  }
  return out;
}

std::vector<std::string> apply_lora(CausalLM& model, const LoraConfig& c, at::Generator* shared_gen) {
  LF_CHECK(c.rank > 0, ConfigError, "lora_rank must be positive, got {}", c.rank);
  if (c.oft) check_oft_config(*c.oft);
  LF_CHECK(c.dropout >= 0 && c.dropout < 1, ConfigError, "lora_dropout must be in [0, 1), got {}", c.dropout);
  LF_CHECK(!c.target.empty(), ConfigError, "lora_target is empty");
  const bool all = c.target.size() == 1 && c.target[0] == "all";
  std::set<std::string> matched;  // the targets that named a module
  auto targeted = [&](const std::string& full) {
    bool any = false;
    for (const auto& t : c.target)
      if (lora_target_matches(full, t)) matched.insert(t), any = true;
    return any;
  };
  std::vector<std::string> short_names;  // of the targeted modules, in model order
  const auto linears = model.linears();
  for (const auto& l : linears)
    if (!all) (void)targeted(l.spec->module);
  if (!all) check_targets_named(model, c.target, matched);
  for (auto& p : model.named_parameters()) p.tensor->set_requires_grad(false);
  auto lora_on = [&](const std::string& module) {
    if (!all) return targeted(module);
    for (const auto& l : linears)
      if (l.spec->in_all && l.spec->module == module) return true;
    return false;
  };
  mark_modules_to_save(model, c, lora_on);

  const auto device = model.lm_head_weight().device();
  // peft's draws under LLaMA-Factory (transformers.set_seed(seed), then get_peft_model): torch's
  // CPU generator seeded with `seed` (loading a checkpoint draws nothing from it), then per targeted
  // module in model order nn.Linear's own init of A [r,in] and of B [out,r], then peft's
  // kaiming_uniform_(A, a=sqrt(5)) and B = 0 -- on the CPU whatever the device, as peft does.
  at::Generator own = shared_gen ? at::Generator() : at::detail::createCPUGenerator(c.seed);
  at::Generator& gen = shared_gen ? *shared_gen : own;
  // peft: alpha / r, rsLoRA alpha / sqrt(r).
  const double scaling = c.effective_alpha() / (c.use_rslora ? std::sqrt(static_cast<double>(c.rank))
                                                             : static_cast<double>(c.rank));
  c10::NoGradGuard no_grad;
  for (const auto& [spec, lin] : linears) {
    if (all ? !spec->in_all : !targeted(spec->module)) continue;
    const auto& name = spec->short_name;
    if (std::find(short_names.begin(), short_names.end(), name) == short_names.end()) short_names.push_back(name);
    const int64_t out = lin->out_features(), in = lin->in_features();
    if (c.oft) {  // peft's OFT layer: zeros, no draws (oft.h)
      lin->oft_ = std::make_unique<OftWeights>(make_oft_weights(*c.oft, in, device));
      continue;
    }
    auto cpu = at::TensorOptions().dtype(at::kFloat);
    auto a = at::empty({c.rank, in}, cpu);
    kaiming_uniform_sqrt5(a, gen);                                // nn.Linear(in, r)
    kaiming_uniform_sqrt5(at::empty({out, c.rank}, cpu), gen);  // nn.Linear(r, out), zeroed below
    at::Tensor b = at::zeros({out, c.rank}, cpu);
    if (c.pissa) {  // peft's update_layer: pissa_init instead of reset_lora_parameters
      std::tie(a, b) = pissa_init(lin->weight_, c.rank, scaling, c.pissa_iter, gen);
    } else {
      kaiming_uniform_sqrt5(a, gen);  // peft's reset_lora_parameters
    }
    auto w = std::make_unique<LoraWeights>();
    w->a_ = a.to(device).set_requires_grad(true);
    w->b_ = b.to(device).set_requires_grad(true);
    w->scaling_ = scaling;
    w->dropout_ = c.dropout;
    // peft's DoraLinearVariant.init, after the draws: m = ||W + s·B A||_c with B = 0 (dora.h).
    if (c.use_dora) w->magnitude_ = dora_weight_norm(lin->weight_, w->a_, w->b_, scaling).set_requires_grad(true);
    lin->lora_ = std::move(w);
  }
  return short_names;
}

std::vector<NamedParam> trainable_parameters(CausalLM& model, bool lora) {
  if (lora) return lora_parameters(model);
  auto params = model.named_parameters();
  if (model.partly_frozen()) {  // finetuning_type freeze: the parameters apply_freeze left trainable
    std::vector<NamedParam> out;
    for (auto& p : params)
      if (p.tensor->requires_grad()) out.push_back(p);
    return out;
  }
  for (auto& p : params) p.tensor->set_requires_grad(true);
  return params;
}

std::vector<NamedParam> lora_parameters(CausalLM& model) {
  std::vector<NamedParam> out;
  for (const auto& [spec, lin] : model.linears())
    if (lin->lora_) {
      const std::string base = kPeftPrefix + spec->module;
      out.push_back({base + ".lora_A.weight", &lin->lora_->a_, spec->unit});
      out.push_back({base + ".lora_B.weight", &lin->lora_->b_, spec->unit});
      if (lin->lora_->magnitude_.defined())
        out.push_back({base + ".lora_magnitude_vector", &lin->lora_->magnitude_, spec->unit});
    } else if (lin->oft_) {  // peft's OFT: one tensor per module
      out.push_back({kPeftPrefix + spec->module + ".oft_R.weight", &lin->oft_->weight_, spec->unit});
    }
  // peft's modules_to_save: the base parameters apply_lora left trainable, as peft saves them
  // (after the adapters, in model order). apply_lora froze every other base parameter.
  if (!out.empty())
    for (auto& p : model.named_parameters())
      if (p.tensor->requires_grad()) out.push_back({kPeftPrefix + p.name, p.tensor, p.unit});
  return out;
}

void save_lora_adapter(CausalLM& model, const LoraConfig& c, const fs::path& dir, const std::string& base_model,
                       const std::function<at::Tensor(const NamedParam&)>& value_of, bool write_files) {
  const auto params = lora_parameters(model);
  LF_CHECK(!params.empty(), ConfigError, "save_lora_adapter: the model has no LoRA weights");
  if (!write_files) {
    for (const auto& p : params) (void)value_of(p);
    return;
  }
  fs::create_directories(dir);
  std::vector<LazyTensor> tensors;
  std::set<std::string> modules;
  for (const auto& p : params) {
    tensors.push_back({p.name, p.tensor->sizes().vec(), at::kFloat, [&value_of, p] {
                         return value_of ? value_of(p) : *p.tensor;
                       }});
    auto dot = p.name.rfind(".lora_");
    if (dot == std::string::npos) dot = p.name.rfind(".oft_R.");
    if (dot == std::string::npos) continue;  // a module to save
    const auto name_start = p.name.rfind('.', dot - 1) + 1;
    modules.insert(p.name.substr(name_start, dot - name_start));
  }
  save_lazy_tensor_file(dir / "adapter_model.safetensors", tensors);
  // peft saves the names it was given; LLaMA-Factory gives it the short names of every linear
  // layer for "all" (a set: sorted here).
  const bool all = c.target.size() == 1 && c.target[0] == "all";
  std::vector<std::string> targets = all ? std::vector<std::string>(modules.begin(), modules.end()) : c.target;
  std::ofstream(dir / "adapter_config.json")
      << (c.oft ? peft_oft_adapter_config(*c.oft, base_model, targets, c.modules_to_save)
                : peft_adapter_config(c, base_model, targets))
      << "\n";
}

std::string peft_adapter_config(const LoraConfig& c, const std::string& base_model,
                                const std::vector<std::string>& target_modules) {
  // LLaMA-Factory's lora_alpha is an int (rank x 2 when unset): 16, not 16.0.
  const double alpha = c.effective_alpha();
  const nlohmann::json alpha_json = alpha == std::floor(alpha) && std::fabs(alpha) < 1e15
                                        ? nlohmann::json(static_cast<int64_t>(alpha))
                                        : nlohmann::json(alpha);
  // Every field peft's LoraConfig writes, with its defaults (json: sorted keys, as peft's dump).
  const nlohmann::json j = {
      {"alora_invocation_tokens", nullptr},
      {"alpha_pattern", nlohmann::json::object()},
      {"arrow_config", nullptr},
      {"auto_mapping", nullptr},
      {"base_model_name_or_path", base_model},
      {"bias", "none"},
      {"corda_config", nullptr},
      {"ensure_weight_tying", false},
      {"eva_config", nullptr},
      {"exclude_modules", nullptr},
      {"fan_in_fan_out", false},
      {"inference_mode", true},
      {"init_lora_weights", c.pissa ? nlohmann::json(c.init_lora_weights()) : nlohmann::json(true)},
      {"layer_replication", nullptr},
      {"layers_pattern", nullptr},
      {"layers_to_transform", nullptr},
      {"loftq_config", nlohmann::json::object()},
      {"lora_alpha", alpha_json},
      {"lora_bias", false},
      {"lora_dropout", c.dropout},
      {"megatron_config", nullptr},
      {"megatron_core", "megatron.core"},
      {"modules_to_save", c.modules_to_save.empty() ? nlohmann::json() : nlohmann::json(c.modules_to_save)},
      {"peft_type", "LORA"},
      {"peft_version", kPeftFormatVersion},
      {"qalora_group_size", 16},
      {"r", c.rank},
      {"rank_pattern", nlohmann::json::object()},
      {"revision", nullptr},
      {"target_modules", target_modules},
      {"target_parameters", nullptr},
      {"task_type", "CAUSAL_LM"},
      {"trainable_token_indices", nullptr},
      {"use_dora", c.use_dora},
      {"use_qalora", false},
      {"use_rslora", c.use_rslora},
  };
  return j.dump(2);
}

LoraConfig load_lora_adapter(CausalLM& model, const fs::path& dir, at::Generator* gen) {
  const fs::path cfg_path = dir / "adapter_config.json";
  std::ifstream in(cfg_path);
  LF_CHECK(in.good(), ConfigError, "adapter folder {} has no adapter_config.json", dir.string());
  LoraConfig c;
  try {
    auto j = nlohmann::json::parse(in);
    const auto peft_type = j.value("peft_type", std::string("LORA"));
    LF_CHECK(peft_type == "LORA" || peft_type == "OFT", ConfigError,
             "{}: peft_type is {}; lf-train loads LORA and OFT adapters", cfg_path.string(), peft_type);
    if (peft_type == "OFT") c.oft = oft_config_from_adapter_json(j.dump(), cfg_path.string());
    c.use_dora = j.value("use_dora", false);
    if (j.contains("modules_to_save") && j["modules_to_save"].is_array())
      c.modules_to_save = j["modules_to_save"].get<std::vector<std::string>>();
    for (const char* key : {"layers_to_transform", "layer_replication", "trainable_token_indices",
                            "target_parameters"})
      LF_CHECK(!j.contains(key) || j[key].is_null() || j[key].empty(), ConfigError,
               "{}: `{}` is set; lf-train loads plain LoRA adapters only", cfg_path.string(), key);
    for (const char* key : {"rank_pattern", "alpha_pattern"})
      LF_CHECK(!j.contains(key) || j[key].is_null() || j[key].empty(), ConfigError,
               "{}: `{}` is set (per-module ranks); lf-train loads one rank for every module", cfg_path.string(), key);
    LF_CHECK(j.value("bias", std::string("none")) == "none" && !j.value("lora_bias", false), ConfigError,
             "{}: trained biases (`bias` / `lora_bias`) are not supported", cfg_path.string());
    if (!c.oft) c.rank = j.at("r").get<int64_t>();
    c.alpha = j.value("lora_alpha", 8.0);
    c.dropout = j.value("lora_dropout", 0.0);
    c.use_rslora = j.value("use_rslora", false);
    const auto& t = j.at("target_modules");
    if (t.is_string()) {
      // peft: a string is a regular expression every module's full name must match entirely.
      const std::regex re(t.get<std::string>());
      c.target.clear();
      for (const auto& l : model.layout().linears)
        if (std::regex_match(l.module, re)) c.target.push_back(l.module);
      LF_CHECK(!c.target.empty(), ConfigError, "{}: target_modules '{}' matches no module", cfg_path.string(),
               t.get<std::string>());
    } else {
      c.target = t.get<std::vector<std::string>>();
    }
  } catch (const nlohmann::json::exception& e) {
    LF_THROW(ConfigError, "{}: {}", cfg_path.string(), e.what());
  } catch (const std::regex_error& e) {
    LF_THROW(ConfigError, "{}: target_modules is not a regular expression: {}", cfg_path.string(), e.what());
  }
  apply_lora(model, c, gen);
  SafetensorsFile file(dir / "adapter_model.safetensors");
  auto params = lora_parameters(model);
  std::set<std::string> expected;
  for (const auto& p : params) {
    expected.insert(p.name);
    const auto* info = file.find(p.name);
    LF_CHECK(info, ConfigError, "{} lacks tensor '{}'", file.path().string(), p.name);
    LF_CHECK(info->shape == p.tensor->sizes().vec(), ConfigError, "{}: tensor '{}' has shape [{}], expected [{}]",
             file.path().string(), p.name, fmt::join(info->shape, ", "), fmt::join(p.tensor->sizes(), ", "));
  }
  for (const auto& info : file.tensors())
    LF_CHECK(expected.count(info.name), ConfigError, "{} has unexpected tensor '{}'", file.path().string(), info.name);
  c10::NoGradGuard no_grad;
  for (const auto& p : params) {
    const auto* info = file.find(p.name);
    p.tensor->copy_(read_tensor(*info, file.data(*info)));
  }
  return c;
}

void merge_lora_adapter(CausalLM& model, const fs::path& dir, at::Generator* gen) {
  // The dtype every base parameter had (a saved module comes back to it).
  std::map<std::string, at::ScalarType> dtype;
  for (auto& p : model.named_parameters()) dtype[p.name] = p.tensor->scalar_type();
  load_lora_adapter(model, dir, gen);
  c10::NoGradGuard no_grad;
  for (auto& [spec, lin] : model.linears()) {
    if (!lin->lora_ && !lin->oft_) continue;
    // peft's get_delta_weight: B @ A x scaling in the adapter's fp32, added into the weight; DoRA's
    // merge scales each row of the sum by m / its norm (dora.h).
    if (lin->oft_) {  // peft's OFT merge: W R_bd^T (oft.h)
      lin->weight_.copy_(oft_merged_weight(lin->weight_, *lin->oft_));
      lin->oft_.reset();
      continue;
    }
    const auto& w = *lin->lora_;
    if (w.magnitude_.defined())
      lin->weight_.copy_(dora_merged_weight(lin->weight_, w.a_, w.b_, w.magnitude_, w.scaling_));
    else
      lin->weight_.add_(at::matmul(w.b_, w.a_).mul_(w.scaling_).to(lin->weight_.device()));
    lin->lora_.reset();
  }
  for (auto& p : model.named_parameters()) {
    if (p.tensor->requires_grad()) *p.tensor = p.tensor->detach().to(dtype.at(p.name));
    p.tensor->set_requires_grad(false);
  }
}

LoraConfig prepare_lora(CausalLM& model, const LoraConfig& config, const std::vector<fs::path>& adapters,
                        bool create_new_adapter, at::Generator* shared) {
  auto own = at::detail::createCPUGenerator(config.seed);
  at::Generator& gen = shared ? *shared : own;
  const size_t merged = adapters.empty() || create_new_adapter ? adapters.size() : adapters.size() - 1;
  for (size_t i = 0; i < merged; ++i) merge_lora_adapter(model, adapters[i], &gen);
  if (merged < adapters.size()) {
    LoraConfig resumed = load_lora_adapter(model, adapters.back(), &gen);
    resumed.seed = config.seed;
    return resumed;
  }
  apply_lora(model, config, &gen);
  return config;
}

}  // namespace lf::model
