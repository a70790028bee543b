// bitsandbytes' 4-bit base weight as a linear layer's format (bnb4_linear.h).
#include "lf/model/bnb4_linear.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/custom_function.h>

#include <map>
#include <mutex>
#include <utility>

#include "lf/common/error.h"
#include "lf/kernels/fused_ops.h"
#include "lf/model/causal_lm.h"
#include "lf/model/fused_dispatch.h"
#include "lf/model/kernel_paths.h"

#include <fmt/format.h>

namespace lf::model {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

class Bnb4Linear;

// The fused table for x's device and dtype. Not fused_ops_for(x) itself: its column limit is the row
// kernels' (RMSNorm's 10240), and x here is a GEMM's input or output gradient (18944 columns at 7B's
// MLP), which the dequantization does not care about. Falling back to ATen there cost a slow
// dequantization every step, and a host-to-device copy of the code table that CUDA graphs refuse.
const kernels::FusedOps* fused_ops_on(const at::Tensor& x) { return fused_ops_for(x.narrow(-1, 0, 1)); }

// One dequantization buffer per device and dtype, grown to the largest weight: every quantized
// layer dequantizes into it right before its GEMM on the same stream, so no two uses overlap.
at::Tensor scratch(const at::Device& device, at::ScalarType dtype, int64_t numel) {
  static std::mutex mu;
  static std::map<std::pair<std::string, at::ScalarType>, at::Tensor> buffers;
  std::lock_guard<std::mutex> lock(mu);
  auto& b = buffers[{device.str(), dtype}];
  if (!b.defined() || b.numel() < numel) b = at::empty({numel}, at::TensorOptions().dtype(dtype).device(device));
  return b.narrow(0, 0, numel);
}

class Bnb4Linear final : public LinearFormat {
 public:
  Bnb4Linear(quant::Bnb4Tensor q, at::ScalarType dtype) : q_(std::move(q)), dtype_(dtype) {
    LF_CHECK(q_.shape.size() == 2, ConfigError, "a 4-bit linear weight must be 2-D, got {} dims", q_.shape.size());
  }
  std::string_view name() const override { return quant::code4_name(q_.spec.code); }
  int64_t out_features() const override { return q_.shape[0]; }
  int64_t in_features() const override { return q_.shape[1]; }
  int64_t storage_bytes() const override { return q_.nbytes(); }
  bool nested() const override { return q_.nested(); }
  at::ScalarType dense_dtype() const override { return dtype_; }

  // bitsandbytes' names (transformers saves a Linear4bit so): weight (the packed codes), weight.absmax,
  // and under double quantization weight.nested_absmax and the offset.
  void named_storage(const std::string& prefix, std::vector<NamedParam>& out) override {
    out.push_back({prefix + "weight", &q_.data});
    out.push_back({prefix + "weight.absmax", &q_.absmax});
    if (q_.nested()) {
      out.push_back({prefix + "weight.nested_absmax", &q_.nested_absmax});
      out.push_back({prefix + "weight.offset", &q_.offset});
    }
  }

  at::Tensor dequantize(at::ScalarType dtype) const override { return quant::dequantize_4bit(q_, dtype); }

  // The weight in `dtype` for one GEMM: the fused kernel into the device's scratch buffer, else ATen.
  at::Tensor for_gemm(const at::Tensor& x, at::ScalarType dtype) const {
    const auto* ops = fused_ops_on(x);
    if (!ops || !ops->dequantize_4bit) return dequantize(dtype);
    auto out = scratch(q_.data.device(), dtype, q_.numel());
    ops->dequantize_4bit(q_.data, q_.absmax, q_.nested_absmax, q_.offset, static_cast<int64_t>(q_.spec.code),
                         q_.spec.blocksize, out);
    return out.view(q_.shape);
  }

  at::Tensor linear(const at::Tensor& x, const at::Tensor& bias, bool base_values) const override;
  bool has_product() const override { return true; }
  at::Tensor product(const at::Tensor& x, const at::Tensor& bias) const override;
  // dequantize_4bit(B, state) in the quantized dtype, then .to(grad_output.dtype), then matmul.
  at::Tensor product_grad_input(const at::Tensor& g) const override {
    auto w = for_gemm(g, dtype_);
    if (w.scalar_type() != g.scalar_type()) w = w.to(g.scalar_type());
    return at::mm(g, w);
  }
  // The forward's product through the fused few-row kernel, 8 rows a launch ([rows, in] -> [rows, out]).
  at::Tensor fused_rows(const kernels::FusedOps& ops, const at::Tensor& x2) const {
    std::vector<at::Tensor> parts;
    for (int64_t r = 0; r < x2.size(0); r += 8)
      parts.push_back(ops.quant_gemv_4bit(x2.narrow(0, r, std::min<int64_t>(8, x2.size(0) - r)), q_.data, q_.absmax,
                                          q_.nested_absmax, q_.offset, static_cast<int64_t>(q_.spec.code),
                                          q_.spec.blocksize, q_.shape[0]));
    return parts.size() == 1 ? parts[0] : at::cat(parts);
  }
  // LF_QUANT_GEMM: whether this forward takes the fused kernel (ConfigError for fused on a CPU run).
  const kernels::FusedOps* fused_gemm_for(const at::Tensor& x) const;

 private:
  quant::Bnb4Tensor q_;
  at::ScalarType dtype_;
};

// bitsandbytes' MatMul4Bit: the weight dequantized in the forward and again in the backward. The bias
// (frozen, maybe undefined: autograd's inputs must be defined) is passed by pointer, not as an input.
struct Dequant4Linear : public torch::autograd::Function<Dequant4Linear> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const Bnb4Linear* f, const at::Tensor* b,
                            bool base_values) {
    ctx->saved_data["format"] = reinterpret_cast<int64_t>(f);
    auto sizes = x.sizes().vec();
    sizes.back() = f->out_features();
    return base_values ? f->product(x, *b) : at::empty(sizes, x.options());
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    const auto* f = reinterpret_cast<const Bnb4Linear*>(ctx->saved_data["format"].toInt());
    const auto& g = grad_out[0];
    auto sizes = g.sizes().vec();
    sizes.back() = f->in_features();
    const auto dx = f->product_grad_input(g.reshape({-1, g.size(-1)}));  // matmul's fold of g's leading dims
    return {at::_unsafe_view(dx, sizes), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

const kernels::FusedOps* Bnb4Linear::fused_gemm_for(const at::Tensor& x) const {
  const auto& mode = kernel_paths().quant_gemm;
  if (mode == "dequant") return nullptr;
  const auto* ops = fused_ops_on(x);
  LF_CHECK(mode != "fused" || ops, ConfigError,
           "LF_QUANT_GEMM=fused: the fused 4-bit GEMM is a CUDA kernel, and this run computes on {}, where the 4-bit "
           "layers dequantize exactly (bitsandbytes' CPU arithmetic); unset LF_QUANT_GEMM (auto) or set it to dequant",
           x.device().str());
  if (!ops || !ops->quant_gemv_4bit || q_.shape[1] % 16 || q_.spec.blocksize % 16) return nullptr;
  const int64_t rows = x.numel() / x.size(-1);
  return mode == "fused" || rows <= 8 ? ops : nullptr;
}

// The bias inside the GEMM on the dequantizing path (bitsandbytes' MatMul4Bit), added after the few-row kernel.
at::Tensor Bnb4Linear::product(const at::Tensor& x, const at::Tensor& bias) const {
  if (const auto* ops = fused_gemm_for(x)) {
    auto sizes = x.sizes().vec();
    sizes.back() = out_features();
    auto y = at::_unsafe_view(fused_rows(*ops, x.reshape({-1, x.size(-1)})), sizes);
    return bias.defined() ? y.add_(bias) : y;
  }
  return at::linear(x, for_gemm(x, x.scalar_type()), bias.defined() ? std::optional<at::Tensor>(bias) : std::nullopt);
}

at::Tensor Bnb4Linear::linear(const at::Tensor& x, const at::Tensor& bias, bool base_values) const {
  LF_CHECK(!bias.defined() || !bias.requires_grad(), ConfigError,
           "a 4-bit linear layer's bias is frozen with its weight; training it is not supported");
  return Dequant4Linear::apply(x, this, &bias, base_values);
}

}  // namespace

std::unique_ptr<LinearFormat> make_bnb4_linear(quant::Bnb4Tensor q, at::ScalarType dtype) {
  return std::make_unique<Bnb4Linear>(std::move(q), dtype);
}

quant::Bnb4Spec bnb4_spec_of(const config::PrecisionSection& p) {
  LF_CHECK(p.quantization_bit.value_or(4) == 4 && p.quantization_method == "bnb", ConfigError,
           "quantization_bit {} with quantization_method {}: lf-train stores bitsandbytes' 4 bits only",
           p.quantization_bit.value_or(0), p.quantization_method);
  quant::Bnb4Spec s;
  s.code = quant::code4_from_name(p.quantization_type);
  s.double_quant = p.double_quantization;
  return s;
}

QuantizeReport quantized_base(CausalLM& model) {
  QuantizeReport r;
  for (auto& [spec, lin] : model.linears()) {
    if (!lin->format_) continue;
    const auto& f = *lin->format_;
    if (r.linears++ == 0) r.format = std::string(f.name()), r.double_quant = f.nested();
    r.stored_bytes += f.storage_bytes();
    r.weights += f.out_features() * f.in_features();
    r.dense_bytes += f.out_features() * f.in_features() * static_cast<int64_t>(c10::elementSize(f.dense_dtype()));
  }
  return r;
}

std::string describe(const QuantizeReport& r) {
  return fmt::format("4-bit base: {} linear layers in {}{}: {} bytes stored ({} dense, {:.3f} bits a weight)",
                     r.linears, r.format, r.double_quant ? ", double quantization" : "", r.stored_bytes, r.dense_bytes,
                     r.weights > 0 ? 8.0 * static_cast<double>(r.stored_bytes) / static_cast<double>(r.weights) : 0.0);
}

QuantizeReport quantize_linears(CausalLM& model, const quant::Bnb4Spec& spec, const c10::Device& device) {
  c10::NoGradGuard no_grad;
  QuantizeReport r;
  for (auto& [spec_, lin] : model.linears()) {
    if (lin->format_) continue;
    auto w = lin->weight_.to(device);
    r.dense_bytes += static_cast<int64_t>(w.nbytes());
    lin->weight_ = at::Tensor();  // its host copy goes now: one layer's dense weight at a time
    lin->format_ = make_bnb4_linear(quant::quantize_4bit(w, spec), w.scalar_type());
    r.stored_bytes += lin->format_->storage_bytes();
    r.weights += lin->format_->out_features() * lin->format_->in_features();
    ++r.linears;
  }
  return r;
}

}  // namespace lf::model
