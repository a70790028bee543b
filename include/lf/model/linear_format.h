#pragma once
// A linear layer's frozen base weight in a number format of its own (DESIGN "Number format per
// linear layer"): the storage tensors it holds, and the GEMM that reads them. A Linear with a
// format (Linear::format_) asks it once per forward for its base output; LoRA's update goes on top
// unchanged (layers.cpp). bf16 / fp16 / fp32 weights have no format (Linear::weight_).
//
// The storage tensors are listed by Linear::named_parameters under the names the format's
// checkpoints use below the module ("weight", "weight.absmax", ...), so that a strategy shards and
// gathers them as it does any frozen parameter (ZeRO-3: parallel/unit_storage.h stores a unit's
// tensors of every dtype) and may re-point them: a format reads its tensors through those slots at
// each use. A new format (FP8: data + scales) is a class implementing LinearFormat and a function
// that makes it (bnb4_linear.h is the 4-bit one).
// Threading: the training thread, or autograd's during backward.
#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lf::model {

struct NamedParam;

class LinearFormat {
 public:
  virtual ~LinearFormat() = default;
  virtual std::string_view name() const = 0;  // "nf4", "fp4"
  virtual int64_t out_features() const = 0;
  virtual int64_t in_features() const = 0;
  // The storage tensors, in a fixed order, named `prefix` + their checkpoint name ("...q_proj.weight",
  // "...q_proj.weight.absmax").
  virtual void named_storage(const std::string& prefix, std::vector<NamedParam>& out) = 0;
  virtual int64_t storage_bytes() const = 0;
  virtual bool nested() const { return false; }  // its scales quantized again (double quantization)
  // The dtype the weight was stored from (its dense bytes: out x in x this dtype's size).
  virtual at::ScalarType dense_dtype() const = 0;
  // The weight [out, in] in `dtype` (merging, tests).
  virtual at::Tensor dequantize(at::ScalarType dtype) const = 0;
  // x [.., in] -> x W^T (+ bias [out]) [.., out] in x's dtype. Autograd carries the gradient to x (and
  // bias) only: the weight is frozen. base_values false: the product is not computed and the output
  // is garbage (backward_only_linear.h: a checkpoint recompute); its backward is the same.
  virtual at::Tensor linear(const at::Tensor& x, const at::Tensor& bias, bool base_values) const = 0;
  // The same product outside autograd, for a node that fuses LoRA's update into it
  // (format_lora_linear.h): x [.., in] -> x W^T (+ bias) [.., out] in x's dtype, not a view, rounded
  // as linear() rounds it; and its input gradient g [M, out] -> g W [M, in], contiguous (the adapter's
  // part is added into it in place). A format without them (has_product false) gets LoRA on top of
  // linear() through autograd.
  virtual bool has_product() const { return false; }
  virtual at::Tensor product(const at::Tensor& x, const at::Tensor& bias) const;
  virtual at::Tensor product_grad_input(const at::Tensor& g) const;
};

}  // namespace lf::model
