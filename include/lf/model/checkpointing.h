#pragma once
// Activation checkpointing of one decoder layer: the forward keeps only the layer's
// input; backward recomputes the layer under autograd and back-propagates through it
// (reentrant, as torch.utils.checkpoint(use_reentrant=True)). Parameter gradients
// accumulate into .grad during that inner backward, so DDP/ZeRO grad hooks still fire.
// The default generator's state is saved and restored around the recompute, so LoRA
// dropout masks are the same in both passes.
#include <ATen/core/Tensor.h>

#include "lf/model/layers.h"

namespace lf::model {

// x [B,T,C] -> [B,T,C], same values as layer.forward(x, rope, training). When x does
// not require grad (a frozen embedding under LoRA), a detached copy that does is used,
// so the layer's own trainable weights still get gradients.
at::Tensor checkpointed_layer_forward(const DecoderLayer& layer, const at::Tensor& x, const RopeTables& rope,
                                      bool training);

}  // namespace lf::model
