#pragma once
// OFT (finetuning_type: oft, orthogonal fine-tuning, https://huggingface.co/papers/2306.07280) as peft 0.18.1
// computes it under LLaMA-Factory 0.9.5 (peft/tuners/oft/layer.py: OFTRotationModule, Linear), so that an OFT
// adapter trained here is peft's and loads there:
//   each targeted linear gets oft_R.weight [r, n], n = b(b-1)/2, zero at the start (the identity rotation):
//   r blocks of size b = in / r (LLaMA-Factory's oft_block_size, or oft_rank = r), each the upper triangle of a
//   skew-symmetric Q [b, b]; the block's rotation is Cayley's (I - Q)(I + Q)^-1 as peft approximates it by
//   default (use_cayley_neumann, 5 terms): R = I + 2Q + 2Q² + 2Q³ + Q⁴;
//   the rotation acts on the input: y = W (x R_bd) + bias, x [.., in] cut into r blocks of b
//   (einsum "...rk,rkc->...rc"), in the adapter's fp32, the result cast back to x's dtype.
//   merge: W' = W R_bd^T (peft's merge: (R_bd W^T)^T), in fp32, cast to the weight's dtype.
// peft's module_dropout builds a MultiplicativeDropoutLayer that its Linear.forward never calls (no effect),
// coft / block_share are not LLaMA-Factory keys: adapters that set them are refused on load.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "lf/model/oft_shape.h"

namespace lf::model {

// LLaMA-Factory's OFTArguments as it passes them to peft's OFTConfig.
struct OftConfig {
  int64_t rank = 0;         // oft_rank: blocks per layer (0: from block_size)
  int64_t block_size = 32;  // oft_block_size (0: from rank); exactly one of the two is non-zero (peft's rule)
  double module_dropout = 0;  // written to adapter_config.json; peft 0.18.1 never applies it
  bool use_cayley_neumann = true;  // false: the exact Cayley transform (a solve), as peft without the series
  int64_t num_cayley_neumann_terms = 5;
};

// OFT's weights on one Linear.
struct OftWeights {
  at::Tensor weight_;  // [r, b(b-1)/2] fp32: each block's skew-symmetric upper triangle (peft's oft_R.weight)
  int64_t block_size_ = 0;
  bool use_cayley_neumann_ = true;
  int64_t neumann_terms_ = 5;
};

// Checks the pair (rank, block_size) as peft's OFTConfig does: ConfigError when both or neither are set.
void check_oft_config(const OftConfig& c);

// The block size peft uses on a layer of `in` features (oft_shape.h).
inline int64_t oft_block_size_for(const OftConfig& c, int64_t in) { return oft_block_size_for(c.rank, c.block_size, in); }

// Zero-initialised weights for a layer of `in` features, fp32 on `device`, requiring grad (peft's init_weights True).
OftWeights make_oft_weights(const OftConfig& c, int64_t in, const c10::Device& device);

// Each block's rotation [r, b, b] from oft_R.weight [r, n] (peft's _cayley_batch, op for op).
at::Tensor oft_rotations(const OftWeights& w);

// x [.., in] rotated block by block: x R_bd in fp32, cast back to x's dtype (peft's OFTRotationModule.forward).
at::Tensor oft_rotate(const at::Tensor& x, const OftWeights& w);

// peft's merge: the weight [out, in] times R_bd^T, in fp32, returned in fp32 (the caller casts).
at::Tensor oft_merged_weight(const at::Tensor& weight, const OftWeights& w);

// An OFT adapter_config.json's fields (its text; `where` its path for messages): ConfigError on what lf-train does not
// compute (coft, block_share, layers_to_transform, ...), with the field named.
OftConfig oft_config_from_adapter_json(const std::string& text, const std::string& where);

// adapter_config.json as peft's OFTConfig.save_pretrained writes it under LLaMA-Factory (every field, sorted keys).
std::string peft_oft_adapter_config(const OftConfig& c, const std::string& base_model_name_or_path,
                                    const std::vector<std::string>& target_modules,
                                    const std::vector<std::string>& modules_to_save);

}  // namespace lf::model
