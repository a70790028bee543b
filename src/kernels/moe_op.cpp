// The mixture-of-experts kernels (lf/kernels/moe.h) on at::Tensors, for model/moe_experts.cpp's
// autograd node (these are not autograd ops: that node calls them in its forward and backward).
#include <ATen/ATen.h>

#include "fused_op_impls.h"
#include "kernel_device.h"
#include "lf/common/error.h"
#include "lf/kernels/moe.h"

namespace lf::kernels {
namespace {

void check_rows(const at::Tensor& t, const char* what) {
  LF_CHECK(t.dim() == 2 && t.is_contiguous() && on_kernel_device(t) && is_kernel_dtype(t), BackendError,
           "fused moe: expected {} contiguous [rows, cols] in a float dtype on the kernels' device, got {}", what,
           describe(t));
}

}  // namespace

at::Tensor moe_combine_op(const at::Tensor& y, const at::Tensor& slot_of, const at::Tensor& weights, int64_t top_k) {
  check_rows(y, "y");
  LF_CHECK(slot_of.scalar_type() == at::kLong && slot_of.is_contiguous() && slot_of.numel() % top_k == 0, BackendError,
           "fused moe_combine: slot_of must be contiguous int64 [tokens * top_k], got {}", describe(slot_of));
  const int64_t tokens = slot_of.numel() / top_k;
  auto out = at::empty({tokens, y.size(1)}, y.options());
  const auto w = weights.defined() ? weights.to(y.scalar_type()).contiguous() : at::Tensor();
  MoeCombineArgs a;
  a.dtype = kernel_dtype(y);
  a.tokens = tokens;
  a.top_k = top_k;
  a.cols = y.size(1);
  a.y = y.const_data_ptr();
  a.slot_of = slot_of.const_data_ptr<int64_t>();
  a.weights = w.defined() ? w.const_data_ptr() : nullptr;
  a.out = out.mutable_data_ptr();
  run_on_device(y, [&](Stream s) { moe_combine(a, s); });
  return out;
}

std::pair<at::Tensor, at::Tensor> moe_combine_backward_op(const at::Tensor& g, const at::Tensor& y,
                                                          const at::Tensor& slot_of, const at::Tensor& weights,
                                                          bool dweights) {
  check_rows(y, "y");
  const auto gc = g.contiguous();
  check_rows(gc, "g");
  const int64_t top_k = weights.size(1);
  const auto w = weights.to(y.scalar_type()).contiguous();
  auto dy = at::empty_like(y);
  auto dw = dweights ? at::empty({gc.size(0), top_k}, y.options().dtype(at::kFloat)) : at::Tensor();
  MoeCombineBackwardArgs a;
  a.dtype = kernel_dtype(y);
  a.tokens = gc.size(0);
  a.top_k = top_k;
  a.cols = y.size(1);
  a.g = gc.const_data_ptr();
  a.y = y.const_data_ptr();
  a.slot_of = slot_of.const_data_ptr<int64_t>();
  a.weights = w.const_data_ptr();
  a.dy = dy.mutable_data_ptr();
  a.dweights = dweights ? dw.mutable_data_ptr<float>() : nullptr;
  run_on_device(y, [&](Stream s) { moe_combine_backward(a, s); });
  return {dy, dweights ? dw.to(weights.scalar_type()) : dw};
}

at::Tensor moe_swiglu_halves_op(const at::Tensor& h) {
  check_rows(h, "h");
  auto out = at::empty({h.size(0), h.size(1) / 2}, h.options());
  MoeSwigluArgs a;
  a.dtype = kernel_dtype(h);
  a.rows = h.size(0);
  a.inter = h.size(1) / 2;
  a.h = h.const_data_ptr();
  a.out = out.mutable_data_ptr();
  run_on_device(h, [&](Stream s) { moe_swiglu_halves(a, s); });
  return out;
}

at::Tensor moe_swiglu_halves_backward_op(const at::Tensor& h, const at::Tensor& dout) {
  check_rows(h, "h");
  const auto d = dout.contiguous();
  auto dh = at::empty_like(h);
  MoeSwigluBackwardArgs a;
  a.dtype = kernel_dtype(h);
  a.rows = h.size(0);
  a.inter = h.size(1) / 2;
  a.h = h.const_data_ptr();
  a.dout = d.const_data_ptr();
  a.dh = dh.mutable_data_ptr();
  run_on_device(h, [&](Stream s) { moe_swiglu_halves_backward(a, s); });
  return dh;
}

}  // namespace lf::kernels
