#pragma once
// A linear layer over an fp32 master weight whose gradient comes out of its GEMM in fp32.
//
// Under autocast (and Linear's cast_for_compute) full fine-tuning casts the fp32 master to bf16
// for each use; the weight-gradient GEMM then writes a bf16 gradient which the cast's backward
// converts to fp32: 2 + 2 + 4 bytes a parameter moved and a kernel per weight, every micro-step
// (1.5B: 6 GB a step). Here the GEMM accumulates in fp32 as before but writes its fp32 result
// straight into the gradient (at::mm with out_dtype): no bf16 rounding of the gradient (it is
// closer to the exact one than autocast's, not bit-equal to it) and no cast pass. For the fused
// path (fused_dispatch.h) with no gradient route (a strategy's grad sink: grad_sink.h) and no
// bias; Linear keeps cast_for_compute elsewhere.
#include <ATen/core/Tensor.h>

namespace lf::model {

// x [.., in] in bf16/fp16; w [out, in] fp32, requiring grad -> [.., out] in x's dtype; dw fp32.
// base_values false: the GEMM is not run and the output is garbage (backward_only_linear.h).
at::Tensor master_weight_linear(const at::Tensor& x, const at::Tensor& w, bool base_values);

// LF_FP32_WEIGHT_GRADS (default 1): whether Linear takes master_weight_linear where it may.
// Read once per process.
bool fp32_weight_grads_enabled();

}  // namespace lf::model
