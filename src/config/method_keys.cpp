// The keys of LLaMA-Factory's training methods beyond plain LoRA / freeze / full (method_keys.h):
// declared here, listed in config_schema.cpp.
#include "method_keys.h"

#include "schema_builders.h"

namespace lf::config {

using namespace schema;

// LLaMA-Factory's PiSSA (LoRA, model/pissa.h) and LLaMA Pro (freeze, model/freeze.h): issue 34.
std::vector<KeyDecl> pissa_and_llama_pro_keys() {
  return {
      implemented("use_llama_pro", LF_FIELD(adapter, use_llama_pro),
                  "freeze: LLaMA Pro, the blocks its expansion (LLaMA-Factory's scripts/llama_pro.py) inserted train: "
                  "every (num_layers / freeze_trainable_layers)-th layer, the last of each group")
          .sample("true", "finetuning_type: freeze\nfreeze_trainable_layers: 2")
          .observe("losses"),
      implemented("pissa_init", LF_FIELD(adapter, pissa_init),
                  "LoRA: PiSSA, A and B from the base weights' principal singular values and vectors, the base keeping "
                  "the residual (peft's init_lora_weights pissa / pissa_niter_N)")
          .sample("true", "finetuning_type: lora")
          .observe("losses"),
      implemented("pissa_iter", LF_FIELD(adapter, pissa_iter),
                  "pissa_init: the fast SVD's iterations (torch.svd_lowrank); -1: the full SVD")
          .sample("-1", "pissa_init: true\nfinetuning_type: lora")
          .observe("losses"),
      implemented("pissa_convert", LF_FIELD(adapter, pissa_convert),
                  "LoRA: also writes pissa_init/, pissa_backup/ and pissa_converted/ (an ordinary LoRA adapter of rank "
                  "2r for the original base) into output_dir, as LLaMA-Factory's PissaConvertCallback")
          .sample("true", "finetuning_type: lora")
          .observe("file:pissa_converted"),
  };
}

// sft's token-weighted losses (LLaMA-Factory's FinetuningArguments; src/train/token_weighted_objective.cpp).
std::vector<KeyDecl> sft_loss_keys() {
  return {
      implemented("use_dft_loss", LF_FIELD(objective, use_dft_loss),
                  "sft: DFT, each target token's cross-entropy weighted by its probability (detached), as "
                  "LLaMA-Factory's dft_loss_func")
          .observe("losses"),
      implemented("use_eaft_loss", LF_FIELD(objective, use_eaft_loss),
                  "sft: EAFT, each target token's cross-entropy weighted by (the entropy of its top-20 logits / 3) ^ "
                  "eaft_alpha (detached), as LLaMA-Factory's eaft_loss_func")
          .observe("losses"),
      implemented("eaft_alpha", LF_FIELD(objective, eaft_alpha), "use_eaft_loss: the weight's exponent")
          .check(non_negative)
          .sample("0.5", "use_eaft_loss: true")
          .observe("losses"),
  };
}

// LLaMA-Factory's OFTArguments (finetuning_type oft, model/oft.h): the two it passes to peft's OFTConfig act; the
// other two it parses and never passes (0.9.5's _setup_lora_tuning), or peft never applies.
std::vector<KeyDecl> oft_keys() {
  return {
      implemented("oft_rank", LF_FIELD(adapter, oft_rank),
                  "OFT: rotation blocks per layer (peft's r; 0: from oft_block_size, and exactly one of the two is "
                  "non-zero)")
          .check(non_negative)
          .sample("4", "finetuning_type: oft\noft_block_size: 0\noft_rank: 2")
          .observe("losses"),
      implemented("oft_block_size", LF_FIELD(adapter, oft_block_size),
                  "OFT: the size of each orthogonal block of a layer's input (peft moves a size that does not divide "
                  "the layer's width to the nearest divisor)")
          .check(non_negative)
          .sample("8", "finetuning_type: oft")
          .observe("losses"),
      no_effect("module_dropout",
                "peft 0.18.1 builds OFT's MultiplicativeDropoutLayer from it but its Linear.forward never calls it, "
                "so LLaMA-Factory 0.9.5's OFT runs without it"),
      no_effect("oft_target",
                "LLaMA-Factory 0.9.5 parses it but passes lora_target to peft's OFTConfig: OFT adapts the modules "
                "lora_target names (default all)"),
  };
}

}  // namespace lf::config
