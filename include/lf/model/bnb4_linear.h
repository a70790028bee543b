#pragma once
// QLoRA's frozen base weight: bitsandbytes' 4-bit format (lf/quant/bnb_4bit.h) as a linear layer's
// number format (linear_format.h), computing as bitsandbytes' Linear4bit + MatMul4Bit do:
//   forward:  y = linear(x, dequantize_4bit(W) in x's dtype, bias)
//   backward: dx = g @ dequantize_4bit(W).to(g's dtype); no gradient for W
// On the CPU exactly that (ATen: peft + bitsandbytes' numbers); on a GPU the weight is dequantized
// by the fused kernel (lf/kernels/fused_ops.h) into one scratch buffer per device and dtype, reused
// by every layer, and the product is cuBLAS's. Nothing is saved for backward but the 4-bit storage.
#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <string>

#include "lf/config/job_plan.h"
#include "lf/model/linear_format.h"
#include "lf/quant/bnb_4bit.h"

namespace lf::model {

class CausalLM;

// A format over an already quantized weight (a bitsandbytes folder's, or quantize_4bit's); `dtype`:
// the dtype it was quantized from (bitsandbytes' QuantState.dtype: the backward's dequantization).
std::unique_ptr<LinearFormat> make_bnb4_linear(quant::Bnb4Tensor q, at::ScalarType dtype);

struct QuantizeReport {
  int64_t linears = 0;
  int64_t weights = 0;       // their elements
  int64_t dense_bytes = 0;   // the weights as they were
  int64_t stored_bytes = 0;  // their 4-bit storage (data + quantization state)
  std::string format;        // "nf4" (the first layer's)
  bool double_quant = false;
};

// The plan's precision section (quantization_type, double_quantization) as bitsandbytes' settings.
quant::Bnb4Spec bnb4_spec_of(const config::PrecisionSection& p);
// What the model's linear layers hold in a format of their own (none: linears 0).
QuantizeReport quantized_base(CausalLM& model);
// "4-bit base: 14 linear layers in nf4, double quantization: 8320 bytes stored (28672 as float32 ...)".
std::string describe(const QuantizeReport& r);

// bitsandbytes' on-the-fly quantization at load (transformers' replace_with_bnb_linear: every
// linear layer but lm_head): each decoder linear's weight moved to `device`, quantized there from
// its dtype (the compute dtype LLaMA-Factory loads in), its dense tensor released. Biases, norms,
// the embedding and lm_head stay as they are.
QuantizeReport quantize_linears(CausalLM& model, const quant::Bnb4Spec& spec, const c10::Device& device);

}  // namespace lf::model
