#pragma once
// Internal to lf_model: where the chunked LM heads' autograd nodes (lm_head_loss.cpp's cross-entropy,
// lm_head_logps.cpp, lm_head_asft.cpp) put the head weight's gradient. Defined in lm_head_loss.cpp, beside
// the CE loss that first wrote it, so that the three nodes hand it over the same way.
#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

namespace torch::autograd {
struct AutogradContext;
}  // namespace torch::autograd

namespace lf::model {

class GradSink;

// Forward: remembers `sink` (nullptr: none takes the gradient) and, with one, the weight [V,C] it expects.
void save_lm_head_sink(torch::autograd::AutogradContext* ctx, GradSink* sink, const at::Tensor& weight);

// Backward: grad_w [V,C] fp32, the weight's whole gradient (already times the upstream gradient). With the
// sink save_lm_head_sink kept, it goes there in fp32 whatever the weight's dtype (a bf16 weight, as ZeRO keeps
// its parameters, must not round the gradient before it accumulates) and the result is undefined: nothing for
// autograd's .grad. Without one, grad_w cast to `weight_dtype` for autograd.
at::Tensor lm_head_weight_grad(torch::autograd::AutogradContext* ctx, const at::Tensor& grad_w,
                               c10::ScalarType weight_dtype);

}  // namespace lf::model
