#pragma once
// DoRA (use_dora: weight-decomposed LoRA, https://huggingface.co/papers/2402.09353) as peft 0.18
// computes it (peft/tuners/lora/dora.py, DoraLinearLayer and DoraLinearVariant), so that a DoRA
// adapter trained here is peft's and loads there:
//   magnitude m [out], initialised to ||W + s·B A||_c = ||W||_c (B = 0): the L2 norm of each row
//   of the [out, in] weight (peft's get_weight_norm, norm over dim 1);
//   forward y = W x + b + (m / ||W + s·B A||_c - 1) ⊙ W x + (m / ||W + s·B A||_c) ⊙ s·B A x, the
//   norm detached (the paper's §4.3: no gradient through it). With lora_dropout in training, peft
//   feeds the dropped-out x to both DoRA terms (W dropout(x), B A dropout(x)) while the first W x
//   + b keeps the full x; Linear::forward_dora does the same.
// Saved as peft saves it: "<module>.lora_magnitude_vector" (no ".weight") after lora_A / lora_B.
#include <ATen/core/Tensor.h>

namespace lf::model {

// ||W + scaling · B A|| per output row ([out, in] -> [out]) in fp32, without autograd.
at::Tensor dora_weight_norm(const at::Tensor& weight, const at::Tensor& a, const at::Tensor& b, double scaling);

// peft's DoRA merge (merge_and_unload): (m / ||W + ΔW||_c) ⊙ (W + ΔW), ΔW = scaling · B A, in
// fp32; the caller casts to the weight's dtype.
at::Tensor dora_merged_weight(const at::Tensor& weight, const at::Tensor& a, const at::Tensor& b,
                              const at::Tensor& magnitude, double scaling);

}  // namespace lf::model
