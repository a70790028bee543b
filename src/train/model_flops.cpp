#include "lf/train/model_flops.h"

#include "lf/model/causal_lm.h"
#include "lf/model/lora.h"

#include <string>

namespace lf::train {

ModelFlops model_flops(model::CausalLM& m, double trainable_params) {
  // The parameters a token's forward uses and the attention's FLOPs, as the family's layout counts them.
  const auto& layout = m.layout();
  double n = layout.params_per_token;
  // The adapters' A/B (not the modules to save: those are base tensors, counted above).
  for (auto& p : model::lora_parameters(m))
    if (p.name.find(".lora_") != std::string::npos) n += static_cast<double>(p.tensor->numel());
  return {4.0 * n + 2.0 * trainable_params, layout.attention_flops_per_token_position};
}


}  // namespace lf::train
