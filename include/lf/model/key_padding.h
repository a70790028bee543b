#pragma once
// Right-padded rows under HF's attention_mask, for the forwards whose padding positions are read (TRL's
// logits/* metrics average the logits over every position of the padded rows): while a KeyPaddingScope
// lives on this thread, each decoder layer's causal attention also masks the padding keys, so a pad
// position attends to its row's real tokens only, as transformers' sdpa mask has it. Real positions do
// not change (their keys precede the padding), nor does any loss (pads carry no target). A checkpointed
// layer's recompute reopens its forward's scope (checkpointing.cpp): on a GPU the backward runs on the autograd
// engine's own thread, outside the step's scope, and pure_bf16's HF rounding (below) needs the mask in the
// recompute's backward too. Without a scope
// (every other forward) attention is causal over the row. The mask costs the fused kernel's speed
// (SDPA with a [B,1,T,T] mask instead of flash attention): the scope is only opened on padded batches.
#include <ATen/core/Tensor.h>

namespace lf::model {

class KeyPaddingScope {
 public:
  // lengths [B] integer, each row's real tokens (its first `length` positions), on the compute device.
  explicit KeyPaddingScope(const at::Tensor& lengths);
  ~KeyPaddingScope();
  KeyPaddingScope(const KeyPaddingScope&) = delete;
  KeyPaddingScope& operator=(const KeyPaddingScope&) = delete;

 private:
  at::Tensor previous_;
};

// The lengths of this thread's innermost open scope, or undefined (a checkpoint keeps them for its recompute).
at::Tensor key_padding_lengths();

// The causal mask [B,1,T,T] (true: attend) with the open scope's padding keys masked, or undefined
// without a scope (or when its batch is not `t` long).
at::Tensor key_padding_mask(int64_t t);

// Whether padded preference rows on `device` open a scope (LF_PAD_MASKED_LOGITS, the plan's kernel paths):
// auto opens it off a GPU only, where the mask costs nothing the tests would see and keeps LLaMA-Factory's
// logits/* exact; on a GPU it would take flash attention away for a metric of the pad positions. pure_bf16's
// sft/pt steps ask it too (train/trainer_state.h hf_bf16_rounding): there the mask (kv heads repeated, as HF's
// repeat_kv) rounds each kv head's bf16 gradient as HF does.
bool pad_masked_logits(const c10::Device& device);

}  // namespace lf::model
