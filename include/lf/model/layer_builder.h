#pragma once
// A decoder layer's modules from its family's LayerSpec (model_layout.h): the torch half of a
// model spec. Parameters are allocated uninitialised with `options`; their names and shapes are
// the layout's (model_layout.cpp declares the same blocks' tensors; CausalLM checks they agree).
#include <ATen/core/Tensor.h>

#include "lf/model/layers.h"
#include "lf/model/model_layout.h"
#include "lf/model/router_aux_loss.h"

namespace lf::model {

// `aux`: the model's router loss, which a mixture-of-experts MLP reports its routing to.
DecoderLayer build_decoder_layer(const LayerSpec& spec, const at::TensorOptions& options, RouterAuxLoss* aux = nullptr);
RmsNorm build_norm(NormKind kind, int64_t size, double eps, const at::TensorOptions& options);  // [size]

}  // namespace lf::model
