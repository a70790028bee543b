// The optimizer keys (LLaMA-Factory 0.9.5's GaloreArguments, ApolloArguments, BAdamArgument, use_adam_mini,
// use_muon and HF's `optim`): each read into the plan's optimizer section (lf/optim/optimizer_options.h),
// which the optimizer registry builds from (lf/optim/optimizer.h), and LLaMA-Factory's rules between them.
#include "optimizer_keys.h"

#include "schema_builders.h"

namespace lf::config {

namespace {

using namespace schema;

// The samples' contexts: LLaMA-Factory's default finetuning_type is lora, which GaLore, APOLLO and BAdam refuse.
const std::string kFull = "finetuning_type: full";
const std::string kGalore = kFull + "\nuse_galore: true";
const std::string kApollo = kFull + "\nuse_apollo: true";
const std::string kBadam = kFull + "\nuse_badam: true";

// LLaMA-Factory's FinetuningArguments.__post_init__, parser and _create_*_optimizer refusals that the plan
// can tell (the world-size ones are the optimizer's, optim/optimizer.h; ZeRO's are zero_roles.cpp's).
void check_optimizer_rules(const Reader& r, const JobPlan& c) {
  const auto& o = c.optim.optimizer;
  LF_CHECK(c.adapter.finetuning_type != "lora" || !(o.use_galore || o.use_apollo || o.use_badam), ConfigError,
           "{}: GaLore, APOLLO and BAdam train full weights; finetuning_type is lora (LLaMA-Factory: \"Cannot use "
           "LoRA with GaLore, APOLLO or BAdam together.\"): set finetuning_type full or freeze",
           r.where(o.use_galore ? "use_galore" : o.use_apollo ? "use_apollo" : "use_badam"));
  LF_CHECK(int(o.use_galore) + int(o.use_apollo) + int(o.use_badam) <= 1, ConfigError,
           "use_galore, use_apollo and use_badam: more than one is true (LLaMA-Factory: \"Cannot use GaLore, APOLLO "
           "or BAdam together.\"): keep one");
  const bool eight_bit = optim::is_adamw_8bit(o.optim);
  LF_CHECK(!(o.use_galore || o.use_apollo) || !eight_bit, ConfigError,
           "{}: `optim: {}` with {} asks for {}, which lf-train does not implement: use optim: adamw_torch",
           r.where("optim"), o.optim, o.use_galore ? "use_galore" : "use_apollo",
           o.use_galore ? "galore-torch's GaLoreAdamW8bit" : "an 8-bit APOLLO (LLaMA-Factory stops on it: Unknown optim)");
  // LLaMA-Factory's parser, for any DeepSpeed config (even stage 0).
  LF_CHECK(!(o.use_galore || o.use_apollo) || !r.has("deepspeed"), ConfigError,
           "{}: {} with a DeepSpeed config: LLaMA-Factory refuses it (\"GaLore and APOLLO are incompatible with "
           "DeepSpeed yet.\"): remove `deepspeed` (data parallel without it)",
           r.where("deepspeed"), o.use_galore ? "use_galore" : "use_apollo");
}

KeyDecl optim_key() {
  KeyDecl d = implemented("optim", LF_FIELD(optim, optimizer.optim),
                          "adamw_torch, adamw_torch_fused, adamw_hf: AdamW (HF's defaults); adamw_8bit, "
                          "adamw_bnb_8bit, paged_adamw_8bit: bitsandbytes' 8-bit AdamW (blockwise 8-bit states; paging "
                          "moves them, not the numbers). use_galore / use_apollo / use_badam / use_adam_mini / "
                          "use_muon choose their own")
                  .choices({"adamw_torch", "adamw_torch_fused", "adamw_hf", "adamw_8bit", "adamw_bnb_8bit",
                            "paged_adamw_8bit"},
                           "the other HF optimizers (sgd, adafactor, lion, ...) are not implemented")
                  .sample("adamw_8bit")
                  .observe("losses");
  auto own = d.check;
  d.check = [own](const Reader& r, const JobPlan& c) {
    if (own) own(r, c);
    check_optimizer_rules(r, c);
  };
  return d;
}

std::vector<KeyDecl> galore_keys() {
  return {
      implemented("use_galore", LF_FIELD(optim, optimizer.use_galore),
                  "GaLore (galore-torch's GaLoreAdamW, LLaMA-Factory's groups): Adam's moments of each target matrix "
                  "in a low-rank SVD basis of its gradient")
          .sample("true", kFull)
          .observe("losses"),
      implemented("galore_target", LF_FIELD(optim, optimizer.galore.target),
                  "module-name substrings of the linear layers GaLore projects; all: every linear layer but lm_head")
          .check(not_empty)
          .sample("mlp", kGalore)
          .observe("losses"),
      implemented("galore_rank", LF_FIELD(optim, optimizer.galore.rank)).check(positive).sample("8", kGalore)
          .observe("losses"),
      implemented("galore_update_interval", LF_FIELD(optim, optimizer.galore.update_interval),
                  "steps between two SVDs of the gradient")
          .check(positive)
          .sample("2", kGalore)
          .observe("losses"),
      implemented("galore_scale", LF_FIELD(optim, optimizer.galore.scale), "the projected-back update's factor")
          .sample("1.0", kGalore)
          .observe("losses"),
      implemented("galore_proj_type", LF_FIELD(optim, optimizer.galore.proj_type),
                  "which side projects: std (the smaller), reverse_std, right, left, full (both)")
          .choices({"std", "reverse_std", "right", "left", "full"})
          .sample("reverse_std", kGalore)
          .observe("losses"),
      refused("galore_layerwise",
              "LLaMA-Factory's layer-wise GaLore steps each parameter inside backward with its own optimizer and "
              "scheduler; lf-train's step after backward does not give its per-step losses (tests/fixtures/train/"
              "lf_optim keeps its run as the target): set galore_layerwise false (the same GaLore, one step a step)"),
  };
}

std::vector<KeyDecl> apollo_keys() {
  return {
      implemented("use_apollo", LF_FIELD(optim, optimizer.use_apollo),
                  "APOLLO (apollo-torch's APOLLOAdamW, LLaMA-Factory's groups): Adam's moments in a random projection "
                  "of each target matrix's gradient set a channel- or tensor-wise scale of the gradient")
          .sample("true", kFull)
          .observe("losses"),
      implemented("apollo_target", LF_FIELD(optim, optimizer.apollo.target),
                  "module-name substrings of the linear layers APOLLO scales; all: every linear layer but lm_head")
          .check(not_empty)
          .sample("mlp", kApollo)
          .observe("losses"),
      implemented("apollo_rank", LF_FIELD(optim, optimizer.apollo.rank)).check(positive).sample("8", kApollo)
          .observe("losses"),
      implemented("apollo_update_interval", LF_FIELD(optim, optimizer.apollo.update_interval),
                  "steps between two draws of the projection")
          .check(positive)
          .sample("2", kApollo)
          .observe("losses"),
      implemented("apollo_scale", LF_FIELD(optim, optimizer.apollo.scale), "the update is the scaled gradient x sqrt(this)")
          .sample("8.0", kApollo)
          .observe("losses"),
      implemented("apollo_proj", LF_FIELD(optim, optimizer.apollo.proj), "random (seeded per parameter) or svd")
          .choices({"random", "svd"})
          .sample("svd", kApollo)
          .observe("losses"),
      implemented("apollo_proj_type", LF_FIELD(optim, optimizer.apollo.proj_type),
                  "std projects the shorter side; left / right force one, which apollo_scale_type: channel refuses "
                  "on matrices whose shorter side is the other (apollo-torch stops on them)")
          .choices({"std", "right", "left"})
          .sample("left", kApollo + "\napollo_scale_type: tensor")
          .observe("losses"),
      implemented("apollo_scale_type", LF_FIELD(optim, optimizer.apollo.scale_type)).choices({"channel", "tensor"})
          .sample("tensor", kApollo)
          .observe("losses"),
      refused("apollo_layerwise",
              "as galore_layerwise: LLaMA-Factory steps each parameter inside backward, which lf-train does not "
              "reproduce: set apollo_layerwise false"),
      no_effect("apollo_scale_front", "LLaMA-Factory 0.9.5 passes it as a parameter-group key, which apollo-torch's "
                                      "optimizer never reads (it reads its constructor's scale_front, left false)"),
  };
}

std::vector<KeyDecl> badam_keys() {
  return {
      implemented("use_badam", LF_FIELD(optim, optimizer.use_badam),
                  "BAdam (badam's BlockOptimizer, layer mode, one process): one decoder layer trains at a time under "
                  "a fresh AdamW (weight decay 0.01, badam's), switched every badam_switch_interval steps")
          .sample("true", kFull)
          .observe("losses"),
      only_values("badam_mode", {"layer"},
           "layer (one decoder layer at a time); ratio (badam's sparse BlockOptimizerRatio) is not implemented"),
      implemented("badam_start_block", LF_FIELD(optim, optimizer.badam.start_block),
                  "the first layer that trains; unset: 0 (ascending), the last (descending)")
          .sample("1", kBadam)
          .observe("losses"),
      implemented("badam_switch_mode", LF_FIELD(optim, optimizer.badam.switch_mode))
          .choices({"ascending", "descending", "fixed"},
                   "random draws its order from torch's global generator in LLaMA-Factory's Python process, which "
                   "lf-train cannot reproduce")
          .sample("descending", kBadam)
          .observe("losses"),
      implemented("badam_switch_interval", LF_FIELD(optim, optimizer.badam.switch_interval),
                  "after step s with (s + 1) % this == 0 the next layer trains")
          .check(positive)
          .sample("2", kBadam)
          .observe("losses"),
      no_effect("badam_update_ratio", "used only by badam_mode: ratio, which is refused"),
      no_effect("badam_mask_mode", "used only by badam_mode: ratio, which is refused"),
      no_effect("badam_verbose", "badam's prints of the active block; lf-train's log line names it"),
  };
}

}  // namespace

std::vector<KeyDecl> optimizer_keys() {
  std::vector<KeyDecl> all{
      optim_key(),
      implemented("use_muon", LF_FIELD(optim, optimizer.use_muon),
                  "Muon (LLaMA-Factory's own): 2-D hidden weights by Newton-Schulz-orthogonalised Nesterov momentum "
                  "(0.95, 5 steps) at lr x 0.2 sqrt(max dim), the rest by its AdamW")
          .observe("losses"),
      implemented("use_adam_mini", LF_FIELD(optim, optimizer.use_adam_mini),
                  "Adam-mini (adam-mini 1.1.1): one second moment per head (q, k), output row (embeddings, v, o, "
                  "mlp, lm_head) or tensor (norms)")
          .observe("losses"),
  };
  for (auto part : {galore_keys(), apollo_keys(), badam_keys()})
    for (auto& d : part) all.push_back(std::move(d));
  return all;
}

}  // namespace lf::config
