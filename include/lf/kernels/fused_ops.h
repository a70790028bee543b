#pragma once
// The fused kernels (rms_norm.h, rope.h, swiglu.h, cross_entropy.h, moe.h) as autograd ops on at::Tensors, behind one
// table that the model's dispatch (lf/model/fused_dispatch.h) calls. Built only with
// LF_WITH_CUDA (lf_kernels); the header itself is torch-only so that the CPU build's model can
// hold a table pointer (and tests can install the CPU-emulated build of the same ops).
//
// Every op computes in fp32 inside and rounds where the model's ATen code rounds; inputs are
// in the compute dtype (weights already cast by model::cast_for_compute, so that a weight's
// gradient flows back through the cast's autograd edge into its DDP/ZeRO route).
// Thread-safety: as ATen ops (the current stream of the tensors' device).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>

#include "lf/quant/fp8.h"

namespace lf::kernels {

struct FusedOps {
  // Whether the ops take activations like x ([.., C]): on the kernels' device, in fp32, fp16
  // or bf16, C within the norm kernels' limit. The model runs its ATen code otherwise.
  bool (*accepts)(const at::Tensor& x);
  // weight * norm(x); x [.., C], weight [C] in x's dtype.
  at::Tensor (*rms_norm)(const at::Tensor& x, const at::Tensor& weight, double eps);
  // {h, weight * norm(h)} with h = x + delta: the residual add and the next norm in one kernel.
  std::pair<at::Tensor, at::Tensor> (*add_rms_norm)(const at::Tensor& x, const at::Tensor& delta,
                                                    const at::Tensor& weight, double eps);
  // RoPE on q [B*T, H*D] and k [B*T, K*D] (contiguous, not views), in place; returns them.
  // cos/sin [T, D] or [B, 1, T, D] in q's dtype.
  std::pair<at::Tensor, at::Tensor> (*rope_qk)(const at::Tensor& q, const at::Tensor& k, const at::Tensor& cos,
                                               const at::Tensor& sin, int64_t seq_len, int64_t head_dim);
  // silu(gate) * up; the backward in one kernel, saving gate and up only.
  at::Tensor (*swiglu)(const at::Tensor& gate, const at::Tensor& up);
  // The LM head's cross-entropy of logits [rows, V] (contiguous) against targets [rows] int64:
  // returns each row's loss (fp32 [rows]; 0 where the target is ignore_index) and overwrites
  // the logits with d(sum loss)/d logits (zero rows where ignored). Not autograd; see
  // lf/kernels/cross_entropy.h. row_scale [rows] fp32 (undefined: none): each row's gradient times it.
  at::Tensor (*cross_entropy_rows)(const at::Tensor& logits, const at::Tensor& targets, int64_t ignore_index,
                                   const at::Tensor& row_scale);
  // Mixture of experts (lf/kernels/moe.h; not autograd: model/moe_experts.cpp's node calls them).
  // y [S, C] contiguous, slot_of [N·k] int64, weights [N, k] (undefined: each 1) -> [N, C].
  at::Tensor (*moe_combine)(const at::Tensor& y, const at::Tensor& slot_of, const at::Tensor& weights, int64_t top_k);
  // g [N, C] -> {dy [S, C], dweights [N, k] in weights' dtype (undefined unless asked)}.
  std::pair<at::Tensor, at::Tensor> (*moe_combine_backward)(const at::Tensor& g, const at::Tensor& y,
                                                            const at::Tensor& slot_of, const at::Tensor& weights,
                                                            bool dweights);
  at::Tensor (*moe_swiglu_halves)(const at::Tensor& h);                             // [S, 2I] -> [S, I]
  at::Tensor (*moe_swiglu_halves_backward)(const at::Tensor& h, const at::Tensor& dout);  // -> [S, 2I]
  // A 4-bit weight in bitsandbytes' format (lf/quant/bnb_4bit.h: packed codes, absmax fp32 or uint8
  // codes + nested_absmax + offset when nested; code 0 nf4, 1 fp4) dequantized into `out` ([numel],
  // contiguous, its dtype), bit-equal to quant::dequantize_4bit. Null where the build has none.
  void (*dequantize_4bit)(const at::Tensor& data, const at::Tensor& absmax, const at::Tensor& nested_absmax,
                          const at::Tensor& offset, int64_t code, int64_t blocksize, const at::Tensor& out) = nullptr;
  // x [m <= 8, k] W^T with W [n, k] in that format, dequantized in registers (dequant_gemv_4bit.h): [m, n]
  // in x's dtype. Null where the build has none.
  at::Tensor (*quant_gemv_4bit)(const at::Tensor& x, const at::Tensor& data, const at::Tensor& absmax,
                                const at::Tensor& nested_absmax, const at::Tensor& offset, int64_t code,
                                int64_t blocksize, int64_t n) = nullptr;
  // weight * norm(x) over each D-wide group of x [R, H*D] (Qwen3's per-head q/k norms), weight [D]
  // in x's dtype: [R, H*D], no view, so that rope_qk may rotate it in place. Null where the build has none.
  at::Tensor (*head_rms_norm)(const at::Tensor& x, const at::Tensor& weight, double eps) = nullptr;
  // Gemma's norm, T(norm(x) * (1 + weight)) in fp32, rounded once, weight float32 [C] (x [.., C]) or [D] (each
  // D-wide head of x [R, H*D], no view): model::RmsNorm's one_plus. Null where the build has none.
  at::Tensor (*one_plus_rms_norm)(const at::Tensor& x, const at::Tensor& weight, double eps) = nullptr;
  // Gemma's GeGLU: gelu(gate, tanh approximation) * up, rounded as swiglu's. Null where the build has none.
  at::Tensor (*geglu)(const at::Tensor& gate, const at::Tensor& up) = nullptr;
  // swiglu's act, and into `cast` act's FP8 cast along its rows under s (data [rows, C], scale [rows, 1] for
  // act [.., C]: quant::fp8_cast's of act.reshape({-1, C}), bit for bit), from one pass over gate and up
  // (lf/kernels/swiglu_fp8.h). Undefined (and `cast` untouched) where the kernel does not take the inputs or
  // the scaling: 2-byte dtypes, rowwise along the last axis, C a multiple of 8 up to 24,576. The same backward
  // as swiglu's. Null where the build has none.
  at::Tensor (*swiglu_fp8)(const at::Tensor& gate, const at::Tensor& up, const quant::Fp8Scaling& s,
                           quant::Fp8Tensor& cast) = nullptr;
  // swiglu (swiglu_fp8 where s and cast are given) whose backward also writes the casts gate_proj's and up_proj's
  // input gradients make of dgate and dup when their weights are stored in FP8 rowwise (quant::fp8_stored_grad_input:
  // each column times the inverse of the weight's row scale, gate_w_scale / up_w_scale [I, 1] for gate [.., I]),
  // from the pass that writes dgate and dup (lf/kernels/swiglu_fp8_backward.h), and hands them to those input
  // gradients (quant::fp8_seed_grad_input_cast). Undefined (and `cast` untouched) where the kernels do not take the
  // inputs: as swiglu_fp8, and scales of float32, one a column. Null where the build has none.
  at::Tensor (*swiglu_fp8_grads)(const at::Tensor& gate, const at::Tensor& up, const quant::Fp8Scaling* s,
                                 quant::Fp8Tensor* cast, const at::Tensor& gate_w_scale,
                                 const at::Tensor& up_w_scale) = nullptr;
};

// This build's table (lf_kernels: CUDA tensors; the tests' emulated build: CPU tensors).
const FusedOps& fused_ops();

}  // namespace lf::kernels
