#pragma once
// Activation checkpointing of one decoder layer: the forward keeps only the layer's
// input; backward recomputes the layer under autograd and back-propagates through it
// (reentrant, as torch.utils.checkpoint(use_reentrant=True)). Parameter gradients
// accumulate into .grad during that inner backward, so DDP/ZeRO grad hooks still fire.
// The default generator's state is saved and restored around the recompute, so LoRA
// dropout masks are the same in both passes.
//
// Lean recompute (LF_LEAN_RECOMPUTE, the default): the forward also keeps the layer's residual
// midpoint h (one [B,T,C] activation more a layer), and the recompute leaves out o_proj's and
// down_proj's GEMMs, whose outputs backward never reads (backward_only_linear.h): 2 of 7 GEMMs,
// a third of the recompute's FLOPs on Qwen2.5 7B.
#include <ATen/core/Tensor.h>

#include "lf/model/layers.h"

namespace lf::model {

// x [B,T,C] -> [B,T,C], same values as layer.forward(x, rope, training). When x does
// not require grad (a frozen embedding under LoRA), a detached copy that does is used,
// so the layer's own trainable weights still get gradients.
at::Tensor checkpointed_layer_forward(const DecoderLayer& layer, const at::Tensor& x, const RopeTables& rope,
                                      bool training);

}  // namespace lf::model
