#pragma once
// neat_packing on a GPU: the packed rows' sequences as one variable-length batch for the flash
// attention kernel (causal within each sequence, no [B,1,T,T] mask, no work across sequences); and
// sliding-window layers on a GPU, whose window the same kernel applies.
// The CPU (and any input the kernel does not take) keeps the block-diagonal mask
// (packed_attention.h): the two give the same attention on every non-padding position.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

namespace lf::model {

struct VarlenSegments {
  at::Tensor cu_seqlens;   // [n + 1] int32 on the compute device: where each sequence starts in the B*T tokens
  int64_t max_seqlen = 0;  // the longest sequence (the kernel's grid is sized from it)
  bool defined() const { return cu_seqlens.defined(); }
};

// segment_ids [B,T] integer, on the host (a device tensor is copied back: one sync). Every run
// of one id within a row is a sequence; a padding run (id 0) is one sequence too, so padding
// attends only to padding, as under the mask (its positions carry no loss).
VarlenSegments varlen_segments(const at::Tensor& segment_ids, const c10::Device& device);

// Whether the varlen kernel runs here: a CUDA device whose flash attention takes this dtype and
// head width (bf16/fp16, head_dim a multiple of 8 up to 256, sm80+), and LF_VARLEN_ATTENTION
// is not 0. Answered once per (device, dtype, head_dim).
bool varlen_attention_supported(const c10::Device& device, at::ScalarType dtype, int64_t head_dim);

// q [B,H,T,D], k/v [B,K,T,D] (H % K == 0) -> [B,H,T,D]: causal attention within each sequence
// of `segments` (which must cover the B*T tokens), differentiable (the flash backward). scale: the
// scores' (0: 1/sqrt(D)); window > 0: only keys i - window < j <= i (a sliding-window layer, Gemma 3's
// local ones: flash's own window, no [T, T] mask and no work outside it).
at::Tensor varlen_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   const VarlenSegments& segments, double scale = 0, int64_t window = 0);

// Each of B rows of T tokens one sequence (causal over the row), on `device`: made there, no host copy
// (a CUDA graph may capture it).
VarlenSegments rows_as_segments(int64_t rows, int64_t t, const c10::Device& device);

}  // namespace lf::model
