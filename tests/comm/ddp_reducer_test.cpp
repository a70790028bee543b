// DDP over the CPU backend, ranks as threads: the reduced gradients equal one process's
// gradients of the same global batch; buckets overlap backward; non-final micro-steps are silent.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <thread>

#include "lf/comm/communicator.h"
#include "lf/comm/ddp_reducer.h"
#include "test_ranks.h"

using namespace lf::comm;
using lf::comm::testing::run_ranks;

namespace {

constexpr int kLayers = 6, kWidth = 24;

struct Toy {
  std::vector<at::Tensor> params;  // model order: w0, b0, w1, b1, ...
  explicit Toy(uint64_t seed) {
    auto g = at::make_generator<at::CPUGeneratorImpl>(seed);
    for (int l = 0; l < kLayers; ++l) {
      params.push_back(at::randn({kWidth, kWidth}, g, at::kDouble).mul_(0.3).set_requires_grad(true));
      params.push_back(at::randn({kWidth}, g, at::kDouble).mul_(0.1).set_requires_grad(true));
    }
  }
  // Sum over rows of a scalar per example: a "sum of token losses".
  at::Tensor loss_sum(const at::Tensor& x) const {
    at::Tensor h = x;
    for (int l = 0; l < kLayers; ++l) h = at::tanh(at::addmm(params[2 * l + 1], h, params[2 * l]));
    return h.pow(2).sum();
  }
};

at::Tensor batch(int rank, int micro, int rows) {
  auto g = at::make_generator<at::CPUGeneratorImpl>(100 * rank + micro);
  return at::randn({rows, kWidth}, g, at::kDouble);
}

// Different row counts per rank and micro-step: "sequences of different lengths".
int rows_of(int rank, int micro) { return 3 + rank * 2 + micro; }

// fp64 on the wire, about two weights per bucket (so the toy model makes several buckets).
DdpOptions small_fp64_buckets() {
  DdpOptions opt;
  opt.first_bucket_mb = opt.bucket_cap_mb = 2.0 * kWidth * kWidth * 8 / (1 << 20);
  opt.reduce_dtype = at::kDouble;
  return opt;
}

}  // namespace

TEST(Ddp, ReducedGradientsEqualOneProcessWithTheSameGlobalBatch) {
  const int world = 3, accumulation = 2;
  // Reference: one process, every rank's micro-batches, one normaliser for the whole step.
  Toy ref(7);
  int64_t total_rows = 0;
  for (int r = 0; r < world; ++r)
    for (int m = 0; m < accumulation; ++m) total_rows += rows_of(r, m);
  for (int r = 0; r < world; ++r)
    for (int m = 0; m < accumulation; ++m) (ref.loss_sum(batch(r, m, rows_of(r, m))) / total_rows).backward();

  std::vector<std::vector<at::Tensor>> grads(world);
  std::vector<int64_t> buckets(world), collectives_after_micro0(world), collectives_total(world);
  std::vector<bool> overlapped(world);
  run_ranks(world, [&](int rank, Communicator& comm) {
    Toy toy(rank == 0 ? 7 : 1000 + rank);  // rank 0's weights win the broadcast
    DdpReducer ddp(comm, toy.params, small_fp64_buckets());
    ddp.broadcast_parameters(0);
    buckets[rank] = ddp.num_buckets();
    for (int m = 0; m < accumulation; ++m) {
      bool last = m == accumulation - 1;
      ddp.prepare_backward(last);
      (toy.loss_sum(batch(rank, m, rows_of(rank, m))) / total_rows).backward();
      if (!last) collectives_after_micro0[rank] = ddp.collectives_issued();
    }
    ddp.finish_backward();
    collectives_total[rank] = ddp.collectives_issued();
    auto ev = ddp.events();
    auto first_launch = std::find_if(ev.begin(), ev.end(), [](auto& e) { return e.what == "launch"; });
    auto end = std::find_if(ev.begin(), ev.end(), [](auto& e) { return e.what == "backward_end"; });
    overlapped[rank] = first_launch != ev.end() && end != ev.end() && first_launch < end;
    for (auto& p : toy.params) grads[rank].push_back(p.grad().clone());
  });
  for (int r = 0; r < world; ++r) {
    EXPECT_GE(buckets[r], 3);
    EXPECT_EQ(collectives_after_micro0[r], 0) << "a non-final micro-step communicated";
    EXPECT_EQ(collectives_total[r], buckets[r]);
    EXPECT_TRUE(overlapped[r]) << "the first bucket's all-reduce must start before backward returns";
    for (size_t i = 0; i < ref.params.size(); ++i)
      EXPECT_TRUE(at::allclose(grads[r][i], ref.params[i].grad(), 1e-10, 1e-12)) << "rank " << r << " param " << i;
  }
}

TEST(Ddp, BucketsFollowTheOrderGradientsArriveFromTheSecondStep) {
  // Registered last layer first, the initial buckets (reverse registration order) expect layer
  // 0's gradients first, which backward produces last. After step 1 the buckets follow the
  // order seen (the last layer first), and the reduced gradients stay the same.
  const int world = 2;
  std::vector<std::vector<int64_t>> before(world), after(world);
  std::vector<std::vector<at::Tensor>> step1(world), step2(world);
  run_ranks(world, [&](int rank, Communicator& comm) {
    Toy toy(7);
    std::vector<at::Tensor> registered(toy.params.rbegin(), toy.params.rend());  // b5, w5, ..., b0, w0
    DdpReducer ddp(comm, registered, small_fp64_buckets());
    auto step = [&](std::vector<at::Tensor>& grads) {
      ddp.prepare_backward(true);
      toy.loss_sum(batch(rank, 0, rows_of(rank, 0))).backward();
      ddp.finish_backward();
      for (auto& p : toy.params) {
        grads.push_back(p.grad().clone());
        p.mutable_grad() = at::Tensor();  // zero_grad
      }
    };
    before[rank] = ddp.bucket_order();
    step(step1[rank]);
    step(step2[rank]);  // rebuilt at its prepare_backward
    after[rank] = ddp.bucket_order();
  });
  const int64_t n = 2 * kLayers;
  for (int r = 0; r < world; ++r) {
    EXPECT_EQ(before[r].front(), n - 1) << "initially w0 (registered last) is expected first";
    // Backward meets layer 5 first: its weight or bias (registered 0 and 1) opens the first bucket.
    EXPECT_LE(after[r].front(), 1);
    EXPECT_EQ(after[r], after[0]) << "every rank must send the same buckets in the same order";
    for (size_t i = 0; i < step1[r].size(); ++i) EXPECT_TRUE(at::equal(step1[r][i], step2[r][i])) << i;
  }
}

TEST(Ddp, BroadcastMakesEveryRankStartFromRankZero) {
  std::vector<at::Tensor> firsts(2);
  run_ranks(2, [&](int rank, Communicator& comm) {
    Toy toy(rank + 1);
    DdpReducer ddp(comm, toy.params);
    ddp.broadcast_parameters(0);
    firsts[rank] = toy.params[0].detach().clone();
  });
  EXPECT_TRUE(at::equal(firsts[0], firsts[1]));
  EXPECT_TRUE(at::equal(firsts[0], Toy(1).params[0].detach()));
}

TEST(Ddp, Bf16OnTheWireStaysClose) {
  run_ranks(2, [&](int rank, Communicator& comm) {
    Toy toy(3);
    DdpOptions opt;
    opt.reduce_dtype = at::kBFloat16;
    DdpReducer ddp(comm, toy.params, opt);
    ddp.prepare_backward(true);
    toy.loss_sum(batch(0, 0, 4)).backward();  // the same data on both ranks: sum = 2 x local
    auto local = toy.params[0].grad().clone();
    ddp.finish_backward();
    EXPECT_TRUE(at::allclose(toy.params[0].grad(), 2 * local, 2e-2, 1e-3));
  });
}

// finish_backward leaves .grad as views of the buckets (no copy back): the next step must
// still be right after zero_grad (set to none), and also without it (accumulation).
TEST(Ddp, NextStepIsRightWithAndWithoutZeroGrad) {
  run_ranks(2, [&](int rank, Communicator& comm) {
    Toy toy(5);
    DdpReducer ddp(comm, toy.params, small_fp64_buckets());
    auto step = [&] {  // the same data on both ranks: the reduced gradient is 2 x the local one
      ddp.prepare_backward(true);
      toy.loss_sum(batch(0, 0, 4)).backward();
      ddp.finish_backward();
    };
    step();
    std::vector<at::Tensor> first;
    for (auto& p : toy.params) first.push_back(p.grad().clone());
    step();  // no zero_grad: .grad (2g) + g on each rank, summed: 6g
    for (size_t i = 0; i < first.size(); ++i)
      EXPECT_TRUE(at::allclose(toy.params[i].grad(), 3 * first[i], 1e-10, 1e-12)) << "rank " << rank << " param " << i;
    for (auto& p : toy.params) p.mutable_grad() = at::Tensor();  // AdamW::zero_grad
    step();
    for (size_t i = 0; i < first.size(); ++i)
      EXPECT_TRUE(at::allclose(toy.params[i].grad(), first[i], 1e-10, 1e-12)) << "rank " << rank << " param " << i;
  });
}

TEST(Ddp, TheEventLogHoldsOneStepNotTheWholeJob) {
  run_ranks(2, [&](int rank, Communicator& comm) {
    Toy toy(5);
    DdpReducer ddp(comm, toy.params, small_fp64_buckets());
    std::vector<size_t> sizes;
    for (int step = 0; step < 6; ++step) {
      for (auto& p : toy.params) p.mutable_grad() = at::Tensor();
      ddp.prepare_backward(true);
      toy.loss_sum(batch(rank, 0, 4)).backward();
      ddp.finish_backward();
      sizes.push_back(ddp.events().size());
    }
    // Each step: one launch per bucket, backward's end and done.
    for (size_t s : sizes) EXPECT_EQ(s, static_cast<size_t>(ddp.num_buckets() + 2)) << "rank " << rank;
  });
}
