// The all-to-all dispatch of expert parallelism, per sparse layer and forward (shapes for N tokens,
// k choices each, S = N·k slots, E experts over ep ranks, E_l = E/ep on this rank):
//
//   slots sorted by expert (stable)            [S]      the single-device permutation
//   counts per expert                          [E]      -> all_to_all -> [ep, E_l] from each rank
//   xs = x[token of slot]                      [S, C]   -> all_to_all (rows to each expert's rank)
//   xr: every rank's rows for this rank        [R, C]   grouped by source rank, then local expert
//   yr = this rank's experts on xr             [R, C]   routed_experts with k = 1, weight 1 (exact)
//   ys = yr sent back                          [S, C]   <- all_to_all (the reverse splits)
//   out[n] = Σ_j w[n, j] · ys[slot of (n, j)]  [N, C]   the weighted un-permute, as routed_experts's
//
// The exchanges are autograd nodes whose backward is the reverse exchange, so the experts' weight
// gradients land on their owner, summed over every rank's tokens (each rank's loss is already
// divided by the step's global target count: the sum DDP's all-reduce would give). The split sizes
// travel to the host (one sync per layer and direction): the CPU path's per-expert GEMMs need them
// anyway; the GPU figures are the multi-GPU work's.
#include "expert_dispatch.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/custom_function.h>

#include <tuple>
#include <vector>

#include "lf/comm/communicator.h"
#include "lf/common/error.h"
#include "lf/model/moe_experts.h"

namespace lf::parallel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Rows of x [S, C]: send[r] to rank r; returns the recv[r] rows from each rank r, in rank order.
at::Tensor exchange(comm::Communicator& comm, const at::Tensor& x, const std::vector<int64_t>& send,
                    const std::vector<int64_t>& recv) {
  int64_t rows = 0;
  for (const int64_t r : recv) rows += r;
  const auto in = x.contiguous();
  auto out = at::empty({rows, in.size(1)}, in.options());
  comm.all_to_all(out, in, recv, send)->wait();
  return out;
}

// The exchange as an autograd node: backward sends each row's gradient back where the row came from.
struct AllToAllRows : public torch::autograd::Function<AllToAllRows> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, comm::Communicator* comm,
                            const std::vector<int64_t>& send, const std::vector<int64_t>& recv) {
    ctx->saved_data["comm"] = reinterpret_cast<int64_t>(comm);
    ctx->saved_data["send"] = send;
    ctx->saved_data["recv"] = recv;
    return exchange(*comm, x, send, recv);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    auto* comm = reinterpret_cast<comm::Communicator*>(ctx->saved_data["comm"].toInt());
    const auto send = ctx->saved_data["send"].toIntVector(), recv = ctx->saved_data["recv"].toIntVector();
    return {exchange(*comm, grad_out[0], recv, send), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// [ranks, per] int64 counts -> each rank's row total on the host.
std::vector<int64_t> per_rank(const at::Tensor& counts, int64_t ranks) {
  const auto host = counts.view({ranks, -1}).sum(1).to(at::kCPU).contiguous();
  return {host.data_ptr<int64_t>(), host.data_ptr<int64_t>() + ranks};
}

class AllToAllDispatch final : public model::ExpertDispatch {
 public:
  explicit AllToAllDispatch(comm::Communicator& comm) : comm_(comm) {}

  at::Tensor routed(const at::Tensor& x, const at::Tensor& chosen, const at::Tensor& weights,
                    const at::Tensor& gate_up, const at::Tensor& down, int64_t experts) override {
    const int64_t ep = comm_.world_size(), local = gate_up.size(0);
    LF_CHECK(local * ep == experts, BackendError,
             "expert parallelism: this rank holds {} experts of a layer, expected {} / {} ranks", local, experts, ep);
    const int64_t n = x.size(0), c = x.size(1), k = chosen.size(1);
    at::Tensor sorted, order, counts, recv_counts;
    {
      RECORD_USER_SCOPE("lf::moe_permute");
      std::tie(sorted, order) = at::sort(chosen.reshape({-1}), /*stable=*/true, /*dim=*/0, /*descending=*/false);
      counts = at::bincount(sorted, {}, experts).to(at::kLong);  // [E]
      recv_counts = at::empty_like(counts);                        // [ep · E_l]: rank r's counts for mine
      comm_.all_to_all(recv_counts, counts, {}, {})->wait();
    }
    const auto send = per_rank(counts, ep), recv = per_rank(recv_counts, ep);
    at::Tensor xs, slot_of;
    {
      RECORD_USER_SCOPE("lf::moe_permute");
      xs = x.index_select(0, at::div(order, k, "floor"));  // [S, C]
      slot_of = at::empty_like(order).scatter_(0, order, at::arange(order.numel(), order.options()));
    }
    at::Tensor xr;
    {
      RECORD_USER_SCOPE("lf::moe_dispatch");
      xr = AllToAllRows::apply(xs, &comm_, send, recv);  // [R, C]
    }
    // Each received row's local expert: source ranks in order, each its rows grouped by expert.
    const auto local_ids = at::repeat_interleave(at::arange(local, recv_counts.options()).repeat({ep}), recv_counts);
    const auto routing = model::route_tokens(local_ids.view({-1, 1}), local, model::grouped_experts_for(xr));
    const auto ones = at::ones({xr.size(0), 1}, xr.options());
    const auto yr = model::routed_experts(xr, gate_up, down, ones, routing);  // [R, C]
    at::Tensor ys;
    {
      RECORD_USER_SCOPE("lf::moe_dispatch");
      ys = AllToAllRows::apply(yr, &comm_, recv, send);  // [S, C]
    }
    RECORD_USER_SCOPE("lf::moe_unpermute");
    return (ys.index_select(0, slot_of).view({n, k, c}) * weights.to(ys.scalar_type()).unsqueeze(2)).sum(1);
  }

 private:
  comm::Communicator& comm_;
};

}  // namespace

std::unique_ptr<model::ExpertDispatch> make_all_to_all_dispatch(comm::Communicator& comm) {
  return std::make_unique<AllToAllDispatch>(comm);
}

}  // namespace lf::parallel
