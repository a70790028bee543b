#pragma once
// QLoRA's 4-bit base in the memory model (quantized_base.cpp). Internal to lf_plan.
#include <vector>

#include "lf/config/job_plan.h"
#include "lf/model/config.h"
#include "lf/plan/model_units.h"

namespace lf::plan {

// Bytes a 4-bit weight is stored in (codes and quantization state), as bitsandbytes lays them out.
double bnb4_bytes_per_weight(const config::PrecisionSection& p);

struct QuantizedBase {
  double weights_per_layer = 0;  // a decoder layer's linear weights (elements) stored in 4 bits
  double saved_per_layer = 0;    // bytes they save against the compute dtype
  double largest_linear = 0;     // elements: the dequantization buffer (one per device, reused)
  double bytes_per_weight = 0;   // as stored (codes / FP8 bytes and their scales)
  const char* what = "";         // "4 bits", "FP8 (e4m3)"
};
// Nothing when the plan does not quantize (nor store a LoRA base in FP8); `c` the compute dtype's size.
QuantizedBase quantized_base(const config::PrecisionSection& p, const model::ModelConfig& mc, double c, bool lora);
// The decoder units' frozen counts as compute-dtype elements of the same bytes (ZeRO's formula
// counts frozen elements at the compute dtype's size).
void apply_to_units(const QuantizedBase& q, double c, std::vector<UnitParams>& units);

}  // namespace lf::plan
