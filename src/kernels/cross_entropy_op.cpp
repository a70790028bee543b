// The cross-entropy rows launcher (lf/kernels/cross_entropy.h) on tensors. Not an autograd op:
// the LM head's loss calls it inside its own autograd Function, where the gradient it leaves
// in the logits is what that Function saves.
#include <ATen/ATen.h>

#include "fused_op_impls.h"
#include "kernel_device.h"
#include "lf/common/error.h"
#include "lf/kernels/cross_entropy.h"

namespace lf::kernels {

at::Tensor cross_entropy_rows_op(const at::Tensor& logits, const at::Tensor& targets, int64_t ignore_index,
                                 const at::Tensor& row_scale) {
  LF_CHECK(logits.dim() == 2 && logits.is_contiguous() && on_kernel_device(logits) && is_kernel_dtype(logits) &&
               targets.dim() == 1 && targets.size(0) == logits.size(0) && targets.scalar_type() == at::kLong &&
               targets.device() == logits.device(),
           BackendError,
           "fused cross_entropy_rows: expected contiguous float logits [rows, vocab] on the kernels' device and int64 "
           "targets [rows] beside them, got {} and {}",
           describe(logits), describe(targets));
  LF_CHECK(!row_scale.defined() || (row_scale.dim() == 1 && row_scale.size(0) == logits.size(0) &&
                                    row_scale.scalar_type() == at::kFloat && row_scale.device() == logits.device()),
           BackendError, "fused cross_entropy_rows: expected row_scale fp32 [{}] beside the logits, got {}",
           logits.size(0), describe(row_scale));
  const auto y = targets.contiguous();
  const auto sc = row_scale.defined() ? row_scale.contiguous() : row_scale;
  auto loss = at::empty({logits.size(0)}, logits.options().dtype(at::kFloat));
  CrossEntropyRowsArgs a;
  a.dtype = kernel_dtype(logits);
  a.rows = logits.size(0);
  a.vocab = logits.size(1);
  a.logits = logits.data_ptr();
  a.targets = y.const_data_ptr<int64_t>();
  a.loss = loss.mutable_data_ptr<float>();
  a.ignore_index = ignore_index;
  a.row_scale = sc.defined() ? sc.const_data_ptr<float>() : nullptr;
  run_on_device(logits, [&](Stream s) { cross_entropy_rows(a, s); });
  return loss;
}

}  // namespace lf::kernels
