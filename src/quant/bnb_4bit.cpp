// bitsandbytes' 4-bit quantization and dequantization (bnb_4bit.h), operation for operation as its
// CPU backend runs them (backends/default/ops.py quantize_4bit, functional.quantize_4bit's double
// quantization, csrc/cpu_ops.cpp dequantizeBlockwise4bitCpu).
#include "lf/quant/bnb_4bit.h"

#include <ATen/ATen.h>

#include <map>
#include <mutex>
#include <string>

#include "bnb_codes.h"
#include "lf/common/error.h"

namespace lf::quant {

namespace {

// A code table on `device`, copied once per device (a copy per call would cost a host-to-device
// transfer each dequantization, which a CUDA graph's capture refuses).
at::Tensor table(const float* values, int64_t n, const at::Device& device) {
  const auto host = at::from_blob(const_cast<float*>(values), {n}, at::kFloat);
  if (device.is_cpu()) return host;
  static std::mutex mu;
  static std::map<std::pair<const float*, std::string>, at::Tensor> copies;
  std::lock_guard<std::mutex> lock(mu);
  auto& t = copies[{values, device.str()}];
  if (!t.defined()) t = host.to(device);
  return t;
}

// The absmax of each block of `bs` and every element scaled to [-1, 1] by it: [n] fp32. Full blocks
// multiply by the fp32 reciprocal (`x * (1.0 / absmax)`), the last partial block divides.
std::pair<at::Tensor, at::Tensor> scale_blocks(const at::Tensor& a, int64_t bs) {
  const int64_t n = a.numel(), rem = n % bs, full = n - rem;
  auto com = a.narrow(0, 0, full).view({full / bs, bs});
  auto absmax = std::get<0>(com.abs().max(-1));  // [blocks]
  auto scaled = at::clamp(com * absmax.clamp_min(1e-38).reciprocal().view({-1, 1}), -1, 1).reshape({-1});
  if (rem) {
    auto tail = a.narrow(0, full, rem);
    auto am = tail.abs().max().clamp_min(1e-38);
    absmax = at::cat({absmax, am.unsqueeze(0)});
    scaled = at::cat({scaled, at::clamp(tail / am, -1, 1)});
  }
  return {absmax, scaled};
}

}  // namespace

int64_t Bnb4Tensor::numel() const {
  int64_t n = 1;
  for (auto s : shape) n *= s;
  return n;
}

int64_t Bnb4Tensor::nbytes() const {
  int64_t b = static_cast<int64_t>(data.nbytes() + absmax.nbytes());
  if (nested()) b += static_cast<int64_t>(nested_absmax.nbytes() + offset.nbytes());
  return b;
}

Bnb4Tensor quantize_4bit(const at::Tensor& w, const Bnb4Spec& spec) {
  const auto dt = w.scalar_type();
  LF_CHECK(dt == at::kFloat || dt == at::kBFloat16 || dt == at::kHalf, ConfigError,
           "4-bit quantization takes a bf16, fp16 or fp32 weight (bitsandbytes' quantize_4bit), got {}",
           c10::toString(dt));
  LF_CHECK(spec.blocksize > 0 && spec.blocksize % 2 == 0, ConfigError, "4-bit blocksize {}: expected an even size",
           spec.blocksize);
  const auto& cb = code4_bounds(spec.code);
  auto [absmax, scaled] = scale_blocks(w.reshape({-1}).to(at::kFloat), spec.blocksize);
  if (scaled.numel() % 2) scaled = at::constant_pad_nd(scaled, {0, 1});
  auto bounds = table(cb.bounds, 15, w.device());
  auto q = at::bucketize(scaled, bounds, /*out_int32=*/true, /*right=*/false);  // the bounds < x
  if (spec.code != Code4::kNf4)
    q = at::from_blob(const_cast<int64_t*>(cb.order), {16}, at::kLong).to(w.device()).index_select(0, q);
  auto q8 = q.to(at::kByte);
  Bnb4Tensor out;
  out.data = at::bitwise_or(at::bitwise_left_shift(q8.slice(0, 0, c10::nullopt, 2), 4), q8.slice(0, 1, c10::nullopt, 2));
  out.shape = w.sizes().vec();
  out.spec = spec;
  if (!spec.double_quant) {
    out.absmax = absmax;
    return out;
  }
  // functional.quantize_4bit(compress_statistics=True): offset = absmax.mean(), then the centred
  // values in blocks of 256. On the CPU wherever the weight is (the mean's summation order is then
  // torch's CPU one, as bitsandbytes' CPU backend; the arrays are numel / 64 long).
  auto cpu = absmax.cpu();
  auto offset = cpu.mean();
  auto [codes, nested] = quantize_blockwise_8bit(cpu - offset, Bnb4Spec::kNestedBlocksize);
  out.absmax = codes.to(w.device());
  out.nested_absmax = nested.to(w.device());
  out.offset = offset.to(w.device());
  return out;
}

at::Tensor block_scales(const Bnb4Tensor& q) {
  if (!q.nested()) return q.absmax;
  // dequantize_blockwise(absmax, state2) + offset: two fp32 roundings, as bitsandbytes'.
  const auto dev = q.absmax.device();
  const int64_t blocks = q.absmax.numel();
  auto v = table(dynamic_map(), 256, dev).index_select(0, q.absmax.to(at::kLong));
  auto s = q.nested_absmax.repeat_interleave(Bnb4Spec::kNestedBlocksize).narrow(0, 0, blocks);
  return v * s + q.offset;
}

at::Tensor dequantize_4bit(const Bnb4Tensor& q, c10::ScalarType dtype) {
  const int64_t n = q.numel(), bs = q.spec.blocksize, rem = n % bs, full = n - rem;
  const auto dev = q.data.device();
  auto idx = at::stack({at::bitwise_right_shift(q.data, 4), at::bitwise_and(q.data, 15)}, 1).reshape({-1});
  auto values = table(code4_values(q.spec.code), 16, dev).index_select(0, idx.narrow(0, 0, n).to(at::kLong));
  auto scales = block_scales(q);
  auto out = (values.narrow(0, 0, full).view({full / bs, bs}) * scales.narrow(0, 0, full / bs).view({-1, 1})).view({-1});
  if (rem) out = at::cat({out, values.narrow(0, full, rem) * scales.narrow(0, full / bs, 1)});
  return out.to(dtype).view(q.shape);
}

}  // namespace lf::quant
