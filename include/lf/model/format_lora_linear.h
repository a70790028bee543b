#pragma once
// LoRA over a base weight stored in a number format (linear_format.h: FP8, 4-bit) as one autograd
// node: y = base(x) (+ bias) + scaling * (x A^T) B^T, lora_linear.h's arithmetic with the format's
// product in place of x W^T. As separate nodes (the format's, then the adapter's ops) autograd gives x
// two gradients, the format's input gradient and (g B) A scaling, and adds them in a kernel of its
// own: one [N, in] tensor written and two read again per adapted projection and micro-step (FP8 7B
// LoRA: ~20 ms of a ~0.45 s step on the H100 trace, its "bf16 add" line). Here the adapter's part is
// accumulated into the format's input gradient by its GEMM (addmm_, beta 1): one rounding, no add.
// Taken where lora_linear is (the fused path, no LoRA dropout) and the format has a product
// (LinearFormat::has_product); Linear::forward keeps the separate nodes elsewhere.
#include <ATen/core/Tensor.h>

namespace lf::model {

class LinearFormat;

// x [.., in]; f the frozen base (read through its slots at each use, as LinearFormat::linear does);
// bias [out] frozen or undefined; a [r, in], b [out, r] in x's dtype. base_values false: the base
// product and the adapter's sum into it are not run and the output is garbage (a checkpoint
// recompute, backward_only_linear.h); backward is the same.
at::Tensor format_lora_linear(const at::Tensor& x, const LinearFormat& f, const at::Tensor& bias, const at::Tensor& a,
                              const at::Tensor& b, double scaling, bool base_values);

}  // namespace lf::model
