#pragma once
// FP8 training's linear layers (issue 33): the decoder linears' GEMMs in FP8 as torchao's Float8Linear
// computes them (lf/quant/fp8.h), behind the two seams a Linear has:
// - a frozen weight (LoRA's base, freeze's frozen layers) becomes a LinearFormat (linear_format.h): stored
//   once in e4m3 with its scales ("weight" uint8 [out, in]: the FP8 bytes, so every sharding and
//   collective path that moves bitsandbytes' uint8 codes moves these; "weight.scale" fp32 [] or
//   [out, 1]); each step casts only the activations (forward) and the output gradient (input gradient);
// - a trainable weight (full fine-tuning) keeps its fp32 master; Linear::fp8_ makes each forward cast the
//   weight (in the compute dtype, through its gradient route) and the input to FP8, and the backward cast
//   the output gradient, the three GEMMs as the recipe says.
// Converted: every decoder linear with both dimensions divisible by 16 (LLaMA-Factory's module filter;
// cuBLASLt's FP8 GEMM needs them); embeddings, norms, attention, the MoE router and experts and the LM head
// stay in high precision (LLaMA-Factory's filter skips embed / lm_head too).
// Threading: the training thread, or autograd's during backward.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>

#include "lf/model/linear_format.h"
#include "lf/quant/fp8.h"

namespace lf::model {

class CausalLM;
struct Linear;

// y = x W^T (+ bias) in FP8 with autograd to x and w (w: the weight in x's dtype, its own gradient route).
at::Tensor fp8_linear(const at::Tensor& x, const at::Tensor& w, quant::Fp8Recipe r, bool base_values);
// A frozen weight [out, in] stored in FP8 under the recipe.
std::unique_ptr<LinearFormat> make_fp8_linear(const at::Tensor& w, quant::Fp8Recipe r);
// The recipe under which lin's forward casts its input through quant::fp8_stored_forward (a frozen weight
// stored in FP8, or a trainable one cast per step), so that the input's producer may hand that forward the
// cast (quant::fp8_seed_forward_cast); kNone where its forward casts no input so (high precision, another
// format, DoRA, OFT).
quant::Fp8Recipe fp8_input_recipe(const Linear& lin);
// The row scales [out, 1] of lin's weight where it is stored in FP8 rowwise and its input gradient is
// quant::fp8_stored_grad_input's (so that the gradient's producer may hand it the cast:
// quant::fp8_seed_grad_input_cast); undefined otherwise (another recipe or format, trainable, DoRA, OFT).
at::Tensor fp8_stored_rowwise_scale(const Linear& lin);

struct Fp8Report {
  quant::Fp8Recipe recipe = quant::Fp8Recipe::kNone;
  int64_t stored = 0;        // frozen linears stored in FP8
  int64_t cast = 0;          // trainable linears cast per step
  int64_t kept = 0;          // decoder linears kept in high precision (a dimension not divisible by 16)
  int64_t dense_bytes = 0;   // the stored linears' weights as they were
  int64_t stored_bytes = 0;  // their FP8 bytes + scales
  bool fused_cast = false;   // the CUDA cast kernel installed
  bool scales_in_gemm = false;  // rowwise gradient GEMMs take their row scales (quant::fp8_rowwise_scales_in_gemm)
};

// Every eligible decoder linear to FP8, after LoRA / freeze chose what trains: with `store_frozen` (LoRA,
// whose outputs are the adapter alone) a frozen weight is stored in FP8, its dense copy released; every
// other one is cast per step (freeze's frozen layers too: their dense weights are saved with the model).
// Installs the CUDA cast kernel when the fused kernels are on and the weights on a GPU.
Fp8Report use_fp8(CausalLM& model, quant::Fp8Recipe r, bool store_frozen);
// "FP8 (rowwise): 56 frozen linears stored in e4m3 (... bytes, ... as bf16), 0 cast per step, 1 kept in bf16; GEMMs in FP8:
// forward, input gradient".
std::string describe(const Fp8Report& r);

}  // namespace lf::model
