#pragma once
// 4-bit weights exactly as bitsandbytes stores them (QLoRA: quantize_4bit / dequantize_4bit, the
// Params4bit data and its QuantState), so that a base quantized here is the one peft + bitsandbytes
// train on, and a folder bitsandbytes saved loads as it is.
//
//   blocks of `blocksize` (64) consecutive elements of the row-major weight, each scaled by its
//   absmax to [-1, 1] and rounded to the nearest of 16 code values (NF4: normal quantiles; FP4:
//   e2m1), two codes a byte, the first element in the high nibble;
//   double quantization (bnb_4bit_use_double_quant): the fp32 absmax values, less their mean
//   (`offset`), quantized again in blocks of 256 to the signed 8-bit dynamic map, whose own
//   absmax values stay fp32 (`nested_absmax`).
//
// The arithmetic is bitsandbytes' CPU backend's, operation for operation (backends/default/ops.py
// quantize_4bit, csrc/cpu_ops.cpp's 8-bit blockwise quantization and 4-bit dequantization), so the
// codes are equal bit for bit (tests/quant, against bitsandbytes in the reference venv). The 4-bit
// step runs on the weight's device (elementwise ATen ops give the same bits on CPU and CUDA); the
// nested step and the offset's mean run on the CPU, so every device stores the same bytes.
// Threading: pure functions.
#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lf::quant {

enum class Code4 { kNf4, kFp4 };

// "nf4" / "fp4"; ConfigError for another name.
Code4 code4_from_name(std::string_view name);
std::string_view code4_name(Code4 code);

struct Bnb4Spec {
  Code4 code = Code4::kNf4;
  bool double_quant = true;  // bnb_4bit_use_double_quant (LLaMA-Factory's double_quantization, default true)
  int64_t blocksize = 64;    // bitsandbytes' default for 4 bits (Params4bit.blocksize)
  static constexpr int64_t kNestedBlocksize = 256;
};

// A weight in bitsandbytes' 4-bit format, on one device.
struct Bnb4Tensor {
  at::Tensor data;           // [ceil(numel / 2)] uint8: packed codes
  at::Tensor absmax;         // [blocks] fp32; nested: uint8 codes of the dynamic map
  at::Tensor nested_absmax;  // nested: [ceil(blocks / 256)] fp32, else undefined
  at::Tensor offset;         // nested: [] fp32, the mean subtracted before the nested step
  std::vector<int64_t> shape;  // the weight's ([out, in])
  Bnb4Spec spec;

  int64_t numel() const;
  int64_t blocks() const { return (numel() + spec.blocksize - 1) / spec.blocksize; }
  bool nested() const { return nested_absmax.defined(); }
  // Bytes stored: data + absmax (+ nested absmax + offset).
  int64_t nbytes() const;
};

// bitsandbytes.functional.quantize_4bit(w, blocksize, compress_statistics, quant_type): w (bf16,
// fp16 or fp32, any shape, on any device) as it is; quantize the weight in the dtype the model is
// loaded in (LLaMA-Factory loads in the compute dtype first), since the absmax values are its.
Bnb4Tensor quantize_4bit(const at::Tensor& w, const Bnb4Spec& spec);

// Per-block scales, fp32 [blocks] on the data's device: absmax, or the nested ones dequantized
// (dynamic map code x nested absmax, + offset) as bitsandbytes' dequantize_4bit computes them.
at::Tensor block_scales(const Bnb4Tensor& q);

// The weight (q.shape) in `dtype` on the data's device: code value x its block's scale in fp32,
// rounded to dtype (round to nearest even), as bitsandbytes' CPU dequantize_4bit.
at::Tensor dequantize_4bit(const Bnb4Tensor& q, c10::ScalarType dtype);

// The 16 code values bitsandbytes dequantizes with (csrc/cpu_ops.cpp's nf4_lut / fp4_lut), fp32 [16].
const float* code4_values(Code4 code);

// bitsandbytes' 8-bit blockwise quantization on the CPU (csrc/cpu_ops.cpp quantize_cpu_impl: the
// dynamic map through its 65536-entry lookup table): fp32 x [n] -> codes uint8 [n], absmax fp32
// [ceil(n / blocksize)]. Exposed for the tests.
std::pair<at::Tensor, at::Tensor> quantize_blockwise_8bit(const at::Tensor& x, int64_t blocksize);
at::Tensor dequantize_blockwise_8bit(const at::Tensor& codes, const at::Tensor& absmax, int64_t blocksize);
// bitsandbytes' 8-bit dynamic map (functional.create_dynamic_map(signed)), fp32 [256], sorted: the signed one
// codes the nested absmax and the 8-bit AdamW's first moment, the unsigned one its second moment.
const float* dynamic_map(bool is_signed = true);

// The nearest code of a value in [-1, 1] as bitsandbytes' CPU backend finds it (csrc/cpu_ops.cpp): through a
// 65536-bin lookup table over [-1, 1] (build_quantize_lut), not an exact search, so a value near a midpoint may
// take the farther code, as bitsandbytes' does. dynamic_map_lut(s) [65536]: bin -> index into dynamic_map(s);
// built once a map. The table behind quantize_blockwise_8bit and the 8-bit AdamW's CPU states.
constexpr int kDynamicLutSize = 65536;
const uint8_t* dynamic_map_lut(bool is_signed = true);
// norm_to_lut_index: v (clamped to [-1, 1]) -> its bin. Kept as separate float operations (no FMA contraction:
// the build targets no FMA ISA by default, and bitsandbytes' own compile gives the same indices; tests/quant
// compare).
inline uint16_t dynamic_lut_index(float v) {
  v = std::clamp(v, -1.0f, 1.0f);
  const float t = (v + 1.0f) * 0.5f;
  const float u = t * static_cast<float>(kDynamicLutSize - 1);
  return static_cast<uint16_t>(u + 0.5f);
}

}  // namespace lf::quant
