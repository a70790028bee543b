// The code tables of bitsandbytes' 4-bit and 8-bit formats, as its CPU backend holds them
// (bnb_4bit.h). Each value is bitsandbytes' own, checked against it by tests/quant.
#include "bnb_codes.h"

#include <vector>

#include "lf/common/error.h"

namespace lf::quant {

namespace {

// What dequantization multiplies by: csrc/cpu_ops.cpp's AVX-512 tables (set_nf4_lut / set_fp4_lut), which
// bitsandbytes' CPU backend runs on AVX-512 machines, and its Python tables (get_4bit_type): FP4's code 8
// is +0.0 there (the scalar C fallback's fp4_lut has -0.0f; only the zero's sign differs).
constexpr float kNf4Values[16] = {
    -1.0f,
    -0.6961928009986877f,
    -0.5250730514526367f,
    -0.39491748809814453f,
    -0.28444138169288635f,
    -0.18477343022823334f,
    -0.09105003625154495f,
    0.0f,
    0.07958029955625534f,
    0.16093020141124725f,
    0.24611230194568634f,
    0.33791524171829224f,
    0.44070982933044434f,
    0.5626170039176941f,
    0.7229568362236023f,
    1.0f,
};
constexpr float kFp4Values[16] = {
    0.0f,  0.005208333333f,  0.66666667f,  1.0f,  0.33333333f,  0.5f,  0.16666667f,  0.25f,
    0.0f,  -0.005208333333f, -0.66666667f, -1.0f, -0.33333333f, -0.5f, -0.16666667f, -0.25f,
};

// backends/default/ops.py _get_4bit_quantize_bounds: the fp32 midpoints between the sorted code
// values (get_4bit_type's table, FP4's divided by 12 in fp32), and the code of each interval.
// torch.bucketize(x, bounds) (the number of bounds < x) picks the interval: a value on a midpoint
// takes the lower code.
constexpr Code4Bounds kNf4Bounds = {
    {-0x1.b239bp-1f, -0x1.38a4ep-1f, -0x1.d709p-2f, -0x1.5bd4ecp-2f, -0x1.e079d8p-3f, -0x1.1a7178p-3f,
     -0x1.74f0e2p-5f, 0x1.45f5fep-5f, 0x1.ec90c4p-4f, 0x1.a0cfcp-3f, 0x1.2b05a8p-2f, 0x1.8ea7f2p-2f, 0x1.00da08p-1f,
     0x1.491b5ep-1f, 0x1.b913b4p-1f},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
};
// FP4's order is torch.argsort's of its table (+0.0 at 0 and 8): bitsandbytes' own, not re-derived.
constexpr Code4Bounds kFp4Bounds = {
    {-0x1.aaaaacp-1f, -0x1.2aaaacp-1f, -0x1.aaaaacp-2f, -0x1.2aaaacp-2f, -0x1.aaaaacp-3f, -0x1.6p-4f, -0x1.555556p-9f,
     0.0f, 0x1.555556p-9f, 0x1.6p-4f, 0x1.aaaaacp-3f, 0x1.2aaaacp-2f, 0x1.aaaaacp-2f, 0x1.2aaaacp-1f, 0x1.aaaaacp-1f},
    {11, 10, 13, 12, 15, 14, 9, 0, 8, 1, 6, 7, 4, 5, 2, 3},
};

constexpr float kDynamicMap[256] = {
#include "bnb_dynamic_map.inc"
};
constexpr float kUnsignedDynamicMap[256] = {
#include "bnb_dynamic_map_unsigned.inc"
};

}  // namespace

Code4 code4_from_name(std::string_view name) {
  if (name == "nf4") return Code4::kNf4;
  if (name == "fp4") return Code4::kFp4;
  LF_THROW(ConfigError, "quantization_type: expected nf4 or fp4 (bitsandbytes' 4-bit types), got '{}'", name);
}

std::string_view code4_name(Code4 code) { return code == Code4::kNf4 ? "nf4" : "fp4"; }

const float* code4_values(Code4 code) { return code == Code4::kNf4 ? kNf4Values : kFp4Values; }

const Code4Bounds& code4_bounds(Code4 code) { return code == Code4::kNf4 ? kNf4Bounds : kFp4Bounds; }

const float* dynamic_map(bool is_signed) { return is_signed ? kDynamicMap : kUnsignedDynamicMap; }

const uint8_t* dynamic_map_lut(bool is_signed) {
  // build_quantize_lut: bin i of [-1, 1] -> the first code whose upper midpoint is >= the bin's value.
  static const auto make = [](bool s) {
    std::vector<uint8_t> out(kDynamicLutSize);
    const float* code = dynamic_map(s);
    float mid[255];
    for (int i = 0; i < 255; ++i) mid[i] = 0.5f * (code[i] + code[i + 1]);
    int c = 0;
    for (int i = 0; i < kDynamicLutSize; ++i) {
      const float val = -1.0f + (2.0f * static_cast<float>(i)) / static_cast<float>(kDynamicLutSize - 1);
      while (c < 255 && mid[c] < val) ++c;
      out[i] = static_cast<uint8_t>(c);
    }
    return out;
  };
  static const std::vector<uint8_t> signed_lut = make(true), unsigned_lut = make(false);
  return is_signed ? signed_lut.data() : unsigned_lut.data();
}

}  // namespace lf::quant
