// HostThreadPool: pieces cover the range once, on distinct threads, errors come
// back to the caller; and the thread count a worker picks.
#include <gtest/gtest.h>

#include <sched.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <set>
#include <stdexcept>
#include <thread>

#include "lf/common/error.h"
#include "lf/offload/host_thread_pool.h"
#include "../support/scoped_env.h"

namespace lf::offload {
namespace {

struct Piece {
  int64_t begin, end;
  std::thread::id thread;
};

std::vector<Piece> pieces_of(HostThreadPool& pool, int64_t n, int64_t grain) {
  std::mutex mu;
  std::vector<Piece> out;
  pool.parallel_for(n, grain, [&](int64_t b, int64_t e) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));  // so no thread can take two pieces' turns
    std::lock_guard<std::mutex> lock(mu);
    out.push_back({b, e, std::this_thread::get_id()});
  });
  std::sort(out.begin(), out.end(), [](const Piece& a, const Piece& b) { return a.begin < b.begin; });
  return out;
}

TEST(HostThreadPool, PiecesCoverTheRangeOnceOnDistinctThreads) {
  HostThreadPool pool(4);
  EXPECT_EQ(pool.size(), 4);
  for (int64_t n : {int64_t{4} * 1000, int64_t{100000}, int64_t{1} << 20, (int64_t{1} << 20) + 3}) {
    const int64_t grain = 1000;
    const auto pieces = pieces_of(pool, n, grain);
    ASSERT_FALSE(pieces.empty());
    EXPECT_LE(pieces.size(), 4u);
    EXPECT_EQ(pieces.front().begin, 0);
    EXPECT_EQ(pieces.back().end, n);
    std::set<std::thread::id> threads;
    for (size_t i = 0; i < pieces.size(); ++i) {
      if (i > 0) EXPECT_EQ(pieces[i].begin, pieces[i - 1].end) << "n=" << n;
      if (i + 1 < pieces.size()) {
        EXPECT_EQ(pieces[i].end % 64, 0) << "piece boundaries on cache lines";
        EXPECT_GE(pieces[i].end - pieces[i].begin, grain);
      }
      threads.insert(pieces[i].thread);
    }
    EXPECT_EQ(threads.size(), pieces.size()) << "one piece per thread, n=" << n;
    EXPECT_TRUE(threads.count(std::this_thread::get_id())) << "the caller runs a piece";
  }
}

TEST(HostThreadPool, SmallRangesRunInlineOnTheCaller) {
  HostThreadPool pool(3);
  const auto pieces = pieces_of(pool, 1500, 1000);  // one grain's worth
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0].thread, std::this_thread::get_id());
  EXPECT_EQ(pieces[0].end, 1500);
  int calls = 0;
  pool.parallel_for(0, 1, [&](int64_t, int64_t) { ++calls; });
  EXPECT_EQ(calls, 0);
}

TEST(HostThreadPool, AnExceptionInAPieceReachesTheCallerAndThePoolStillWorks) {
  HostThreadPool pool(3);
  EXPECT_THROW(pool.parallel_for(3000, 1000,
                                 [&](int64_t b, int64_t) {
                                   if (b > 0) throw std::runtime_error("piece failed");
                                 }),
               std::runtime_error);
  std::atomic<int64_t> sum{0};
  pool.parallel_for(3000, 1000, [&](int64_t b, int64_t e) { sum += e - b; });
  EXPECT_EQ(sum.load(), 3000);
}

TEST(HostThreadPool, NestedAndConcurrentCallsComplete) {
  HostThreadPool pool(2);
  std::atomic<int64_t> inner{0};
  pool.parallel_for(4096, 1024, [&](int64_t b, int64_t e) {
    pool.parallel_for(e - b, 1, [&](int64_t ib, int64_t ie) { inner += ie - ib; });  // inline, no deadlock
  });
  EXPECT_EQ(inner.load(), 4096);
  std::atomic<int64_t> total{0};
  auto caller = [&] {
    for (int r = 0; r < 50; ++r) pool.parallel_for(10000, 100, [&](int64_t b, int64_t e) { total += e - b; });
  };
  std::thread a(caller), b(caller);
  a.join();
  b.join();
  EXPECT_EQ(total.load(), 2 * 50 * 10000);
}

TEST(HostThreadPool, BadSizesAreConfigErrors) {
  EXPECT_THROW(HostThreadPool(0), ConfigError);
  HostThreadPool pool(1);
  EXPECT_THROW(pool.parallel_for(-1, 1, [](int64_t, int64_t) {}), ConfigError);
  EXPECT_THROW(pool.parallel_for(10, 0, [](int64_t, int64_t) {}), ConfigError);
}

using lf::test::ScopedEnv;

int affinity_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  return CPU_COUNT(&set);
}

TEST(HostAdamThreads, CpusOfThisProcessSharedByTheLocalWorkers) {
  ScopedEnv no_override("LF_HOST_ADAM_THREADS", nullptr);
  const int cpus = affinity_cpus();
  {
    ScopedEnv one("LOCAL_WORLD_SIZE", nullptr);
    EXPECT_EQ(host_adam_threads_for_this_worker(), cpus);
  }
  {
    ScopedEnv two("LOCAL_WORLD_SIZE", "2");
    EXPECT_EQ(host_adam_threads_for_this_worker(), std::max(1, cpus / 2));
  }
  {
    ScopedEnv many("LOCAL_WORLD_SIZE", "1000");
    EXPECT_EQ(host_adam_threads_for_this_worker(), 1);
  }
  {
    ScopedEnv bad("LOCAL_WORLD_SIZE", "0");
    EXPECT_THROW(host_adam_threads_for_this_worker(), ConfigError);
  }
}

TEST(HostAdamThreads, FollowsTheAffinityMask) {
  cpu_set_t saved;
  ASSERT_EQ(sched_getaffinity(0, sizeof saved, &saved), 0);
  if (CPU_COUNT(&saved) < 2) GTEST_SKIP() << "needs 2 CPUs";
  int first = 0;
  while (!CPU_ISSET(first, &saved)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
  ScopedEnv no_override("LF_HOST_ADAM_THREADS", nullptr);
  ScopedEnv local("LOCAL_WORLD_SIZE", nullptr);
  const int threads = host_adam_threads_for_this_worker();
  ASSERT_EQ(sched_setaffinity(0, sizeof saved, &saved), 0);
  EXPECT_EQ(threads, 1);
}

TEST(HostAdamThreads, EnvironmentOverride) {
  ScopedEnv local("LOCAL_WORLD_SIZE", "8");
  {
    ScopedEnv t("LF_HOST_ADAM_THREADS", "3");
    EXPECT_EQ(host_adam_threads_for_this_worker(), 3);
  }
  for (const char* bad : {"0", "-2", "many", "100000"}) {
    ScopedEnv t("LF_HOST_ADAM_THREADS", bad);
    try {
      host_adam_threads_for_this_worker();
      ADD_FAILURE() << bad;
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("LF_HOST_ADAM_THREADS"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace lf::offload
