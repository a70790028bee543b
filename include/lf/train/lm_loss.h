#pragma once
// The causal-LM loss without the [B,T,V] logits: the final hidden states of the
// target positions only go through model::chunked_lm_head_ce_sum (lm_head_loss.h: head
// and cross-entropy in row chunks, gradients computed in the same pass).
//
// Math as transformers' ForCausalLMLoss: hidden[:, :-1] predicts labels[:, 1:], -100
// ignored, logits upcast to fp32, reduction "sum" (the caller divides by the step's
// target-token count, DESIGN "Loss").
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace lf::model {
class GradSink;
}

namespace lf::train {

// normed_hidden [B,T,C] (after the final norm, in the compute dtype), weight [V,C]
// (lm_head or the tied embedding, any float dtype), labels [B,T] int64 on the same
// device. Returns a 0-dim fp32 sum. Differentiable w.r.t. normed_hidden and weight
// (weight only when it requires grad). chunk_rows <= 0 picks ~1 GiB of fp32 logits per chunk.
// target_rows: the flat indices b*(T-1)+t of the target positions (labels[:, 1:] != -100),
// int64 on the CPU; pass them when the labels are on the host anyway, to spare the device
// sync that finding them on the device costs.
// grad_sink (model/grad_sink.h): when it expects `weight`, the weight's gradient goes to it
// at the start of backward (this is backward's first node) instead of to .grad.
at::Tensor lm_head_loss_sum(const at::Tensor& normed_hidden, const at::Tensor& weight, const at::Tensor& labels,
                            int64_t chunk_rows = 0, const at::Tensor& target_rows = {},
                            model::GradSink* grad_sink = nullptr);

// The same sum with every position through the head, the ignored ones masked
// (model::chunked_lm_head_ce_sum_masked): no host sync and shapes fixed by [B,T] alone, for
// CUDA graphs (step_graph.h). labels on normed_hidden's device.
at::Tensor lm_head_loss_sum_all_rows(const at::Tensor& normed_hidden, const at::Tensor& weight,
                                     const at::Tensor& labels, int64_t chunk_rows = 0,
                                     model::GradSink* grad_sink = nullptr);

// transformers' ForCausalLMLoss op for op (lm_loss_unchunked.cpp): lm_head on every position ([B,T,V] logits in
// the compute dtype, as HF's memory), upcast, cross_entropy summed; plain autograd (the weight through
// model::cast_for_compute: a DDP route stays). pure_bf16 takes it off a GPU (trainer_state.h hf_bf16_rounding):
// its gradients are bf16, and HF's run rounds the logits' gradient (softmax - onehot) x 1/N to bf16 and only then
// multiplies it by the hidden states / the weight in one GEMM over all B*T rows; the chunked head above rounds
// (softmax - onehot) before the 1/N and sums the target rows' GEMMs, which moves about half the bf16 gradient
// elements by an ulp (docs/training.md "pure_bf16").
at::Tensor lm_head_loss_sum_unchunked(const at::Tensor& normed_hidden, const at::Tensor& weight,
                                      const at::Tensor& labels);

// The target_rows argument above, from host labels [B,T].
at::Tensor target_rows_of(const at::Tensor& cpu_labels);

}  // namespace lf::train
