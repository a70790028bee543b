#pragma once
// The ops of the FusedOps table (fused_ops.cpp), one file each: rms_norm_op.cpp, rope_op.cpp,
// swiglu_op.cpp, swiglu_fp8_op.cpp, cross_entropy_op.cpp. Arguments as in lf/kernels/fused_ops.h.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>

#include "lf/quant/fp8.h"

namespace lf::kernels {

at::Tensor rms_norm_op(const at::Tensor& x, const at::Tensor& weight, double eps);
at::Tensor head_rms_norm_op(const at::Tensor& x, const at::Tensor& weight, double eps);
at::Tensor one_plus_rms_norm_op(const at::Tensor& x, const at::Tensor& weight, double eps);
at::Tensor geglu_op(const at::Tensor& gate, const at::Tensor& up);
std::pair<at::Tensor, at::Tensor> add_rms_norm_op(const at::Tensor& x, const at::Tensor& delta,
                                                  const at::Tensor& weight, double eps);
std::pair<at::Tensor, at::Tensor> rope_qk_op(const at::Tensor& q, const at::Tensor& k, const at::Tensor& cos,
                                             const at::Tensor& sin, int64_t seq_len, int64_t head_dim);
at::Tensor swiglu_op(const at::Tensor& gate, const at::Tensor& up);
// fp8_cast_op.cpp: column factors as the cast kernel reads them: col_mul's values in dtype (ATen's multiply's),
// as float32 [cols], contiguous and 32-byte aligned.
at::Tensor cast_factors(const at::Tensor& col_mul, at::ScalarType dtype);
// swiglu (gelu: geglu) of contiguous gate and up, not autograd: the launch SwigluFn and swiglu_fp8_op share.
at::Tensor swiglu_forward_op(const at::Tensor& gate, const at::Tensor& up, bool gelu);
// swiglu's backward (gelu: geglu's) from the saved gate and up, contiguous: {dgate, dup}.
std::pair<at::Tensor, at::Tensor> swiglu_backward_op(const at::Tensor& gate, const at::Tensor& up,
                                                     const at::Tensor& dout, bool gelu);
// swiglu_fp8_op.cpp
at::Tensor swiglu_fp8_op(const at::Tensor& gate, const at::Tensor& up, const quant::Fp8Scaling& s,
                         quant::Fp8Tensor& cast);
at::Tensor swiglu_fp8_grads_op(const at::Tensor& gate, const at::Tensor& up, const quant::Fp8Scaling* s,
                               quant::Fp8Tensor* cast, const at::Tensor& gate_w_scale, const at::Tensor& up_w_scale);
at::Tensor cross_entropy_rows_op(const at::Tensor& logits, const at::Tensor& targets, int64_t ignore_index,
                                 const at::Tensor& row_scale);
// moe_op.cpp
at::Tensor moe_combine_op(const at::Tensor& y, const at::Tensor& slot_of, const at::Tensor& weights, int64_t top_k);
std::pair<at::Tensor, at::Tensor> moe_combine_backward_op(const at::Tensor& g, const at::Tensor& y,
                                                          const at::Tensor& slot_of, const at::Tensor& weights,
                                                          bool dweights);
at::Tensor moe_swiglu_halves_op(const at::Tensor& h);
at::Tensor moe_swiglu_halves_backward_op(const at::Tensor& h, const at::Tensor& dout);
void dequantize_4bit_op(const at::Tensor& data, const at::Tensor& absmax, const at::Tensor& nested_absmax,
                        const at::Tensor& offset, int64_t code, int64_t blocksize, const at::Tensor& out);
at::Tensor quant_gemv_4bit_op(const at::Tensor& x, const at::Tensor& data, const at::Tensor& absmax,
                              const at::Tensor& nested_absmax, const at::Tensor& offset, int64_t code,
                              int64_t blocksize, int64_t n);

}  // namespace lf::kernels
