#pragma once
// A LoRA linear layer as one autograd node: y = x W^T (+ bias) + scaling * (x A^T) B^T.
//
// As separate ATen ops, autograd gives x two gradients (g W from the base GEMM, (g B) A
// scaling from the adapter's) and adds them in a kernel of its own: one [N, in] tensor written
// and two read again, per adapted projection and micro-step. Here the adapter's part is
// accumulated into the base's by its GEMM (addmm_, beta 1) instead: one rounding, no add (7B
// LoRA, checkpointed, 4 x 2048 tokens: the step's bf16 add kernels 24.5 -> 17.3 ms, 1.04x). For the fused path (fused_dispatch.h) with no LoRA dropout (LLaMA-Factory's
// default: the adapter then reads x itself) and a frozen base weight and bias; Linear::forward
// keeps ATen's ops elsewhere (the CPU's results stay those of the per-op path).
#include <ATen/core/Tensor.h>

namespace lf::model {

// x [.., in]; w [out, in] and bias [out] (or undefined) frozen, in x's dtype; a [r, in], b [out, r]
// in x's dtype (the adapters' casts: their gradients flow back through them). base_values false:
// the base GEMM and the adapter's sum into it are not run and the output is garbage
// (backward_only_linear.h: a checkpoint recompute's o_proj and down_proj); backward is the same.
at::Tensor lora_linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& bias, const at::Tensor& a,
                       const at::Tensor& b, double scaling, bool base_values);

// LF_FUSED_LORA (default 1): whether Linear takes lora_linear where it may; 0: ATen's ops.
// Read once per process.
bool fused_lora_enabled();

}  // namespace lf::model
