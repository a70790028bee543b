// neat_packing's varlen attention on the GPU (issue 15; varlen_attention.h): the packed rows'
// sequences attended as one variable-length batch equal each sequence attended alone.
// kernels_test only (the flash kernel has no CPU build); the offsets are tested on the CPU in
// tests/model/varlen_segments_test.cpp and the mask path in tests/train/neat_packing_test.cpp.
//
// Tolerances: relative L2 error against an fp32 reference of the sequences unpacked, 1e-2 in
// bf16 (the kernels' bound, kernels_test.cpp), and the varlen result no worse than 1.5x SDPA's
// under the block-diagonal mask on the same bf16 inputs (+1e-3): the same math, other tiling.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/autograd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "lf/kernels/fused_ops.h"
#include "lf/model/causal_lm.h"
#include "lf/model/fused_dispatch.h"
#include "lf/model/packed_attention.h"
#include "lf/model/sdpa.h"
#include "lf/model/varlen_attention.h"
#include "../support/rel_l2_err.h"

namespace lf::model {
namespace {

const c10::Device kGpu(c10::DeviceType::CUDA, 0);

using lf::test::rel_l2_err;

// Sequence lengths of each row (the rest of a row is padding).
using Rows = std::vector<std::vector<int64_t>>;

// [B,T] segment ids (1.. per sequence, 0 padding) and position ids restarting per sequence.
std::pair<at::Tensor, at::Tensor> packing(const Rows& rows, int64_t t) {
  auto seg = at::zeros({static_cast<int64_t>(rows.size()), t}, at::kLong), pos = seg.clone();
  for (size_t r = 0; r < rows.size(); ++r) {
    int64_t at_ = 0, id = 1;
    for (int64_t len : rows[r]) {
      seg[r].narrow(0, at_, len).fill_(id++);
      pos[r].narrow(0, at_, len).copy_(at::arange(len, at::kLong));
      at_ += len;
    }
  }
  return {seg, pos};
}

class VarlenAttention : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!at::hasCUDA()) GTEST_SKIP() << "no CUDA device";
    at::manual_seed(0);
  }
};

struct Grads {
  at::Tensor o, dq, dk, dv;
};

// q [B,H,T,D] etc. as the layers give them: transposed views of [B*T, heads*D] projections.
Grads run(const at::Tensor& q0, const at::Tensor& k0, const at::Tensor& v0, const at::Tensor& dout,
          const std::function<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&)>& attend) {
  auto q = q0.clone().requires_grad_(true), k = k0.clone().requires_grad_(true), v = v0.clone().requires_grad_(true);
  auto o = attend(q, k, v);
  torch::autograd::backward({o}, {dout});
  return {o.detach(), q.grad(), k.grad(), v.grad()};
}

TEST_F(VarlenAttention, EqualsEachSequenceAloneForwardAndBackward) {
  struct Heads {
    int64_t h, k, d;
  };
  const int64_t t = 2048;
  const Rows rows{{300, 1000, 700}, {2048}, {37, 1500}};  // padding 48 / none / 511
  const auto [seg, pos] = packing(rows, t);
  const int64_t b = static_cast<int64_t>(rows.size());
  const auto not_pad = (seg != 0).to(kGpu).view({b, 1, t, 1});
  for (const Heads hs : {Heads{14, 2, 64}, Heads{28, 4, 128}, Heads{12, 12, 128}}) {
    SCOPED_TRACE("heads " + std::to_string(hs.h) + "/" + std::to_string(hs.k) + " d " + std::to_string(hs.d));
    ASSERT_TRUE(varlen_attention_supported(kGpu, at::kBFloat16, hs.d)) << "the flash varlen kernel does not run here";
    const auto o32 = at::TensorOptions().device(kGpu).dtype(at::kFloat);
    const auto proj = [&](int64_t heads) {
      return at::randn({b * t, heads * hs.d}, o32).view({b, t, heads, hs.d}).transpose(1, 2);
    };
    const auto q = proj(hs.h), k = proj(hs.k), v = proj(hs.k);
    const auto dout = at::randn({b, hs.h, t, hs.d}, o32) * not_pad;  // no gradient from padding
    // Reference: each sequence alone, fp32, SDPA causal (k/v heads repeated inside).
    const auto ref = run(q, k, v, dout, [&](const at::Tensor& q_, const at::Tensor& k_, const at::Tensor& v_) {
      std::vector<at::Tensor> out_rows;
      for (int64_t r = 0; r < b; ++r) {
        std::vector<at::Tensor> parts;
        int64_t from = 0;
        for (int64_t len : rows[static_cast<size_t>(r)]) {
          const auto cut = [&](const at::Tensor& x) { return x.narrow(0, r, 1).narrow(2, from, len); };
          parts.push_back(causal_attention(cut(q_), cut(k_), cut(v_)));
          from += len;
        }
        if (from < t) parts.push_back(at::zeros({1, hs.h, t - from, hs.d}, q_.options()));
        out_rows.push_back(at::cat(parts, 2));
      }
      return at::cat(out_rows, 0);
    });
    const auto bf = [](const at::Tensor& x) { return x.to(at::kBFloat16); };
    const auto segments = varlen_segments(seg, kGpu);
    const auto varlen = run(bf(q), bf(k), bf(v), bf(dout),
                            [&](const at::Tensor& q_, const at::Tensor& k_, const at::Tensor& v_) {
                              return varlen_causal_attention(q_, k_, v_, segments) * not_pad;
                            });
    const auto mask = packed_causal_mask(seg.to(kGpu));
    const auto masked = run(bf(q), bf(k), bf(v), bf(dout),
                            [&](const at::Tensor& q_, const at::Tensor& k_, const at::Tensor& v_) {
                              return masked_attention(q_, k_, v_, mask) * not_pad;
                            });
    const std::vector<std::pair<const char*, std::array<at::Tensor, 3>>> parts{
        {"output", {varlen.o, masked.o, ref.o}}, {"dq", {varlen.dq, masked.dq, ref.dq}},
        {"dk", {varlen.dk, masked.dk, ref.dk}}, {"dv", {varlen.dv, masked.dv, ref.dv}}};
    for (const auto& [name, p] : parts) {
      const double e_var = rel_l2_err(p[0], p[2]), e_mask = rel_l2_err(p[1], p[2]);
      std::printf("note: varlen %s: rel err %.2e (mask %.2e)\n", name, e_var, e_mask);
      EXPECT_LT(e_var, 1e-2) << name;
      EXPECT_LE(e_var, 1.5 * e_mask + 1e-3) << name;
    }
  }
}

// Gemma 3's sliding-window layers on the GPU: flash's own window (keys i - window < j <= i) with a query
// scale that is not 1/sqrt(D), over plain rows and over packed sequences (neat_packing, where the window
// mask alone would attend across them), against SDPA under the window mask in fp32 (and in bf16).
TEST_F(VarlenAttention, SlidingWindowEqualsTheWindowMask) {
  const int64_t t = 2048, window = 512, h = 4, kv = 1, d = 256;
  const double scale = 1.0 / 12.0;
  ASSERT_TRUE(varlen_attention_supported(kGpu, at::kBFloat16, d)) << "the flash varlen kernel does not run here";
  for (const Rows rows : {Rows{{t}, {t}}, Rows{{300, 1000, 748}, {2048}}}) {
    const bool packed = rows[0].size() > 1;
    SCOPED_TRACE(packed ? "packed sequences" : "plain rows");
    const int64_t b = static_cast<int64_t>(rows.size());
    const auto [seg, pos] = packing(rows, t);
    const auto o32 = at::TensorOptions().device(kGpu).dtype(at::kFloat);
    const auto proj = [&](int64_t heads) {
      return at::randn({b * t, heads * d}, o32).view({b, t, heads, d}).transpose(1, 2);
    };
    const auto q = proj(h), k = proj(kv), v = proj(kv);
    const auto dout = at::randn({b, h, t, d}, o32);
    const auto i = at::arange(t, o32.dtype(at::kLong));
    const auto gap = i.unsqueeze(1) - i.unsqueeze(0);
    auto mask = at::logical_and(gap >= 0, gap < window).view({1, 1, t, t});
    mask = at::logical_and(mask, packed_causal_mask(seg.to(kGpu)));
    const auto masked = [&](const at::Tensor& q_, const at::Tensor& k_, const at::Tensor& v_) {
      return masked_attention(q_, k_, v_, mask, scale);
    };
    const auto ref = run(q, k, v, dout, masked);
    const auto bf = [](const at::Tensor& x) { return x.to(at::kBFloat16); };
    const auto segments = packed ? varlen_segments(seg, kGpu) : rows_as_segments(b, t, kGpu);
    const auto flash = run(bf(q), bf(k), bf(v), bf(dout), [&](const at::Tensor& q_, const at::Tensor& k_, const at::Tensor& v_) {
      return varlen_causal_attention(q_, k_, v_, segments, scale, window);
    });
    const auto bf_mask = run(bf(q), bf(k), bf(v), bf(dout), masked);
    const std::vector<std::pair<const char*, std::array<at::Tensor, 3>>> parts{
        {"output", {flash.o, bf_mask.o, ref.o}}, {"dq", {flash.dq, bf_mask.dq, ref.dq}},
        {"dk", {flash.dk, bf_mask.dk, ref.dk}}, {"dv", {flash.dv, bf_mask.dv, ref.dv}}};
    for (const auto& [name, p] : parts) {
      const double e_flash = rel_l2_err(p[0], p[2]), e_mask = rel_l2_err(p[1], p[2]);
      std::printf("note: window %s: rel err %.2e (mask %.2e)\n", name, e_flash, e_mask);
      EXPECT_LT(e_flash, 1e-2) << name;
      EXPECT_LE(e_flash, 1.5 * e_mask + 1e-3) << name;
    }
  }
}

// The model's path: CausalLM::rope picks the varlen kernel for segment ids on the host, the
// fused and the ATen layers feed it, activation checkpointing recomputes through it. A neat
// packed row's hidden states and every parameter's gradient equal those of its sequences run
// one by one (bf16 compute over fp32 weights, as training runs).
struct ModelRun {
  at::Tensor hidden;  // [tokens, C] of the sequences' positions, in order
  std::vector<at::Tensor> grads;
};

ModelRun run_model(CausalLM& m, const at::Tensor& ids, const Rows& rows, bool packed, const at::Tensor& probe) {
  for (auto& p : m.named_parameters()) p.tensor->mutable_grad() = at::Tensor();
  std::vector<at::Tensor> hidden;
  const auto loss_of = [&](const at::Tensor& h) {  // h [n, C]: a fixed projection, so every weight gets a gradient
    hidden.push_back(h.detach().to(at::kFloat));
    return (h.to(at::kFloat) * probe.narrow(0, 0, h.size(0))).sum();
  };
  const int64_t t = ids.size(1);
  const auto [seg, pos] = packing(rows, t);
  if (packed) {
    EXPECT_TRUE(m.rope(t, pos, seg).varlen.defined()) << "the model did not take the varlen kernel";
    const auto h = m.hidden_states(ids.to(kGpu), pos.to(kGpu), nullptr, seg);  // segment ids on the host
    std::vector<at::Tensor> kept;
    for (size_t r = 0; r < rows.size(); ++r) {
      int64_t used = 0;
      for (int64_t len : rows[r]) used += len;
      kept.push_back(h[static_cast<int64_t>(r)].narrow(0, 0, used));
    }
    torch::autograd::backward({loss_of(at::cat(kept, 0))});
  } else {
    at::Tensor total;
    int64_t offset = 0;
    for (size_t r = 0; r < rows.size(); ++r) {
      int64_t from = 0;
      for (int64_t len : rows[r]) {
        const auto h = m.hidden_states(ids[static_cast<int64_t>(r)].narrow(0, from, len).unsqueeze(0).to(kGpu));
        hidden.push_back(h[0].detach().to(at::kFloat));
        const auto l = (h[0].to(at::kFloat) * probe.narrow(0, offset, len)).sum();
        total = total.defined() ? total + l : l;
        from += len;
        offset += len;
      }
    }
    torch::autograd::backward({total});
  }
  ModelRun out{at::cat(hidden, 0), {}};
  // The final norm and lm_head get none: hidden_states stops before them.
  for (auto& p : m.named_parameters())
    if (p.tensor->grad().defined()) out.grads.push_back(p.tensor->grad().clone());
  return out;
}

TEST_F(VarlenAttention, NeatPackedModelEqualsTheSequencesUnpacked) {
  auto c = load_model_config(std::filesystem::path(LF_SOURCE_DIR) / "configs/models/qwen2.5-0.5b.json");
  c.num_layers = 2;
  c.vocab_size = 4096;
  CausalLM m(c, at::TensorOptions().device(kGpu).dtype(at::kFloat));
  m.init_random(3);
  m.set_compute_dtype(at::kBFloat16);
  m.set_training(true);
  for (auto& p : m.named_parameters()) p.tensor->requires_grad_(true);
  const Rows rows{{400, 900, 600}, {1024, 1000}};  // padding 148 / 24
  const int64_t t = 2048;
  const auto ids = at::randint(c.vocab_size, {2, t}, at::kLong);
  const auto probe = at::randn({4096, c.hidden_size}, at::TensorOptions().device(kGpu)) * 1e-2;
  const auto* installed = fused_ops_for(at::zeros({1}, at::TensorOptions().device(kGpu).dtype(at::kBFloat16)));
  for (bool fused : {true, false})
    for (bool checkpointing : {false, true}) {
      SCOPED_TRACE(std::string(fused ? "fused kernels" : "ATen layers") + (checkpointing ? ", checkpointing" : ""));
      set_fused_ops(fused ? &kernels::fused_ops() : nullptr);
      m.set_gradient_checkpointing(checkpointing);
      const auto unpacked = run_model(m, ids, rows, false, probe), packed = run_model(m, ids, rows, true, probe);
      const auto hidden_err = rel_l2_err(packed.hidden, unpacked.hidden);
      std::printf("note: neat packed vs unpacked: hidden states rel err %.2e\n", hidden_err);
      EXPECT_LT(hidden_err, 1e-2);
      ASSERT_EQ(packed.grads.size(), unpacked.grads.size());
      ASSERT_GE(packed.grads.size(), 2u * 12u) << "every layer's weights should have a gradient";
      double worst = 0;
      for (size_t i = 0; i < packed.grads.size(); ++i) worst = std::max(worst, rel_l2_err(packed.grads[i], unpacked.grads[i]));
      std::printf("note: neat packed vs unpacked: worst parameter gradient rel err %.2e\n", worst);
      EXPECT_LT(worst, 2e-2);
    }
  set_fused_ops(installed);
}

}  // namespace
}  // namespace lf::model
