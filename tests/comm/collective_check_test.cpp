// with_collective_check over the CPU backend: ranks as threads, the real store on loopback.
// The backend has its own header check; these assert the store check's own errors, which
// come first and are the only ones NCCL gets.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <thread>

#include "lf/comm/communicator.h"
#include "lf/common/error.h"
#include "lf/rendezvous/store_client.h"
#include "test_ranks.h"

using namespace lf::comm;
using std::chrono::milliseconds;

namespace {

// The CPU backend wrapped in the check, whose timeout is check_timeout_s.
lf::comm::testing::MakeComm checked(double check_timeout_s, uint16_t* store_port = nullptr) {
  return [=](const CommOptions& o) {
    if (store_port) *store_port = o.store_port;
    CommOptions c = o;
    c.timeout_s = check_timeout_s;
    return with_collective_check(make_cpu_communicator(o), c, milliseconds(200));
  };
}

std::vector<std::string> errors_of(int world, const std::function<void(int, Communicator&)>& body, double timeout_s) {
  std::vector<std::string> errors(static_cast<size_t>(world));
  lf::comm::testing::run_ranks(world, [&](int rank, Communicator& c) {
    try {
      body(rank, c);
    } catch (const lf::Error& e) {
      errors[static_cast<size_t>(rank)] = e.what();
    }
  }, checked(timeout_s));
  return errors;
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

TEST(CollectiveCheck, RanksIssuingDifferentCollectivesFailAtOnceWithEachRanksListed) {
  std::vector<at::Tensor> untouched(3);
  auto errors = errors_of(3, [&](int rank, Communicator& c) {
    auto ok = at::ones({4}, at::kFloat);
    c.all_reduce(ok)->wait();  // collective #0 agrees
    ASSERT_EQ(ok[0].item<float>(), 3.0f);
    untouched[static_cast<size_t>(rank)] = at::ones({10}, at::kFloat);
    if (rank < 2) {
      c.all_reduce(untouched[static_cast<size_t>(rank)])->wait();
    } else {
      auto out = at::empty({30}, at::kFloat);
      c.all_gather(out, untouched[2])->wait();
    }
  }, 30);
  for (int r = 0; r < 3; ++r) {
    const auto& e = errors[static_cast<size_t>(r)];
    EXPECT_TRUE(has(e, "collective #1: the ranks issued different collectives")) << e;
    EXPECT_TRUE(has(e, "rank(s) 0,1: all_reduce(sum) Float[10]")) << e;
    EXPECT_TRUE(has(e, "rank(s) 2: all_gather Float[10] into [30]")) << e;
    EXPECT_TRUE(at::equal(untouched[static_cast<size_t>(r)], at::ones({10}, at::kFloat))) << "no payload moved";
  }
}

TEST(CollectiveCheck, ARankThatNeverIssuesACollectiveIsNamedInsteadOfAHang) {
  auto errors = errors_of(3, [&](int rank, Communicator& c) {
    auto t = at::ones({4}, at::kFloat);
    c.all_reduce(t)->wait();
    if (rank == 1) {  // busy elsewhere (a different step count, a rank-only branch...)
      std::this_thread::sleep_for(milliseconds(2500));
      return;
    }
    auto out = at::empty({6}, at::kFloat);
    c.all_gather(out, at::ones({2}, at::kFloat))->wait();
  }, 1.0);
  EXPECT_EQ(errors[1], "");
  for (int r : {0, 2}) {
    const auto& e = errors[static_cast<size_t>(r)];
    EXPECT_TRUE(has(e, "collective #1 (all_gather Float[2] into [6]): rank(s) 1 did not issue it within")) << e;
    EXPECT_TRUE(has(e, "this rank's previous was #0: all_reduce(sum) Float[4]")) << e;
  }
}

TEST(CollectiveCheck, AbortUnblocksARankWaitingForTheOthers) {
  lf::comm::testing::run_ranks(2, [&](int rank, Communicator& c) {
    if (rank == 1) {
      std::this_thread::sleep_for(milliseconds(1500));
      return;
    }
    std::thread aborter([&] {
      std::this_thread::sleep_for(milliseconds(100));
      c.abort();
    });
    auto t = at::ones({10}, at::kFloat);
    EXPECT_THROW(c.all_reduce(t), lf::AbortedError);  // well before the check's 30 s timeout
    aborter.join();
  }, checked(30));
}

TEST(CollectiveCheck, AgreedCollectivesGiveTheBackendsResultsAndOldKeysLeaveTheStore) {
  uint16_t port = 0;
  lf::comm::testing::run_ranks(2, [&](int rank, Communicator& c) {
    for (int i = 0; i < 40; ++i) {
      auto t = at::full({5}, static_cast<float>(rank + i), at::kFloat);
      c.all_reduce(t)->wait();
      ASSERT_EQ(t[4].item<float>(), static_cast<float>(1 + 2 * i));
    }
    auto b = at::full({3}, static_cast<float>(rank + 7), at::kFloat);
    c.broadcast(b, 1)->wait();
    EXPECT_EQ(b[0].item<float>(), 8.0f);
    c.barrier();
    lf::rdzv::StoreClient store("127.0.0.1", port, "none", "");
    // A rank erases its key of #n once every rank has posted #n+1: the barrier is #41.
    const std::string me = std::to_string(rank);
    EXPECT_FALSE(store.get("comm/check/10/" + me));
    EXPECT_FALSE(store.get("comm/check/40/" + me));
    EXPECT_TRUE(store.get("comm/check/41/" + me));
  }, checked(30, &port));
}

TEST(CollectiveCheck, SwitchedOnByLfCommCheckOrTorchDistributedDebugDetail) {
  ::unsetenv("TORCH_DISTRIBUTED_DEBUG");
  ::setenv("LF_COMM_CHECK", "1", 1);
  EXPECT_TRUE(collective_check_requested());
  ::setenv("LF_COMM_CHECK", "0", 1);
  ::setenv("TORCH_DISTRIBUTED_DEBUG", "DETAIL", 1);
  EXPECT_FALSE(collective_check_requested()) << "LF_COMM_CHECK decides when set";
  ::setenv("LF_COMM_CHECK", "yes", 1);
  EXPECT_THROW(collective_check_requested(), lf::ConfigError);
  ::unsetenv("LF_COMM_CHECK");
  EXPECT_TRUE(collective_check_requested());
  ::setenv("TORCH_DISTRIBUTED_DEBUG", "INFO", 1);
  EXPECT_FALSE(collective_check_requested());
  ::unsetenv("TORCH_DISTRIBUTED_DEBUG");
}
