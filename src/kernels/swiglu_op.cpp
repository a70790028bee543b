// silu(gate) * up (and Gemma's gelu_tanh(gate) * up) as an autograd Function over the swiglu.h launchers. Saves gate and up (the
// ATen graph also keeps silu(gate), one more [B, T, I] tensor per layer).
#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "fused_op_impls.h"
#include "kernel_device.h"
#include "lf/common/error.h"
#include "lf/kernels/swiglu.h"

namespace lf::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct SwigluFn : public torch::autograd::Function<SwigluFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& gate, const at::Tensor& up, bool gelu) {
    const auto g = gate.contiguous(), u = up.contiguous();
    auto out = swiglu_forward_op(g, u, gelu);
    ctx->save_for_backward({g, u});
    ctx->saved_data["gelu"] = gelu;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const auto s = ctx->get_saved_variables();
    auto [dg, du] = swiglu_backward_op(s[0], s[1], grad[0], ctx->saved_data["gelu"].toBool());
    return {dg, du, at::Tensor()};
  }
};

}  // namespace

at::Tensor swiglu_forward_op(const at::Tensor& gate, const at::Tensor& up, bool gelu) {
  auto out = at::empty_like(gate);
  SwigluForwardArgs a;
  a.dtype = kernel_dtype(gate);
  a.n = gate.numel();
  a.gate = gate.const_data_ptr();
  a.up = up.const_data_ptr();
  a.out = out.mutable_data_ptr();
  a.gelu_tanh = gelu;
  run_on_device(gate, [&](Stream s) { swiglu_forward(a, s); });
  return out;
}

std::pair<at::Tensor, at::Tensor> swiglu_backward_op(const at::Tensor& gate, const at::Tensor& up,
                                                     const at::Tensor& dout, bool gelu) {
  const auto d = dout.contiguous();
  auto dg = at::empty_like(gate), du = at::empty_like(up);
  SwigluBackwardArgs a;
  a.dtype = kernel_dtype(gate);
  a.n = gate.numel();
  a.gate = gate.const_data_ptr();
  a.up = up.const_data_ptr();
  a.dout = d.const_data_ptr();
  a.dgate = dg.mutable_data_ptr();
  a.dup = du.mutable_data_ptr();
  a.gelu_tanh = gelu;
  run_on_device(d, [&](Stream st) { swiglu_backward(a, st); });
  return {dg, du};
}

namespace {
at::Tensor gated(const at::Tensor& gate, const at::Tensor& up, bool gelu) {
  LF_CHECK(gate.sizes() == up.sizes() && gate.scalar_type() == up.scalar_type() && gate.device() == up.device() &&
               on_kernel_device(gate) && is_kernel_dtype(gate),
           BackendError, "fused {}: expected gate and up of one shape and float dtype on the kernels' device, got {} and {}",
           gelu ? "geglu" : "swiglu", describe(gate), describe(up));
  return SwigluFn::apply(gate, up, gelu);
}
}  // namespace

at::Tensor swiglu_op(const at::Tensor& gate, const at::Tensor& up) { return gated(gate, up, false); }
at::Tensor geglu_op(const at::Tensor& gate, const at::Tensor& up) { return gated(gate, up, true); }

}  // namespace lf::kernels
