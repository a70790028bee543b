// bitsandbytes' 8-bit blockwise quantization on the CPU (csrc/cpu_ops.cpp, quantize_cpu_impl and
// dequantizeBlockwise8bitCpu), used by double quantization for the absmax values (bnb_4bit.h).
// The nearest code is found through bitsandbytes' 65536-bin lookup table over [-1, 1], not by an
// exact search: a value near a midpoint may take the farther code, as bitsandbytes' does.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "lf/common/error.h"
#include "lf/quant/bnb_4bit.h"

namespace lf::quant {

namespace {

constexpr int kLutSize = 65536;

// build_quantize_lut: bin i of [-1, 1] -> the first code whose upper midpoint is >= the bin's value.
const uint8_t* dynamic_lut() {
  static const auto lut = [] {
    std::vector<uint8_t> out(kLutSize);
    const float* code = dynamic_map();
    float mid[255];
    for (int i = 0; i < 255; ++i) mid[i] = 0.5f * (code[i] + code[i + 1]);
    int c = 0;
    for (int i = 0; i < kLutSize; ++i) {
      const float val = -1.0f + (2.0f * static_cast<float>(i)) / static_cast<float>(kLutSize - 1);
      while (c < 255 && mid[c] < val) ++c;
      out[i] = static_cast<uint8_t>(c);
    }
    return out;
  }();
  return lut.data();
}

// norm_to_lut_index. Kept as separate float operations (no FMA contraction: the build targets no FMA
// ISA by default, and bitsandbytes' own compile gives the same indices; tests/quant compare).
inline uint16_t lut_index(float v) {
  v = std::clamp(v, -1.0f, 1.0f);
  const float t = (v + 1.0f) * 0.5f;
  const float u = t * static_cast<float>(kLutSize - 1);
  return static_cast<uint16_t>(u + 0.5f);
}

}  // namespace

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
  const uint8_t* lut = dynamic_lut();
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
      for (int64_t i = begin; i < end; ++i) out[i] = lut[lut_index(in[i] * inv)];
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
