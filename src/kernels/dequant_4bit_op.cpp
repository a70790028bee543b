// The 4-bit dequantization (dequant_4bit.h) over at::Tensors: what the model's 4-bit linear layers
// (model/bnb4_linear.cpp) call through the FusedOps table to fill their reused GEMM buffer. Not
// autograd: the weight is frozen, and the layer's own node dequantizes again in its backward.
#include <ATen/ATen.h>

#include <map>
#include <mutex>
#include <string>

#include "fused_op_impls.h"
#include "kernel_device.h"
#include "lf/common/error.h"
#include "lf/kernels/dequant_4bit.h"
#include "lf/kernels/dequant_gemv_4bit.h"
#include "lf/quant/bnb_4bit.h"

namespace lf::kernels {
namespace {

// The code tables on a device, copied once (quant's host tables: nf4, fp4, the dynamic map).
const at::Tensor& device_table(const at::Device& device, int which) {
  static std::mutex mu;
  static std::map<std::pair<std::string, int>, at::Tensor> tables;
  std::lock_guard<std::mutex> lock(mu);
  auto& t = tables[{device.str(), which}];
  if (!t.defined()) {
    const float* host = which == 2 ? quant::dynamic_map() : quant::code4_values(which == 0 ? quant::Code4::kNf4 : quant::Code4::kFp4);
    t = at::from_blob(const_cast<float*>(host), {which == 2 ? 256 : 16}, at::kFloat).to(device);
  }
  return t;
}

}  // namespace

namespace {

// The weight's half of the launch arguments (the codes and their scales), checked.
Dequant4Args weight_args(const at::Tensor& data, const at::Tensor& absmax, const at::Tensor& nested_absmax,
                         const at::Tensor& offset, int64_t code, int64_t blocksize) {
  const bool nested = nested_absmax.defined();
  LF_CHECK(on_kernel_device(data) && data.scalar_type() == at::kByte && data.is_contiguous() && absmax.is_contiguous() &&
               absmax.scalar_type() == (nested ? at::kByte : at::kFloat) && (code == 0 || code == 1) &&
               (!nested || nested_absmax.is_contiguous()),
           BackendError, "fused 4-bit op: expected contiguous uint8 codes and {} absmax on the kernels' device, got {}, {}",
           nested ? "uint8" : "fp32", describe(data), describe(absmax));
  Dequant4Args a;
  a.blocksize = blocksize;
  a.data = data.const_data_ptr<uint8_t>();
  a.code = device_table(data.device(), static_cast<int>(code)).const_data_ptr<float>();
  if (nested) {
    a.absmax_codes = absmax.const_data_ptr<uint8_t>();
    a.dynamic_map = device_table(data.device(), 2).const_data_ptr<float>();
    a.nested_absmax = nested_absmax.const_data_ptr<float>();
    a.offset = offset.const_data_ptr<float>();
  } else {
    a.absmax = absmax.const_data_ptr<float>();
  }
  return a;
}

}  // namespace

at::Tensor quant_gemv_4bit_op(const at::Tensor& x, const at::Tensor& data, const at::Tensor& absmax,
                              const at::Tensor& nested_absmax, const at::Tensor& offset, int64_t code,
                              int64_t blocksize, int64_t n) {
  const auto x2 = x.contiguous();
  LF_CHECK(x2.dim() == 2 && x2.size(0) <= kGemv4MaxRows && is_kernel_dtype(x2) && x2.device() == data.device() &&
               data.numel() * 2 == n * x2.size(1),
           BackendError, "fused 4-bit gemv: expected x [<= {} rows, k] on the weight's device and {} x k weights, got {}",
           kGemv4MaxRows, n, describe(x2));
  Gemv4Args a;
  a.w = weight_args(data, absmax, nested_absmax, offset, code,
                    blocksize);
  a.w.dtype = kernel_dtype(x2);
  a.w.n = n * x2.size(1);
  a.m = x2.size(0);
  a.n = n;
  a.k = x2.size(1);
  a.x = x2.const_data_ptr();
  auto y = at::empty({a.m, n}, x2.options());
  a.y = y.mutable_data_ptr();
  run_on_device(y, [&](Stream s) { dequant_gemv_4bit(a, s); });
  return y;
}

void dequantize_4bit_op(const at::Tensor& data, const at::Tensor& absmax, const at::Tensor& nested_absmax,
                        const at::Tensor& offset, int64_t code, int64_t blocksize, const at::Tensor& out) {
  LF_CHECK(out.is_contiguous() && is_kernel_dtype(out) && out.device() == data.device() &&
               data.numel() == (out.numel() + 1) / 2,
           BackendError, "fused dequantize_4bit: expected a contiguous float output of 2 weights a byte of {}, got {}",
           describe(data), describe(out));
  auto a = weight_args(data, absmax, nested_absmax, offset,
                       code, blocksize);
  a.dtype = kernel_dtype(out);
  a.n = out.numel();
  a.out = out.mutable_data_ptr();
  run_on_device(out, [&](Stream s) { dequant_4bit(a, s); });
}

}  // namespace lf::kernels
