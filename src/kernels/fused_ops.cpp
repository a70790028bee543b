// This build's FusedOps table (lf/kernels/fused_ops.h).
#include "lf/kernels/fused_ops.h"

#include "fused_op_impls.h"
#include "kernel_device.h"
#include "lf/kernels/rms_norm.h"

namespace lf::kernels {
namespace {

bool accepts(const at::Tensor& x) {
  return x.defined() && on_kernel_device(x) && is_kernel_dtype(x) && x.dim() >= 1 && x.size(-1) > 0 &&
         x.size(-1) <= kRmsNormMaxCols;
}

}  // namespace

const FusedOps& fused_ops() {
  static const FusedOps ops{&accepts,
                            &rms_norm_op,
                            &add_rms_norm_op,
                            &rope_qk_op,
                            &swiglu_op,
                            &cross_entropy_rows_op,
                            &moe_combine_op,
                            &moe_combine_backward_op,
                            &moe_swiglu_halves_op,
                            &moe_swiglu_halves_backward_op,
                            &dequantize_4bit_op,
                            &quant_gemv_4bit_op,
                            &head_rms_norm_op,
                            &one_plus_rms_norm_op,
                            &geglu_op,
                            &swiglu_fp8_op,
                            &swiglu_fp8_grads_op};
  return ops;
}

}  // namespace lf::kernels
