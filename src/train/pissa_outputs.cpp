#include "pissa_outputs.h"

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lf/common/error.h"
#include "lf/model/tensor_io.h"
#include "lf/parallel/strategy.h"

namespace lf::train {
namespace fs = std::filesystem;

namespace {

nlohmann::ordered_json read_json(const fs::path& p) {
  std::ifstream in(p);
  LF_CHECK(in.good(), ConfigError, "pissa_convert: cannot read {}", p.string());
  return nlohmann::ordered_json::parse(in);
}

void write_config(const fs::path& dir, const nlohmann::ordered_json& j) {
  fs::create_directories(dir);
  std::ofstream(dir / "adapter_config.json") << j.dump(2) << "\n";
}

}  // namespace

void save_pissa_init(model::CausalLM& model, const model::LoraConfig& lora, parallel::ParallelStrategy& strategy,
                     const fs::path& out, const std::string& base_model, bool write) {
  model::LoraConfig plain = lora;
  plain.pissa = false;  // the callback saves it with init_lora_weights: true
  const auto value_of = [&](const model::NamedParam& p) { return strategy.full_parameter(p.name); };
  model::save_lora_adapter(model, plain, out / "pissa_init", base_model, value_of, write);
  if (write) spdlog::info("Initial PiSSA adapter will be saved at: {}", (out / "pissa_init").string());
}

void write_pissa_conversion(const fs::path& out) {
  const auto trained = model::load_tensor_file(out / "adapter_model.safetensors");
  const auto initial = model::load_tensor_file(out / "pissa_init" / "adapter_model.safetensors");
  auto config = read_json(out / "adapter_config.json");
  config["init_lora_weights"] = true;
  // pissa_backup: the trained adapter as it is, its config saying an ordinary initialisation.
  fs::create_directories(out / "pissa_backup");
  fs::copy_file(out / "adapter_model.safetensors", out / "pissa_backup" / "adapter_model.safetensors",
                fs::copy_options::overwrite_existing);
  write_config(out / "pissa_backup", config);
  // pissa_converted: peft's subtract_mutated_init (lora_A / lora_B only, as peft keeps).
  std::vector<std::pair<std::string, at::Tensor>> converted;
  for (const auto& [name, t] : trained) {
    const bool is_a = name.find("lora_A") != std::string::npos, is_b = name.find("lora_B") != std::string::npos;
    if (!is_a && !is_b) continue;
    const auto it = initial.find(name);
    LF_CHECK(it != initial.end(), ConfigError, "pissa_convert: {} has no {} (the adapter saved as training began)",
             (out / "pissa_init").string(), name);
    converted.emplace_back(name, is_a ? at::cat({t, it->second}, 0) : at::cat({t, -it->second}, 1));
  }
  fs::create_directories(out / "pissa_converted");
  model::save_tensor_file(out / "pissa_converted" / "adapter_model.safetensors", converted);
  config["r"] = config["r"].get<int64_t>() * 2;
  const double alpha = config["lora_alpha"].get<double>() * (config.value("use_rslora", false) ? std::sqrt(2.0) : 2.0);
  config["lora_alpha"] = alpha == std::floor(alpha) ? nlohmann::ordered_json(static_cast<int64_t>(alpha))
                                                    : nlohmann::ordered_json(alpha);
  write_config(out / "pissa_converted", config);
  spdlog::info("Converted PiSSA adapter will be saved at: {}", (out / "pissa_converted").string());
}

}  // namespace lf::train
