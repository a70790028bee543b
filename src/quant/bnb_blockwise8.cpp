// bitsandbytes' 8-bit blockwise quantization on the CPU (csrc/cpu_ops.cpp, quantize_cpu_impl and
// dequantizeBlockwise8bitCpu), used by double quantization for the absmax values (bnb_4bit.h).
// The nearest code is found through bitsandbytes' 65536-bin lookup table over [-1, 1] (dynamic_map_lut,
// bnb_codes.cpp), not by an exact search: a value near a midpoint may take the farther code, as bitsandbytes' does.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "lf/common/error.h"
#include "lf/quant/bnb_4bit.h"

namespace lf::quant {

std::pair<at::Tensor, at::Tensor> quantize_blockwise_8bit(const at::Tensor& x, int64_t blocksize) {
  LF_CHECK(x.device().is_cpu() && x.scalar_type() == at::kFloat, ConfigError,
           "8-bit blockwise quantization runs on CPU fp32 values, got {} on {}", c10::toString(x.scalar_type()),
           x.device().str());
  auto a = x.contiguous();
  const int64_t n = a.numel(), blocks = (n + blocksize - 1) / blocksize;
  auto codes = at::empty({n}, at::kByte);
  auto absmax = at::empty({blocks}, at::kFloat);
  const float* in = a.data_ptr<float>();
  uint8_t* out = codes.data_ptr<uint8_t>();
  float* am = absmax.data_ptr<float>();
  const uint8_t* lut = dynamic_map_lut(/*is_signed=*/true);
  at::parallel_for(0, blocks, 16, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t begin = b * blocksize, end = std::min(begin + blocksize, n);
      float m = 0.0f;
      for (int64_t i = begin; i < end; ++i) m = std::max(m, std::fabs(in[i]));
      am[b] = m;
      if (m == 0.0f) {
        std::fill(out + begin, out + end, uint8_t{0});
        continue;
      }
      const float inv = 1.0f / m;
      for (int64_t i = begin; i < end; ++i) out[i] = lut[dynamic_lut_index(in[i] * inv)];
    }
  });
  return {codes, absmax};
}

at::Tensor dequantize_blockwise_8bit(const at::Tensor& codes, const at::Tensor& absmax, int64_t blocksize) {
  const int64_t n = codes.numel();
  auto code = at::from_blob(const_cast<float*>(dynamic_map()), {256}, at::kFloat).to(codes.device());
  auto v = code.index_select(0, codes.reshape({-1}).to(at::kLong));
  return v * absmax.repeat_interleave(blocksize).narrow(0, 0, n);
}

}  // namespace lf::quant
