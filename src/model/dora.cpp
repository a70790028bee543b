#include "lf/model/dora.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include "lf/model/grad_sink.h"
#include "lf/model/layers.h"

namespace lf::model {

at::Tensor dora_weight_norm(const at::Tensor& weight, const at::Tensor& a, const at::Tensor& b, double scaling) {
  c10::NoGradGuard no_grad;
  // peft: weight + scaling * (B @ A), then torch.linalg.norm(dim=1). fp32 whatever the base's
  // dtype (peft's sum is fp32 there too: the adapter is fp32).
  const auto w = weight.detach().to(a.device(), at::kFloat);
  const auto delta = at::matmul(b.detach().to(at::kFloat), a.detach().to(at::kFloat));  // [out, in]
  return at::linalg_vector_norm(w + scaling * delta, 2, at::IntArrayRef{1});
}

at::Tensor dora_merged_weight(const at::Tensor& weight, const at::Tensor& a, const at::Tensor& b,
                              const at::Tensor& magnitude, double scaling) {
  c10::NoGradGuard no_grad;
  const auto w = weight.detach().to(a.device(), at::kFloat);
  const auto delta = at::matmul(b.detach().to(at::kFloat), a.detach().to(at::kFloat)).mul_(scaling);
  // peft's merge_safe: get_weight_norm(W, ΔW, scaling=1) detached, factor m / norm per row.
  const auto merged = w + delta;
  const auto norm = at::linalg_vector_norm(merged, 2, at::IntArrayRef{1});
  return (magnitude.detach().to(at::kFloat) / norm).view({-1, 1}) * merged;
}

// peft's DoraLinearVariant.forward + DoraLinearLayer.forward, term by term (the same roundings in
// fp32): result = W x + b; without dropout (or in eval) DoRA's base term is that result less the
// bias, with dropout a second W dropout(x); result + (m/‖·‖ - 1) ⊙ base + (m/‖·‖ ⊙ B A x') · s.
// The scale is computed in fp32 (the adapter's dtype, as peft's promotion does) and applied in the
// activation dtype.
at::Tensor Linear::forward_dora(const at::Tensor& x, bool training) const {
  const LoraWeights& l = *lora_;
  const auto dt = x.scalar_type();
  const auto w = cast_for_compute(weight_, dt);
  const auto bias = bias_.defined() ? cast_for_compute(bias_, dt) : at::Tensor();
  auto result = at::linear(x, w, bias.defined() ? std::optional<at::Tensor>(bias) : std::nullopt);
  // ‖W + s·B A‖_c from the adapter's current values, detached (peft: weight_norm.detach()).
  const auto norm = dora_weight_norm(weight_, l.a_, l.b_, l.scaling_);
  const auto scale = (cast_for_compute(l.magnitude_, at::kFloat) / norm).view({1, -1}).to(dt);  // [1, out]
  const bool drop = l.dropout_ > 0 && training;
  const auto xd = drop ? at::dropout(x, l.dropout_, true) : x;
  const auto lora_result = at::linear(at::linear(xd, cast_for_compute(l.a_, dt)), cast_for_compute(l.b_, dt));
  at::Tensor base_result;
  if (drop)
    base_result = at::linear(xd, w);  // peft: F.linear(dropout(x), W), no bias
  else
    base_result = bias.defined() ? result - bias : result;
  const auto result_dora = (scale - 1) * base_result + scale * lora_result * l.scaling_;
  return result + result_dora;
}

}  // namespace lf::model
