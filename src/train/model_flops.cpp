#include "lf/train/model_flops.h"

#include "lf/model/causal_lm.h"
#include "lf/model/lora.h"

#include <string>

namespace lf::train {

ModelFlops model_flops(model::CausalLM& m, int64_t trainable_params) {
  double n = 0;
  for (auto& p : m.named_parameters()) n += static_cast<double>(p.tensor->numel());
  // The adapters' A/B (not the modules to save: those are base tensors, counted above).
  for (auto& p : model::lora_parameters(m))
    if (p.name.find(".lora_") != std::string::npos) n += static_cast<double>(p.tensor->numel());
  const auto& cfg = m.config();
  return {4.0 * n + 2.0 * static_cast<double>(trainable_params),
          12.0 * static_cast<double>(cfg.num_layers) * static_cast<double>(cfg.hidden_size)};
}

}  // namespace lf::train
