#pragma once
// The optimizer a job asks for and its settings, as LLaMA-Factory 0.9.5's YAML keys say them (its
// GaloreArguments, ApolloArguments, BAdamArgument, use_adam_mini, use_muon, and HF's `optim`): the plan's
// optimizer section holds this; the optimizer registry (optimizer.h) builds from it. Torch-free.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace lf::optim {

// GaLore (galore-torch's GaLoreAdamW): Adam's moments on each target matrix's gradient projected on the
// top-`rank` singular vectors, refreshed by an SVD every `update_interval` steps, the update projected back
// and scaled by `scale`.
struct GaloreOptions {
  std::vector<std::string> target{"all"};  // module-name substrings; "all": every linear layer but lm_head
  int64_t rank = 16;
  int64_t update_interval = 200;
  double scale = 2.0;
  std::string proj_type = "std";  // std | reverse_std | right | left | full
  bool layerwise = false;         // LLaMA-Factory's per-parameter steps in backward: no clipping
};

// APOLLO (apollo-torch's APOLLOAdamW): Adam's moments on a random (or SVD) projection of each target
// matrix's gradient, used only for a channel- or tensor-wise scale of the raw gradient.
struct ApolloOptions {
  std::vector<std::string> target{"all"};
  int64_t rank = 16;
  int64_t update_interval = 200;
  double scale = 32.0;
  std::string proj = "random";      // random | svd
  std::string proj_type = "std";    // std | right | left
  std::string scale_type = "channel";  // channel | tensor
  bool layerwise = false;
  bool scale_front = false;  // read by LLaMA-Factory into a group key apollo-torch never reads: no effect
};

// BAdam (badam's BlockOptimizer): one decoder layer trains at a time, switched every switch_interval steps.
struct BadamOptions {
  std::string mode = "layer";  // layer | ratio
  std::optional<int64_t> start_block;  // unset: the switch mode's first block
  std::string switch_mode = "ascending";  // ascending | descending | random | fixed
  int64_t switch_interval = 50;
  double update_ratio = 0.05;
  std::string mask_mode = "adjacent";
};

struct OptimizerOptions {
  std::string optim = "adamw_torch_fused";  // HF's `optim` (transformers 5's default) (adamw_torch, adamw_torch_fused, adamw_hf, adamw_8bit, ...)
  bool use_muon = false;
  bool use_galore = false;
  bool use_apollo = false;
  bool use_badam = false;
  bool use_adam_mini = false;
  GaloreOptions galore;
  ApolloOptions apollo;
  BadamOptions badam;
};

// Whether HF's `optim` names bitsandbytes' 8-bit AdamW (adamw_8bit, adamw_bnb_8bit, paged_adamw_8bit: paging
// moves the states, not the numbers).
inline bool is_adamw_8bit(std::string_view optim) {
  return optim == "adamw_8bit" || optim == "adamw_bnb_8bit" || optim == "paged_adamw_8bit";
}

// The registry name of the optimizer the options choose, in LLaMA-Factory's create_custom_optimizer
// order (GaLore, APOLLO, [LoRA+: AdamW], BAdam, Adam-mini, Muon), else HF's `optim`: "galore", "apollo",
// "badam", "adam_mini", "muon", "adamw_8bit" (adamw_8bit, adamw_bnb_8bit, paged_adamw_8bit: paging moves
// the states, not the numbers) or "adamw" (adamw_torch, adamw_torch_fused, adamw_hf). `loraplus`: a LoRA+
// ratio is set (LLaMA-Factory builds its AdamW groups before looking at BAdam, Adam-mini or Muon).
inline std::string_view optimizer_name(const OptimizerOptions& o, bool loraplus = false) {
  if (o.use_galore) return "galore";
  if (o.use_apollo) return "apollo";
  if (loraplus) return "adamw";
  if (o.use_badam) return "badam";
  if (o.use_adam_mini) return "adam_mini";
  if (o.use_muon) return "muon";
  if (is_adamw_8bit(o.optim)) return "adamw_8bit";
  return "adamw";
}

}  // namespace lf::optim
