// The fused-kernel dispatch (lf/model/fused_dispatch.h) on CPU: CPU tensors always take the
// layers' ATen code, bit for bit; the plan's kernel paths switch the table.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "lf/common/error.h"
#include "lf/kernels/fused_ops.h"
#include "lf/model/fused_dispatch.h"
#include "lf/model/kernel_paths.h"
#include "lf/model/layers.h"
#include "lf/model/sdpa.h"

namespace lf::model {
namespace {

TEST(FusedDispatch, CpuTensorsTakeTheAtenPath) {
  EXPECT_EQ(fused_ops_for(at::ones({2, 8})), nullptr);
  EXPECT_EQ(fused_ops_for(at::ones({2, 8}, at::kBFloat16)), nullptr);
}

// The plan's kernel paths (LF_FUSED_KERNELS, validated when the plan is built: config_test)
// point the table: off, every layer runs its ATen code.
TEST(FusedDispatch, KernelPathsOffLeaveNoTable) {
  config::KernelPaths off;
  off.fused_kernels = false;
  {
    const ScopedKernelPaths scope(off);
    EXPECT_FALSE(kernel_paths().fused_kernels);
    EXPECT_EQ(fused_ops_for(at::ones({2, 8}, at::kBFloat16)), nullptr);
    EXPECT_EQ(built_fused_ops() == nullptr ? "ATen ops (this build has no fused kernels)"
                                           : "fused CUDA kernels off (LF_FUSED_KERNELS=0)",
              fused_kernels_status());
  }
  EXPECT_TRUE(kernel_paths().fused_kernels);
}

// A table that takes nothing: the layers must run exactly their ATen code (same bits as with
// no table at all), so the dispatch consults accepts() before every fused call.
bool never(const at::Tensor&) { return false; }
[[noreturn]] at::Tensor no_norm(const at::Tensor&, const at::Tensor&, double) { throw std::logic_error("called"); }

TEST(FusedDispatch, ATableThatDeclinesLeavesTheLayerBitIdentical) {
  at::manual_seed(0);
  const int64_t c = 32, h = 4, kv = 2, d = 8, inter = 48;
  DecoderLayer l;
  l.input_layernorm_ = {1 + 0.1 * at::randn({c}), 1e-6};
  l.post_attention_layernorm_ = {1 + 0.1 * at::randn({c}), 1e-6};
  auto lin = [](int64_t in, int64_t out) {
    Linear l;
    l.weight_ = at::randn({out, in}) * 0.1;
    l.bias_ = at::randn({out}) * 0.1;
    return l;
  };
  l.self_attn_.q_proj_ = lin(c, h * d);
  l.self_attn_.k_proj_ = lin(c, kv * d);
  l.self_attn_.v_proj_ = lin(c, kv * d);
  l.self_attn_.o_proj_ = lin(h * d, c);
  l.self_attn_.num_heads_ = h;
  l.self_attn_.num_kv_heads_ = kv;
  l.self_attn_.head_dim_ = d;
  auto mlp = std::make_unique<Mlp>();
  mlp->gate_proj_ = lin(c, inter);
  mlp->up_proj_ = lin(c, inter);
  mlp->down_proj_ = lin(inter, c);
  l.mlp_ = std::move(mlp);
  const auto x = at::randn({2, 5, c}).to(at::kBFloat16);
  auto freqs = at::arange(5, at::kFloat).unsqueeze(-1) * at::rand({d / 2});
  auto emb = at::cat({freqs, freqs}, -1);
  RopeTables rope;
  rope.cos = emb.cos().to(at::kBFloat16);
  rope.sin = emb.sin().to(at::kBFloat16);
  const auto ref = l.forward(x, rope, false);
  kernels::FusedOps declining{};  // no op but these two: it declines every input
  declining.accepts = &never;
  declining.rms_norm = &no_norm;
  set_fused_ops(&declining);
  const auto out = l.forward(x, rope, false);
  set_fused_ops(nullptr);
  EXPECT_TRUE(at::equal(out, ref));
}

}  // namespace
}  // namespace lf::model

// LF_SDPA_BACKEND (KernelPaths::sdpa_backend) reaches SDPA's choice through set_kernel_paths: on the CPU, torch
// picks its flash kernel for these inputs; restricted to math, math; auto again, flash again.
TEST(FusedDispatch, SdpaBackendRestrictsTheKernelSdpaPicks) {
  const auto q = at::randn({1, 4, 16, 32}), k = at::randn({1, 4, 16, 32});
  ASSERT_EQ(lf::model::sdpa_backend_name(q, k, k), "flash_attention");
  lf::config::KernelPaths math;
  math.sdpa_backend = "math";
  {
    const lf::model::ScopedKernelPaths scope(math);
    EXPECT_EQ(lf::model::sdpa_backend_name(q, k, k), "math");
    // Still attention: the same numbers within float rounding.
    const auto out = lf::model::causal_attention(q, k, k);
    EXPECT_EQ(out.sizes(), q.sizes());
  }
  EXPECT_EQ(lf::model::sdpa_backend_name(q, k, k), "flash_attention");
}
