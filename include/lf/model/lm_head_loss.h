#pragma once
// The causal-LM head and cross-entropy over target rows, chunked ("fused linear
// cross-entropy"): the rows are multiplied by the head weight a chunk at a time, each
// chunk's fp32 logits give its cross-entropy sum and, in the same pass, the gradients
// (softmax - onehot) @ W and (softmax - onehot)^T @ h; backward only scales them by the
// incoming gradient. Peak extra memory is one [chunk, V] fp32 block (150k vocabulary: 1765
// rows = 1 GiB instead of 5 GiB of logits for 8k tokens). The one implementation behind the
// trainer's lm_head_loss_sum (train/lm_loss.h) and causal_lm_loss_fused (fused_loss.h).
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace lf::model {

class GradSink;

// rows [M,C] (the hidden states of target positions only, compute dtype), weight [V,C]
// (any float dtype), targets [M] int64 (no -100). Returns the 0-dim fp32 sum of their
// cross-entropies, differentiable w.r.t. rows and weight (each only when it requires grad
// and autograd is on). chunk_rows > 0. grad_sink: when it expects `weight`, the weight's
// gradient goes to it at the start of backward (this is backward's first node).
at::Tensor chunked_lm_head_ce_sum(const at::Tensor& rows, const at::Tensor& weight, const at::Tensor& targets,
                                  int64_t chunk_rows, GradSink* grad_sink = nullptr);

// The same over every row, targets holding kIgnoreIndex (-100) where a row is not a target:
// those count nothing and get zero gradients. Shapes do not depend on the labels' values and
// nothing reads them on the host, so a CUDA graph can capture it (train/step_graph.h); the
// cost is the head's GEMMs over the ignored rows too.
at::Tensor chunked_lm_head_ce_sum_masked(const at::Tensor& rows, const at::Tensor& weight, const at::Tensor& targets,
                                         int64_t chunk_rows, GradSink* grad_sink = nullptr);

}  // namespace lf::model
