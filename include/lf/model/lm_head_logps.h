#pragma once
// Per-token log-probabilities of target tokens through the LM head, chunked (the preference losses'
// log p(response | prompt) = the sum of its tokens' rows): rows [M,C] (hidden states of the target
// positions, compute dtype) times weight [V,C] a chunk at a time, fp32 log_softmax picked at the
// targets. Unlike chunked_lm_head_ce_sum (lm_head_loss.h) each row's gradient is scaled by its own
// upstream gradient (a pair's loss weighs its rows), so backward recomputes each chunk's logits (one
// more GEMM over the vocabulary) instead of keeping them. Peak extra memory: one [chunk, V] fp32 block.
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace lf::model {

class GradSink;

// Returns [M] fp32 log p(target_r | row_r), differentiable w.r.t. rows and weight (each when it
// requires grad and autograd is on). chunk_rows > 0; targets [M] int64, no -100. grad_sink: as
// chunked_lm_head_ce_sum's (the weight's gradient goes to it in backward).
at::Tensor chunked_lm_head_logps(const at::Tensor& rows, const at::Tensor& weight, const at::Tensor& targets,
                                 int64_t chunk_rows, GradSink* grad_sink = nullptr);

}  // namespace lf::model
