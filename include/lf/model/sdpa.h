#pragma once
// scaled_dot_product_attention behind one function: the one place where torch
// version differences in the SDPA API (enable_gqa, backend choice) are absorbed.
#include <ATen/core/Tensor.h>

#include <string>

namespace lf::model {

// q [B,H,T,D], k/v [B,K,T,D] with H % K == 0; causal, no mask, default scale 1/sqrt(D).
// Uses SDPA's native grouped-query support when the fused kernel chosen for these
// inputs accepts it, else repeats k/v (so the flash/efficient kernels still run).
// scale: the scores' (0: 1/sqrt(D)).
at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale = 0);

// Attention under an explicit boolean mask [B or 1, 1, T, T] (true: attend), e.g. the
// block-diagonal causal mask of packed sequences (packed_attention.h); k/v repeated for GQA.
at::Tensor masked_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& mask,
                            double scale = 0);

// Restricts SDPA to one fused kernel (config::KernelPaths::sdpa_backend: cudnn | flash | efficient | math; math
// always stays as the fallback), or allows all of them in torch's order: torch always, auto unless the rows'
// lengths vary from one forward to the next. Then auto leaves cuDNN's attention out: torch caches its cuDNN
// execution plans by exact shape, and each new [B, T] builds one (tens of milliseconds, where a 7B layer's
// attention takes one); flash attention has no per-shape cost. Process-wide (ATen's global context):
// installed by set_kernel_paths, then again by the trainer once it knows its rows (attention_shapes.h).
void use_sdpa_backend(const std::string& name, bool lengths_vary = false);

// Which SDPA kernel runs for these inputs: "flash_attention", "efficient_attention",
// "cudnn_attention", "math", ... and whether GQA went native ("+gqa") or via repeat_kv.
std::string sdpa_backend_name(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

// The same for a model's training attention: q [B,H,T,D], k/v [B,K,T,D] needing gradients, `options`' dtype
// and device.
std::string sdpa_backend_for(int64_t batch, int64_t seq, int64_t heads, int64_t kv_heads, int64_t head_dim,
                             const at::TensorOptions& options);

}  // namespace lf::model
