#pragma once
// One FP8 cast of an input shared by several linear layers (q/k/v read the same normed hidden state, gate
// and up the same; full fine-tuning's dW casts that input again along its tokens for each of them):
// the first layer's cast is kept and the next ones reuse it, where torchao's Float8Linear casts once per
// layer (torch.compile may merge them; eager cannot). A cast is a pure function of the bytes, so a reused
// one is the same bits.
// A hit needs the same storage, offset, sizes, strides, dtype and version (an in-place write bumps it),
// the same scaling and the same kind (along rows or columns). An entry holds a detached alias of its
// source, so the storage cannot be freed and its address handed to another tensor while the entry lives;
// the last few entries are kept (kFp8CastReuseSlots), per thread (the forward's thread and autograd's).
// Under CUDA graph capture a hit is only ever a cast of the same capture: eager tensors and the graph's
// pool never share a storage. Internal to lf_quant.
#include <ATen/core/Tensor.h>

#include <functional>
#include <optional>

#include "lf/quant/fp8.h"

namespace lf::quant {

inline constexpr int kFp8CastReuseSlots = 4;

// `cast(x)` (x cast along `s`, by rows or, with `columns`, along its first axis), or the one kept from
// an earlier call with the same x, scaling and kind.
Fp8Tensor fp8_reused_cast(const at::Tensor& x, const Fp8Scaling& s, bool columns,
                          const std::function<Fp8Tensor(const at::Tensor&)>& cast);

// Keeps `cast` as x's cast along `s` (by rows, or with `columns` along its first axis), made elsewhere from
// x's bytes (the fused SwiGLU writes act and its cast in one pass): the next fp8_reused_cast of the same x,
// scaling and kind returns it. The caller vouches that `cast` is the one `cast(x)` would have made. Nothing
// kept for a tensor fp8_reused_cast would not keep (an inference tensor, no storage).
// factors (defined: the cast is of x's columns times factors derived from this tensor, the fused SwiGLU backward's
// casts of dgate and dup for an FP8-stored weight's input gradient, factors its scales): part of the key, by view
// and version, and only fp8_take_seeded_cast reads such an entry.
void fp8_seed_cast(const at::Tensor& x, const Fp8Scaling& s, bool columns, const Fp8Tensor& cast,
                   const at::Tensor& factors = at::Tensor());

// The cast seeded for x along its rows under s with these factors (fp8_seed_cast), removed from the slots (a
// gradient's cast is read once: kept, it would hold the gradient's storage); nullopt where none was seeded.
std::optional<Fp8Tensor> fp8_take_seeded_cast(const at::Tensor& x, const Fp8Scaling& s, const at::Tensor& factors);

}  // namespace lf::quant
