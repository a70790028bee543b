#pragma once
// ASFT's per-token loss through the LM head, chunked (LLaMA-Factory's asft_loss_func, trainer_utils.py):
//   loss_r = p_r(y_r) * ce_r  +  alpha * KL(q_r || p_r)
// p_r = softmax(rows_r W^T) in fp32 (the policy), ce_r = -log p_r(y_r), the factor p_r(y_r) detached (DFT's
// weight), q_r = softmax(ref_rows_r ref_W^T) in the reference's compute dtype (LLaMA-Factory's ref_logits are the
// frozen copy's, softmaxed as they come), KL summed over the vocabulary as F.kl_div(log p, q).sum(-1).
// Like chunked_lm_head_logps (lm_head_logps.h), the [M,V] blocks are never kept: backward recomputes each
// chunk's policy and reference logits. d loss_r / d logits_r = (w_r + alpha) p_r - w_r onehot(y_r) - alpha q_r,
// w_r = p_r(y_r). Peak extra memory: a few [chunk, V] fp32 blocks.
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace lf::model {

class GradSink;

// Returns [M] fp32, differentiable w.r.t. rows [M,C] and weight [V,C] (each when it requires grad and autograd
// is on); ref_rows [M,C] and ref_weight [V,C] are constants. targets [M] int64 (no -100), chunk_rows > 0.
// grad_sink: as chunked_lm_head_logps's.
at::Tensor chunked_lm_head_asft(const at::Tensor& rows, const at::Tensor& weight, const at::Tensor& targets,
                                const at::Tensor& ref_rows, const at::Tensor& ref_weight, double alpha,
                                int64_t chunk_rows, GradSink* grad_sink = nullptr);

}  // namespace lf::model
