#include "lf/model/moe_experts.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>

#include <tuple>

#include "lf/common/error.h"
#include "lf/kernels/fused_ops.h"
#include "lf/model/fused_dispatch.h"
#include "lf/model/kernel_paths.h"

namespace lf::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// a [S, K] times, per expert e, b[e] [K, N] over e's rows: [S, N].
at::Tensor grouped_mm(const at::Tensor& a, const at::Tensor& b, const ExpertRouting& r) {
  if (r.host_ends.empty()) return at::_grouped_mm(a, b, r.ends);
  auto out = at::empty({a.size(0), b.size(2)}, a.options());
  int64_t start = 0;
  for (size_t e = 0; e < r.host_ends.size(); ++e) {
    const int64_t end = r.host_ends[e];
    if (end > start) {
      auto rows = out.narrow(0, start, end - start);
      at::mm_out(rows, a.narrow(0, start, end - start), b[static_cast<int64_t>(e)]);
    }
    start = end;
  }
  return out;
}

// Per expert e, a[rows of e]^T · g[rows of e]: [E, K, N] for a [S, K], g [S, N] (a weight's gradient;
// zero for an expert no token chose).
at::Tensor grouped_weight_grad(const at::Tensor& a, const at::Tensor& g, const ExpertRouting& r, int64_t experts) {
  if (r.host_ends.empty()) {
    // An expert no token chose is an empty group: its block is not written by every kernel; zero it
    // (found on the device, no sync).
    auto out = at::_grouped_mm(a.t(), g, r.ends);
    const auto starts = at::cat({at::zeros({1}, r.ends.options()), r.ends.narrow(0, 0, experts - 1)});
    return out.masked_fill_((r.ends == starts).view({experts, 1, 1}), 0);
  }
  auto out = at::zeros({experts, a.size(1), g.size(1)}, a.options());
  int64_t start = 0;
  for (int64_t e = 0; e < experts; ++e) {
    const int64_t end = r.host_ends[static_cast<size_t>(e)];
    if (end > start) {
      auto slice = out[e];
      at::mm_out(slice, a.narrow(0, start, end - start).t(), g.narrow(0, start, end - start));
    }
    start = end;
  }
  return out;
}

// silu(gate) · up of h [S, 2I] = [gate | up], rounded where autograd's ATen ops round; the fused
// kernel (lf/kernels/moe.h) where the fused ops take these activations.
at::Tensor swiglu_halves(const at::Tensor& h, const kernels::FusedOps* fused) {
  if (fused) return fused->moe_swiglu_halves(h);
  const int64_t i = h.size(1) / 2;
  return at::silu(h.narrow(1, 0, i)) * h.narrow(1, i, i);
}

// d[gate | up] from d(silu(gate) · up).
at::Tensor swiglu_halves_backward(const at::Tensor& h, const at::Tensor& da, const kernels::FusedOps* fused) {
  if (fused) return fused->moe_swiglu_halves_backward(h, da);
  const int64_t i = h.size(1) / 2;
  const auto gate = h.narrow(1, 0, i), up = h.narrow(1, i, i);
  auto dh = at::empty_like(h);
  auto dgate = dh.narrow(1, 0, i), dup = dh.narrow(1, i, i);
  at::silu_backward_out(dgate, da * up, gate);
  at::mul_out(dup, da, at::silu(gate));
  return dh;
}

struct RoutedExperts : public torch::autograd::Function<RoutedExperts> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& gate_up, const at::Tensor& down,
                            const at::Tensor& weights, const ExpertRouting* r) {
    const int64_t n = x.size(0), c = x.size(1), k = r->top_k;
    const auto* fused = fused_ops_for(x);
    // Named spans for LF_PROFILE_TRACE (scripts/bench/moe_trace_split.py splits the GPU time by them).
    at::Tensor xs, h, y, out;
    {
      RECORD_USER_SCOPE("lf::moe_permute");
      xs = x.index_select(0, r->token);  // [S, C]
    }
    {
      RECORD_USER_SCOPE("lf::moe_expert_gemm");
      h = grouped_mm(xs, gate_up.transpose(1, 2), *r);  // [S, 2I]
    }
    at::Tensor a;
    {
      RECORD_USER_SCOPE("lf::moe_expert_act");
      a = swiglu_halves(h, fused);
    }
    {
      RECORD_USER_SCOPE("lf::moe_expert_gemm");
      y = grouped_mm(a, down.transpose(1, 2), *r);  // [S, C]
    }
    {
      // Un-permute and weight: out[n] = Σ_j w[n, j] · y[slot of (n, j)].
      RECORD_USER_SCOPE("lf::moe_unpermute");
      out = fused ? fused->moe_combine(y, r->slot_of, weights, k)
                  : (y.index_select(0, r->slot_of).view({n, k, c}) * weights.to(y.scalar_type()).unsqueeze(2)).sum(1);
    }
    ctx->save_for_backward({x, gate_up, down, weights, h, y, r->order, r->token, r->slot_of, r->ends});
    ctx->saved_data["host_ends"] = r->host_ends;
    ctx->saved_data["k"] = k;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    const auto s = ctx->get_saved_variables();
    const auto &x = s[0], &gate_up = s[1], &down = s[2], &weights = s[3], &h = s[4], &y = s[5];
    ExpertRouting r{s[6], s[7], s[8], s[9], ctx->saved_data["host_ends"].toIntVector(), ctx->saved_data["k"].toInt()};
    const int64_t n = x.size(0), c = x.size(1), k = r.top_k, experts = gate_up.size(0);
    const auto g = grad_out[0].contiguous();  // [N, C]
    const auto* fused = fused_ops_for(x);
    at::Tensor dx, dgate_up, ddown, dweights, dy;
    if (fused) {
      RECORD_USER_SCOPE("lf::moe_unpermute");
      std::tie(dy, dweights) = fused->moe_combine_backward(g, y, r.slot_of, weights, ctx->needs_input_grad(3));
    } else {
      RECORD_USER_SCOPE("lf::moe_unpermute");
      if (ctx->needs_input_grad(3))  // dw[n, j] = <g[n], y[slot of (n, j)]>
        dweights = (y.index_select(0, r.slot_of).view({n, k, c}).to(at::kFloat) * g.to(at::kFloat).unsqueeze(1))
                       .sum(2)
                       .to(weights.scalar_type());
      // dy[slot] = w of its choice · g[its token]
      const auto w_sorted = weights.reshape({-1}).index_select(0, r.order).to(g.scalar_type());
      dy = g.index_select(0, r.token) * w_sorted.unsqueeze(1);  // [S, C]
    }
    at::Tensor da, dh;
    {
      RECORD_USER_SCOPE("lf::moe_expert_gemm");
      da = grouped_mm(dy, down, r);  // [S, I]
      if (ctx->needs_input_grad(2)) ddown = grouped_weight_grad(dy, swiglu_halves(h, fused), r, experts);  // [E, C, I]
    }
    {
      RECORD_USER_SCOPE("lf::moe_expert_act");
      dh = swiglu_halves_backward(h, da, fused);  // [S, 2I]
    }
    {
      RECORD_USER_SCOPE("lf::moe_expert_gemm");
      if (ctx->needs_input_grad(1))
        dgate_up = grouped_weight_grad(dh, x.index_select(0, r.token), r, experts);  // [E, 2I, C]
    }
    if (ctx->needs_input_grad(0)) {
      at::Tensor dxs;
      {
        RECORD_USER_SCOPE("lf::moe_expert_gemm");
        dxs = grouped_mm(dh, gate_up, r);  // [S, C]
      }
      RECORD_USER_SCOPE("lf::moe_permute");
      dx = fused ? fused->moe_combine(dxs, r.slot_of, at::Tensor(), k) : dxs.index_select(0, r.slot_of).view({n, k, c}).sum(1);
    }
    return {dx, dgate_up, ddown, dweights, at::Tensor()};
  }
};

}  // namespace

bool grouped_experts_for(const at::Tensor& x) {
  return x.is_cuda() && x.scalar_type() == at::kBFloat16 && kernel_paths().grouped_mm;
}

ExpertRouting route_tokens(const at::Tensor& chosen, int64_t experts, bool grouped) {
  LF_CHECK(chosen.dim() == 2, BackendError, "route_tokens: chosen must be [N, k], got {} dims", chosen.dim());
  ExpertRouting r;
  r.top_k = chosen.size(1);
  const auto flat = chosen.reshape({-1});  // [S]
  auto [sorted, order] = at::sort(flat, /*stable=*/true, /*dim=*/0, /*descending=*/false);
  r.order = order;
  r.token = at::div(order, r.top_k, "floor");
  r.slot_of = at::empty_like(order).scatter_(0, order, at::arange(order.numel(), order.options()));
  // ends[e]: how many sorted choices are <= e (a search, no host sync).
  r.ends = at::searchsorted(sorted, at::arange(experts, sorted.options()), /*out_int32=*/true, /*right=*/true);
  if (!grouped) {
    const auto host = r.ends.to(at::kCPU).to(at::kLong);
    r.host_ends.assign(host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + experts);
  }
  return r;
}

at::Tensor routed_experts(const at::Tensor& x, const at::Tensor& gate_up, const at::Tensor& down,
                          const at::Tensor& weights, const ExpertRouting& routing) {
  LF_CHECK(x.dim() == 2 && gate_up.dim() == 3 && down.dim() == 3 && weights.dim() == 2, BackendError,
           "routed_experts: expected x [N, C], gate_up [E, 2I, C], down [E, C, I], weights [N, k]");
  return RoutedExperts::apply(x, gate_up, down, weights, &routing);
}

}  // namespace lf::model
