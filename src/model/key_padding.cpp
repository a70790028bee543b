#include "lf/model/key_padding.h"

#include <ATen/ATen.h>

namespace lf::model {
namespace {
thread_local at::Tensor g_lengths;  // [B] of the innermost open scope, or undefined
}  // namespace

KeyPaddingScope::KeyPaddingScope(const at::Tensor& lengths) : previous_(g_lengths) { g_lengths = lengths; }

KeyPaddingScope::~KeyPaddingScope() { g_lengths = previous_; }

at::Tensor key_padding_mask(int64_t t) {
  if (!g_lengths.defined()) return {};
  const auto opts = g_lengths.options().dtype(at::kLong);
  const auto i = at::arange(t, opts);
  const auto causal = i.unsqueeze(1) >= i.unsqueeze(0);                       // [T,T]: key <= query
  const auto real_key = i.unsqueeze(0) < g_lengths.to(at::kLong).unsqueeze(1);  // [B,T]
  return causal.unsqueeze(0).logical_and(real_key.unsqueeze(1)).unsqueeze(1);  // [B,1,T,T]
}

}  // namespace lf::model
