#include "lf/model/key_padding.h"

#include <ATen/ATen.h>

#include "lf/model/kernel_paths.h"

namespace lf::model {
namespace {
thread_local at::Tensor g_lengths;  // [B] of the innermost open scope, or undefined
}  // namespace

KeyPaddingScope::KeyPaddingScope(const at::Tensor& lengths) : previous_(g_lengths) { g_lengths = lengths; }

KeyPaddingScope::~KeyPaddingScope() { g_lengths = previous_; }

at::Tensor key_padding_lengths() { return g_lengths; }

at::Tensor key_padding_mask(int64_t t) {
  if (!g_lengths.defined()) return {};
  const auto opts = g_lengths.options().dtype(at::kLong);
  const auto i = at::arange(t, opts);
  const auto causal = i.unsqueeze(1) >= i.unsqueeze(0);                       // [T,T]: key <= query
  const auto real_key = i.unsqueeze(0) < g_lengths.to(at::kLong).unsqueeze(1);  // [B,T]
  return causal.unsqueeze(0).logical_and(real_key.unsqueeze(1)).unsqueeze(1);  // [B,1,T,T]
}

bool pad_masked_logits(const c10::Device& device) {
  const std::string& mode = kernel_paths().pad_masked_logits;
  return mode == "auto" ? !device.is_cuda() : mode == "1";
}

}  // namespace lf::model
