// QLoRA in the memory model (memory_model.h): the bytes of a base whose decoder linear layers are
// stored in bitsandbytes' 4-bit format (lf/quant/bnb_4bit.h) instead of the compute dtype.
#include "quantized_base.h"

#include "lf/quant/fp8_recipe.h"

namespace lf::plan {

double bnb4_bytes_per_weight(const config::PrecisionSection& p) {
  // Half a byte of code a weight, and a block of 64's scale: an fp32 absmax, or under double
  // quantization a uint8 code plus an fp32 absmax and offset per 256 blocks.
  constexpr double kBlock = 64, kNested = 256;
  return 0.5 + (p.double_quantization ? 1.0 / kBlock + 8.0 / (kBlock * kNested) : 4.0 / kBlock);
}

// FP8 (issue 33, lf/model/fp8_linear.h): LoRA's frozen decoder linears with both dimensions divisible by
// 16 stored in e4m3, a byte a weight plus an fp32 scale per output row (rowwise) or per tensor; the
// backward's transposed FP8 copy of one weight at a time is the reused buffer's term.
QuantizedBase fp8_base(const config::PrecisionSection& p, const model::ModelConfig& mc, double c) {
  QuantizedBase q;
  q.what = "FP8 (e4m3)";
  double scale_bytes = 0;
  const bool rowwise = quant::fp8_rowwise(quant::fp8_recipe_from_name(p.fp8_recipe));
  for (const auto& l : decoder_linears(mc)) {
    if (l.in % 16 || l.out % 16) continue;  // kept in the compute dtype
    const double n = static_cast<double>(l.in * l.out);
    q.weights_per_layer += n;
    scale_bytes += rowwise ? 4.0 * static_cast<double>(l.out) : 4.0;
    q.largest_linear = std::max(q.largest_linear, n / c);  // one byte a weight, in compute-dtype elements
  }
  if (q.weights_per_layer == 0) return q;
  q.bytes_per_weight = 1.0 + scale_bytes / q.weights_per_layer;
  q.saved_per_layer = q.weights_per_layer * (c - q.bytes_per_weight);
  return q;
}

QuantizedBase quantized_base(const config::PrecisionSection& p, const model::ModelConfig& mc, double c, bool lora) {
  QuantizedBase q;
  if (p.fp8 && lora) return fp8_base(p, mc, c);
  if (!p.quantized()) return q;
  q.what = "4 bits";
  q.bytes_per_weight = bnb4_bytes_per_weight(p);
  for (const auto& l : decoder_linears(mc)) {
    const double n = static_cast<double>(l.in * l.out);
    q.weights_per_layer += n;
    q.largest_linear = std::max(q.largest_linear, n);
  }
  q.saved_per_layer = q.weights_per_layer * (c - bnb4_bytes_per_weight(p));
  return q;
}

void apply_to_units(const QuantizedBase& q, double c, std::vector<UnitParams>& units) {
  if (q.weights_per_layer == 0) return;
  // A decoder layer's frozen elements in compute-dtype equivalents: what its storage weighs.
  const auto saved = static_cast<int64_t>(q.saved_per_layer / c);
  for (size_t u = 1; u + 1 < units.size(); ++u) units[u].frozen -= saved;
}

}  // namespace lf::plan
