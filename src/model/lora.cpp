#include "lf/model/lora.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <fmt/ranges.h>

#include <cmath>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>

#include "lf/common/error.h"
#include "lf/model/safetensors.h"
#include "lf/model/tensor_io.h"

namespace lf::model {
namespace fs = std::filesystem;

namespace {

constexpr const char* kPeftPrefix = "base_model.model.";
const std::vector<std::string> kAllLinear = {"q_proj", "k_proj", "v_proj", "o_proj",
                                             "gate_proj", "up_proj", "down_proj"};

std::string module_path(int64_t layer, const std::string& name) {
  const bool attn = name == "q_proj" || name == "k_proj" || name == "v_proj" || name == "o_proj";
  return fmt::format("model.layers.{}.{}.{}", layer, attn ? "self_attn" : "mlp", name);
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

std::vector<std::string> apply_lora(CausalLM& model, const LoraConfig& c) {
  LF_CHECK(c.rank > 0, ConfigError, "lora_rank must be positive, got {}", c.rank);
  LF_CHECK(c.dropout >= 0 && c.dropout < 1, ConfigError, "lora_dropout must be in [0, 1), got {}", c.dropout);
  std::vector<std::string> targets;
  if (c.target.size() == 1 && c.target[0] == "all") {
    targets = kAllLinear;
  } else {
    for (const auto& t : c.target) {
      LF_CHECK(std::find(kAllLinear.begin(), kAllLinear.end(), t) != kAllLinear.end(), ConfigError,
               "lora_target '{}' names no module of {} (its linear layers: {}; or 'all')", t,
               model.config().architecture_name, fmt::join(kAllLinear, ", "));
      targets.push_back(t);
    }
  }
  LF_CHECK(!targets.empty(), ConfigError, "lora_target is empty");
  for (auto& p : model.named_parameters()) p.tensor->set_requires_grad(false);

  const auto device = model.layers().front().input_layernorm_.weight_.device();
  auto gen = at::globalContext().defaultGenerator(device);
  {
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_current_seed(c.seed);
  }
  const double scaling = c.effective_alpha() / static_cast<double>(c.rank);
  c10::NoGradGuard no_grad;
  for (auto& layer : model.layers()) {
    for (auto& [name, lin] : layer.linears()) {
      if (std::find(targets.begin(), targets.end(), name) == targets.end()) continue;
      const int64_t out = lin->weight_.size(0), in = lin->weight_.size(1);
      auto o = at::TensorOptions().dtype(at::kFloat).device(device);
      auto w = std::make_unique<LoraWeights>();
      // peft: kaiming_uniform_(a=sqrt(5)) -> U(-1/sqrt(in), 1/sqrt(in)); B = 0.
      const double bound = 1.0 / std::sqrt(static_cast<double>(in));
      w->a_ = at::empty({c.rank, in}, o).uniform_(-bound, bound, gen).set_requires_grad(true);
      w->b_ = at::zeros({out, c.rank}, o).set_requires_grad(true);
      w->scaling_ = scaling;
      w->dropout_ = c.dropout;
      lin->lora_ = std::move(w);
    }
  }
  return targets;
}

std::vector<NamedParam> trainable_parameters(CausalLM& model, bool lora) {
  if (lora) return lora_parameters(model);
  auto params = model.named_parameters();
  for (auto& p : params) p.tensor->set_requires_grad(true);
  return params;
}

std::vector<NamedParam> lora_parameters(CausalLM& model) {
  std::vector<NamedParam> out;
  for (int64_t i = 0; i < model.num_layers(); ++i)
    for (auto& [name, lin] : model.layers()[i].linears())
      if (lin->lora_) {
        const std::string base = kPeftPrefix + module_path(i, name);
        out.push_back({base + ".lora_A.weight", &lin->lora_->a_});
        out.push_back({base + ".lora_B.weight", &lin->lora_->b_});
      }
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
    const auto dot = p.name.rfind(".lora_");
    const auto name_start = p.name.rfind('.', dot - 1) + 1;
    modules.insert(p.name.substr(name_start, dot - name_start));
  }
  save_lazy_tensor_file(dir / "adapter_model.safetensors", tensors);
  nlohmann::ordered_json j = {
      {"alpha_pattern", nlohmann::json::object()},
      {"auto_mapping", nullptr},
      {"base_model_name_or_path", base_model},
      {"bias", "none"},
      {"fan_in_fan_out", false},
      {"inference_mode", true},
      {"init_lora_weights", true},
      {"layers_pattern", nullptr},
      {"layers_to_transform", nullptr},
      {"lora_alpha", c.effective_alpha()},
      {"lora_dropout", c.dropout},
      {"modules_to_save", nullptr},
      {"peft_type", "LORA"},
      {"r", c.rank},
      {"rank_pattern", nlohmann::json::object()},
      {"revision", nullptr},
      {"target_modules", std::vector<std::string>(modules.begin(), modules.end())},
      {"task_type", "CAUSAL_LM"},
      {"use_dora", false},
      {"use_rslora", false},
  };
  std::ofstream(dir / "adapter_config.json") << j.dump(2) << "\n";
}

LoraConfig load_lora_adapter(CausalLM& model, const fs::path& dir) {
  const fs::path cfg_path = dir / "adapter_config.json";
  std::ifstream in(cfg_path);
  LF_CHECK(in.good(), ConfigError, "adapter folder {} has no adapter_config.json", dir.string());
  LoraConfig c;
  try {
    auto j = nlohmann::json::parse(in);
    LF_CHECK(j.value("peft_type", "LORA") == "LORA", ConfigError, "{}: peft_type is not LORA", cfg_path.string());
    LF_CHECK(!j.value("use_dora", false) && !j.value("use_rslora", false), ConfigError,
             "{}: DoRA / rsLoRA adapters are not supported", cfg_path.string());
    c.rank = j.at("r").get<int64_t>();
    c.alpha = j.value("lora_alpha", 8.0);
    c.dropout = j.value("lora_dropout", 0.0);
    const auto& t = j.at("target_modules");
    c.target = t.is_string() ? parse_lora_target(t.get<std::string>()) : t.get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception& e) {
    LF_THROW(ConfigError, "{}: {}", cfg_path.string(), e.what());
  }
  apply_lora(model, c);
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

}  // namespace lf::model
