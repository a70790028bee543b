// FP8 training's linear layers (lf/model/fp8_linear.h): torchao's Float8Linear as two autograd nodes.
#include "lf/model/fp8_linear.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/custom_function.h>

#include "lf/common/error.h"
#include "lf/model/causal_lm.h"
#include "lf/model/fused_dispatch.h"
#include "lf/model/kernel_paths.h"

#ifdef LF_HAVE_FUSED_KERNELS
#include "lf/kernels/fp8_cast_op.h"
#include "lf/kernels/fp8_output_scale_op.h"
#include "lf/kernels/transpose_op.h"
#endif

namespace lf::model {

namespace {

using quant::Fp8Recipe;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

at::Tensor unwritten(const at::Tensor& x, int64_t out) {
  auto sizes = x.sizes().vec();
  sizes.back() = out;
  return at::empty(sizes, x.options());
}

// matmul_with_hp_or_float8_args: x [.., K] and w [N, K] saved in high precision (as torchao saves them),
// cast again in the backward as the recipe's backward GEMMs want them.
struct Fp8LinearFn : public torch::autograd::Function<Fp8LinearFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w, int64_t recipe,
                            bool base_values) {
    ctx->saved_data["recipe"] = recipe;
    ctx->save_for_backward({x, w});
    const auto r = static_cast<Fp8Recipe>(recipe);
    return base_values ? quant::fp8_linear_forward(x, w, r) : unwritten(x, w.size(0));
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    const auto s = ctx->get_saved_variables();
    const auto &x = s[0], &w = s[1];
    const auto r = static_cast<Fp8Recipe>(ctx->saved_data["recipe"].toInt());
    const auto& g = grad_out[0];
    at::Tensor dx, dw;
    if (ctx->needs_input_grad(0)) dx = quant::fp8_linear_grad_input(g, w, r);
    if (ctx->needs_input_grad(1)) dw = quant::fp8_linear_grad_weight(g, x, r, w.scalar_type());
    return {dx, dw, at::Tensor(), at::Tensor()};
  }
};

class Fp8FrozenLinear final : public LinearFormat {
 public:
  Fp8FrozenLinear(const at::Tensor& w, Fp8Recipe r) : recipe_(r), dense_dtype_(w.scalar_type()) {
    const auto q = quant::fp8_store_weight(w, r);
    data_ = q.data.view(at::kByte);  // the FP8 bytes (fp8.h's e4m3), stored and moved as uint8
    scale_ = q.scale;
  }
  std::string_view name() const override { return "fp8_e4m3"; }
  int64_t out_features() const override { return data_.size(0); }
  int64_t in_features() const override { return data_.size(1); }
  int64_t storage_bytes() const override { return static_cast<int64_t>(data_.nbytes() + scale_.nbytes()); }
  at::ScalarType dense_dtype() const override { return dense_dtype_; }
  void named_storage(const std::string& prefix, std::vector<NamedParam>& out) override {
    out.push_back({prefix + "weight", &data_});
    out.push_back({prefix + "weight.scale", &scale_});
  }
  // Read through the slots at each use: a strategy may have re-pointed them (ZeRO-3's gathers).
  quant::Fp8Tensor weight() const { return {data_.view(at::ScalarType::Float8_e4m3fn), scale_}; }
  at::Tensor dequantize(at::ScalarType dtype) const override { return weight().dequantize(dtype); }
  at::Tensor linear(const at::Tensor& x, const at::Tensor& bias, bool base_values) const override;
  bool has_product() const override { return true; }
  // The bias added after the GEMM, as torchao's Float8Linear adds it.
  at::Tensor product(const at::Tensor& x, const at::Tensor& bias) const override {
    auto y = quant::fp8_stored_forward(x, weight(), recipe_);
    return bias.defined() ? y.add_(bias) : y;
  }
  at::Tensor product_grad_input(const at::Tensor& g) const override {
    return quant::fp8_stored_grad_input(g, weight(), recipe_);
  }
  Fp8Recipe recipe() const { return recipe_; }

 private:
  at::Tensor data_, scale_;
  Fp8Recipe recipe_;
  at::ScalarType dense_dtype_;
};

// The frozen base: the forward and the input gradient read the stored FP8 weight; nothing saved but it.
struct Fp8FrozenFn : public torch::autograd::Function<Fp8FrozenFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const Fp8FrozenLinear* f, bool base_values) {
    ctx->saved_data["format"] = reinterpret_cast<int64_t>(f);
    return base_values ? f->product(x, at::Tensor()) : unwritten(x, f->out_features());
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    const auto* f = reinterpret_cast<const Fp8FrozenLinear*>(ctx->saved_data["format"].toInt());
    return {f->product_grad_input(grad_out[0]), at::Tensor(), at::Tensor()};
  }
};

at::Tensor Fp8FrozenLinear::linear(const at::Tensor& x, const at::Tensor& bias, bool base_values) const {
  LF_CHECK(!bias.defined() || !bias.requires_grad(), ConfigError,
           "an FP8-stored linear layer's bias is frozen with its weight; training it is not supported");
  auto y = Fp8FrozenFn::apply(x, this, base_values);
  return bias.defined() ? y + bias : y;
}

bool eligible(const Linear& lin) { return lin.in_features() % 16 == 0 && lin.out_features() % 16 == 0; }

// The CUDA cast kernel (kernels/fp8_cast.cu) where this build has the fused kernels and they are on.
void install_cast_kernel(CausalLM& model, Fp8Report& rep) {
  quant::Fp8CastKernel k = nullptr;
  quant::Fp8ScaleKernel scale = nullptr;
  quant::TransposeKernel transpose = nullptr;
#ifdef LF_HAVE_FUSED_KERNELS
  k = kernels::fp8_cast_kernel();
  scale = kernels::fp8_output_scale_kernel();
  transpose = kernels::transpose_kernel();
#endif
  const auto params = model.named_parameters();
  const bool on_gpu = !params.empty() && params.front().tensor->is_cuda();
  rep.fused_cast = k && built_fused_ops() && kernel_paths().fused_kernels && on_gpu;
  quant::set_fp8_cast_kernel(rep.fused_cast ? k : nullptr);
  quant::set_fp8_scale_kernel(rep.fused_cast ? scale : nullptr);
  quant::set_transpose_kernel(rep.fused_cast ? transpose : nullptr);
}

}  // namespace

at::Tensor fp8_linear(const at::Tensor& x, const at::Tensor& w, Fp8Recipe r, bool base_values) {
  return Fp8LinearFn::apply(x, w, static_cast<int64_t>(r), base_values);
}

std::unique_ptr<LinearFormat> make_fp8_linear(const at::Tensor& w, Fp8Recipe r) {
  return std::make_unique<Fp8FrozenLinear>(w, r);
}

quant::Fp8Recipe fp8_input_recipe(const Linear& lin) {
  if (lin.oft_ || (lin.lora_ && lin.lora_->magnitude_.defined())) return Fp8Recipe::kNone;
  if (!lin.format_) return lin.fp8_;
  const auto* f = dynamic_cast<const Fp8FrozenLinear*>(lin.format_.get());
  return f ? f->recipe() : Fp8Recipe::kNone;
}

at::Tensor fp8_stored_rowwise_scale(const Linear& lin) {
  if (!lin.format_ || !quant::fp8_rowwise(fp8_input_recipe(lin))) return at::Tensor();
  return static_cast<const Fp8FrozenLinear*>(lin.format_.get())->weight().scale;
}

Fp8Report use_fp8(CausalLM& model, Fp8Recipe r, bool store_frozen) {
  LF_CHECK(r != Fp8Recipe::kNone, ConfigError, "use_fp8: expected a recipe (tensorwise or rowwise), got none");
  c10::NoGradGuard no_grad;
  Fp8Report rep;
  rep.recipe = r;
  install_cast_kernel(model, rep);
  rep.scales_in_gemm = quant::fp8_rowwise(r) && quant::fp8_rowwise_scales_in_gemm();
  for (auto& [spec, lin] : model.linears()) {
    LF_CHECK(!lin->format_, ConfigError, "{}: FP8 over a weight already in the {} format is not supported",
             spec->module, lin->format_->name());
    if (!eligible(*lin)) {
      ++rep.kept;
      continue;
    }
    if (lin->weight_.requires_grad() || !store_frozen) {
      lin->fp8_ = r;
      ++rep.cast;
      continue;
    }
    rep.dense_bytes += static_cast<int64_t>(lin->weight_.nbytes());
    lin->format_ = make_fp8_linear(lin->weight_, r);
    lin->weight_ = at::Tensor();  // the dense copy goes: the base lives in FP8 alone
    rep.stored_bytes += lin->format_->storage_bytes();
    ++rep.stored;
  }
  return rep;
}

std::string describe(const Fp8Report& r) {
  std::string gemms = "forward, input gradient";
  if (r.cast > 0)
    gemms += quant::fp8_weight_grad_in_fp8(r.recipe) ? ", weight gradient" : " (weight gradient in high precision)";
  return fmt::format("FP8 ({}): {} frozen linears stored in e4m3 ({} bytes, {} before), {} cast per step, {} kept in "
                     "high precision (a dimension not divisible by 16); GEMMs in FP8: {}; cast kernel: {}{}",
                     quant::fp8_recipe_name(r.recipe), r.stored, r.stored_bytes, r.dense_bytes, r.cast, r.kept, gemms,
                     r.fused_cast ? "fused CUDA" : "ATen",
                     !quant::fp8_rowwise(r.recipe) ? ""
                     : r.scales_in_gemm              ? "; gradient GEMMs' row scales: in the GEMM"
                                                     : "; gradient GEMMs' row scales: a pass after the GEMM");
}

}  // namespace lf::model
