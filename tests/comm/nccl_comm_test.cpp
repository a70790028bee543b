// NCCL backend on real GPUs: ranks as threads, one GPU each (needs >= 2 GPUs; skips otherwise).
#include <ATen/ATen.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "lf/comm/communicator.h"
#include "lf/common/error.h"
#include "test_ranks.h"

using namespace lf::comm;

namespace {

void run_gpu_ranks(int world, const std::function<void(int, Communicator&)>& body) {
  lf::comm::testing::run_ranks(
      world,
      [&](int rank, Communicator& c) {
        body(rank, c);
        c10::cuda::device_synchronize();
      },
      make_nccl_communicator, [](int rank) { c10::cuda::set_device(static_cast<c10::DeviceIndex>(rank)); });
}

}  // namespace

TEST(NcclComm, CollectivesMatchTheCpuReference) {
  int gpus = c10::cuda::device_count();
  if (gpus < 2) GTEST_SKIP() << "needs 2 GPUs, found " << gpus;
  int world = std::min(gpus, 8);
  run_gpu_ranks(world, [&](int rank, Communicator& c) {
    auto dev = at::TensorOptions(at::kFloat).device(at::kCUDA, rank);
    auto t = at::full({1 << 20}, float(rank + 1), dev);
    c.all_reduce(t, ReduceOp::kSum)->wait();  // the current stream now waits; .cpu() syncs
    EXPECT_EQ(t[12345].item<float>(), float(world * (world + 1) / 2));
    auto b = rank == 0 ? at::arange(1000, dev) : at::zeros({1000}, dev);
    c.broadcast(b, 0)->wait();
    EXPECT_TRUE(at::equal(b.cpu(), at::arange(1000, at::kFloat)));
    auto in = at::full({16}, float(rank), dev);
    auto out = at::empty({16 * world}, dev);
    c.all_gather(out, in)->wait();
    for (int r = 0; r < world; ++r) EXPECT_EQ(out[16 * r].item<float>(), float(r));
    auto big = at::ones({8 * world}, dev);
    auto mine = at::empty({8}, dev);
    c.reduce_scatter(mine, big)->wait();
    EXPECT_TRUE(at::equal(mine.cpu(), at::full({8}, float(world))));
    auto bf = at::full({4096}, 1.0, dev.dtype(at::kBFloat16));
    c.all_reduce(bf, ReduceOp::kAvg)->wait();
    EXPECT_EQ(bf[7].item<float>(), 1.0f);
    c.barrier();
  });
}

// Expert parallelism's dispatch: uneven splits, some empty, every rank's rows in rank order (as the
// CPU backend's tests/comm/all_to_all_test.cpp checks), in bf16 rows of 3 and int64 counts.
TEST(NcclComm, AllToAllWithUnevenSplitsMatchesTheCpuReference) {
  int gpus = c10::cuda::device_count();
  if (gpus < 2) GTEST_SKIP() << "needs 2 GPUs, found " << gpus;
  const int world = std::min(gpus, 8);
  const auto rows = [](int from, int to) -> int64_t { return (from * 3 + to * 2 + 1) % 4; };
  const auto part = [&](int from, int to, at::ScalarType dt) {
    return (at::arange(rows(from, to) * 3, at::kDouble).view({rows(from, to), 3}) + 1000.0 * from + 100.0 * to).to(dt);
  };
  run_gpu_ranks(world, [&](int rank, Communicator& c) {
    for (const auto dt : {at::kBFloat16, at::kLong}) {
      std::vector<at::Tensor> mine, want;
      std::vector<int64_t> send, recv;
      for (int r = 0; r < world; ++r) {
        mine.push_back(part(rank, r, dt));
        want.push_back(part(r, rank, dt));
        send.push_back(rows(rank, r));
        recv.push_back(rows(r, rank));
      }
      const auto dev = at::TensorOptions(dt).device(at::kCUDA, rank);
      auto in = at::cat(mine).to(dev.device()), expected = at::cat(want);
      auto out = at::full(expected.sizes(), -7, dev);
      c.all_to_all(out, in, recv, send)->wait();
      EXPECT_TRUE(at::equal(out.cpu(), expected)) << "rank " << rank;
    }
  });
}

namespace {

// A collective a peer never joins (the peer is alive but elsewhere): abort() from the
// caller, or the watchdog after timeout_s, fails it with BackendError instead of hanging;
// the kernels stop, so the device synchronizes afterwards.
void stuck_collective(bool caller_aborts) {
  std::atomic<bool> done{false};
  auto t0 = std::chrono::steady_clock::now();
  run_gpu_ranks(2, [&](int rank, Communicator& c) {
    if (rank == 1) {  // never joins; leaves only after rank 0 has failed, then aborts too
      while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      c.abort();
      return;
    }
    auto t = at::ones({1024}, at::TensorOptions(at::kFloat).device(at::kCUDA, 0));
    bool failed = false;
    // As the trainer does when the agent reports a dead peer: abort() from another thread,
    // since the first collective blocks this one on the host (NCCL connects lazily).
    std::thread aborter([&] {
      if (!caller_aborts) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      c.abort();
    });
    try {
      auto w = c.all_reduce(t, ReduceOp::kSum);
      // Until the watchdog (timeout 30 s in run_ranks) or the abort fails the communicator.
      for (int i = 0; i < 600 && !failed; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        try {
          c.all_reduce(t, ReduceOp::kSum);
        } catch (const lf::BackendError&) {
          failed = true;
        }
      }
    } catch (const lf::BackendError&) {
      failed = true;  // the first call itself blocked on the host and was aborted
    }
    aborter.join();
    done = true;
    EXPECT_TRUE(failed);
  });
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(caller_aborts ? 20 : 50));
}

}  // namespace

TEST(NcclComm, AbortFailsInsteadOfHanging) {
  int gpus = c10::cuda::device_count();
  if (gpus < 2) GTEST_SKIP() << "needs 2 GPUs, found " << gpus;
  stuck_collective(/*caller_aborts=*/true);
}

TEST(NcclComm, WatchdogFailsACollectiveThatNeverFinishes) {
  int gpus = c10::cuda::device_count();
  if (gpus < 2) GTEST_SKIP() << "needs 2 GPUs, found " << gpus;
  stuck_collective(/*caller_aborts=*/false);
}
