// silu(gate) * up and the rowwise FP8 cast of it in one kernel (lf/kernels/swiglu_fp8.h), as an autograd
// Function whose backward is swiglu's (it saves gate and up, as swiglu_op.cpp does). The cast is a side
// output, not differentiated: the FP8 forward of the next layer (down_proj) reads it instead of casting act.
#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>

#include "fused_op_impls.h"
#include "kernel_device.h"
#include "lf/common/error.h"
#include "lf/kernels/fp8_cast.h"
#include "lf/kernels/swiglu_fp8.h"

namespace lf::kernels {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What the kernel takes: 2-byte gate and up of one shape on the kernels' device, rows of at most
// kFp8RowMaxCols in packs of kFp8RowPack, cast along the last axis (the rowwise recipe's input cast).
bool takes(const at::Tensor& gate, const at::Tensor& up, const quant::Fp8Scaling& s) {
  if (!gate.defined() || !up.defined() || gate.dim() < 1 || gate.sizes() != up.sizes()) return false;
  if (gate.scalar_type() != up.scalar_type() || gate.device() != up.device() || !on_kernel_device(gate)) return false;
  if (gate.scalar_type() != at::kBFloat16 && gate.scalar_type() != at::kHalf) return false;
  if (!s.rowwise || (s.axis != -1 && s.axis != gate.dim() - 1)) return false;
  if (s.dtype != at::ScalarType::Float8_e4m3fn && s.dtype != at::ScalarType::Float8_e5m2) return false;
  return gate.size(-1) > 0 && gate.size(-1) <= kFp8RowMaxCols && gate.size(-1) % kFp8RowPack == 0;
}

struct SwigluFp8Fn : public torch::autograd::Function<SwigluFp8Fn> {
  // cast: act's FP8 data [rows, cols] and scale [rows, 1] (quant::fp8_cast's of act viewed as [rows, cols]).
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& gate, const at::Tensor& up,
                            const quant::Fp8Scaling* s, quant::Fp8Tensor* cast) {
    const auto g = gate.contiguous(), u = up.contiguous();
    auto out = at::empty_like(g);
    SwigluFp8Args a;
    a.dtype = kernel_dtype(g);
    a.e5m2 = s->dtype == at::ScalarType::Float8_e5m2;
    a.pow2 = s->pow2;
    a.cols = g.size(-1);
    a.rows = g.numel() / a.cols;
    cast->data = at::empty({a.rows, a.cols}, g.options().dtype(s->dtype));
    cast->scale = at::empty({a.rows, 1}, g.options().dtype(at::kFloat));
    a.gate = g.const_data_ptr();
    a.up = u.const_data_ptr();
    a.out = out.mutable_data_ptr();
    a.fp8 = static_cast<uint8_t*>(cast->data.data_ptr());
    a.scale = cast->scale.data_ptr<float>();
    run_on_device(g, [&](Stream st) { swiglu_fp8_forward(a, st); });
    ctx->save_for_backward({g, u});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    const auto s = ctx->get_saved_variables();
    auto [dg, du] = swiglu_backward_op(s[0], s[1], grad[0], /*gelu=*/false);
    return {dg, du, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor swiglu_fp8_op(const at::Tensor& gate, const at::Tensor& up, const quant::Fp8Scaling& s,
                         quant::Fp8Tensor& cast) {
  if (!takes(gate, up, s)) return at::Tensor();
  return SwigluFp8Fn::apply(gate, up, &s, &cast);
}

}  // namespace lf::kernels
