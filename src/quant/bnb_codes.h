#pragma once
// Internal to lf_quant: the 4-bit quantization's interval bounds (bnb_codes.cpp).
#include <cstdint>

#include "lf/quant/bnb_4bit.h"

namespace lf::quant {

struct Code4Bounds {
  float bounds[15];    // ascending midpoints between the sorted code values
  int64_t order[16];   // the code index of interval k (the k-th smallest code value)
};
const Code4Bounds& code4_bounds(Code4 code);

}  // namespace lf::quant
