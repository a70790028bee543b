// Ranks as threads, each with its own CPU communicator, over real sockets and the real store.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <thread>

#include "lf/comm/communicator.h"
#include "lf/comm/rank_agreement.h"
#include "lf/common/error.h"
#include "lf/rendezvous/store_client.h"
#include "test_ranks.h"

using namespace lf::comm;

namespace {

// Per-test store namespaces are not needed: each run_ranks() starts its own server.
void run_ranks(int world, const std::function<void(int, Communicator&)>& body) {
  lf::comm::testing::run_ranks(world, body);
}

at::Tensor rank_tensor(int rank, int64_t n, at::ScalarType dtype) {
  auto g = at::make_generator<at::CPUGeneratorImpl>(1000 + rank);
  return at::randn({n}, g, at::TensorOptions(at::kDouble)).to(dtype);
}

}  // namespace

TEST(CpuComm, AllReduceSumAvgMaxAcrossDtypesAndOddSizes) {
  for (int world : {2, 3, 4}) {
    for (int64_t n : {int64_t(1), int64_t(5), int64_t(1000003)}) {
      run_ranks(world, [&](int rank, Communicator& c) {
        for (auto dtype : {at::kFloat, at::kDouble, at::kBFloat16}) {
          at::Tensor expect_sum = at::zeros({n}, at::kDouble), expect_max = rank_tensor(0, n, dtype).to(at::kDouble);
          for (int r = 0; r < world; ++r) {
            expect_sum += rank_tensor(r, n, dtype).to(at::kDouble);
            expect_max = at::maximum(expect_max, rank_tensor(r, n, dtype).to(at::kDouble));
          }
          double tol = dtype == at::kBFloat16 ? 0.05 : 1e-5;
          auto t = rank_tensor(rank, n, dtype);
          c.all_reduce(t)->wait();
          EXPECT_TRUE(at::allclose(t.to(at::kDouble), expect_sum, tol, tol)) << world << " " << n << " " << dtype;
          auto a = rank_tensor(rank, n, dtype);
          c.all_reduce(a, ReduceOp::kAvg)->wait();
          EXPECT_TRUE(at::allclose(a.to(at::kDouble), expect_sum / world, tol, tol));
          auto m = rank_tensor(rank, n, dtype);
          c.all_reduce(m, ReduceOp::kMax)->wait();
          EXPECT_TRUE(at::equal(m.to(at::kDouble), expect_max));
        }
        auto ints = at::full({7}, rank + 1, at::kLong);
        c.all_reduce(ints)->wait();
        EXPECT_EQ(ints[3].item<int64_t>(), world * (world + 1) / 2);
      });
    }
  }
}

TEST(CpuComm, EveryRankGetsBitIdenticalResults) {
  std::vector<at::Tensor> results(3);
  run_ranks(3, [&](int rank, Communicator& c) {
    auto t = rank_tensor(rank, 4099, at::kFloat);
    c.all_reduce(t)->wait();
    results[rank] = t;
  });
  EXPECT_TRUE(at::equal(results[0], results[1]));
  EXPECT_TRUE(at::equal(results[0], results[2]));
}

TEST(CpuComm, BroadcastAllGatherReduceScatter) {
  run_ranks(3, [&](int rank, Communicator& c) {
    auto b = rank == 1 ? at::arange(10, at::kFloat) : at::zeros({10}, at::kFloat);
    c.broadcast(b, 1)->wait();
    EXPECT_TRUE(at::equal(b, at::arange(10, at::kFloat)));

    auto in = at::full({4}, static_cast<float>(rank), at::kFloat);
    auto out = at::empty({12}, at::kFloat);
    c.all_gather(out, in)->wait();
    for (int r = 0; r < 3; ++r) EXPECT_TRUE(at::equal(out.narrow(0, 4 * r, 4), at::full({4}, float(r))));

    auto big = at::arange(12, at::kFloat) + rank;  // sum over ranks: 3*i + 3
    auto mine = at::empty({4}, at::kFloat);
    c.reduce_scatter(mine, big)->wait();
    EXPECT_TRUE(at::equal(mine, at::arange(4 * rank, 4 * rank + 4, at::kFloat) * 3 + 3));
    c.barrier();
  });
}

TEST(CpuComm, CollectivesAreAsyncAndRunInIssueOrder) {
  run_ranks(2, [&](int rank, Communicator& c) {
    std::vector<at::Tensor> ts;
    std::vector<WorkPtr> works;
    for (int i = 0; i < 8; ++i) {
      ts.push_back(at::full({100000}, float(i * 10 + rank), at::kFloat));
      works.push_back(c.all_reduce(ts.back()));  // returns before completion
    }
    for (int i = 0; i < 8; ++i) {
      works[i]->wait();
      EXPECT_FLOAT_EQ(ts[i][0].item<float>(), float(i * 20 + 1));
    }
  });
}

TEST(CpuComm, PeerDeathFailsPendingCollectivesInsteadOfHanging) {
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_THROW(run_ranks(2,
                         [&](int rank, Communicator& c) {
                           if (rank == 1) return;  // leaves: its communicator closes its sockets
                           std::this_thread::sleep_for(std::chrono::milliseconds(100));
                           auto t = at::ones({1000}, at::kFloat);
                           c.all_reduce(t)->wait();
                         }),
               lf::BackendError);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(10));
}

// Issue 19: a stopped peer gave three consecutive timeouts (one per queued collective: the
// DDP buckets), 30 minutes in all, before the worker exited. The first timeout fails every
// queued collective without running it, with the same (timeout) exit code.
TEST(CpuComm, TheFirstTimeoutFailsEveryQueuedCollectiveWithoutRunningIt) {
  std::atomic<bool> checked = false;
  std::vector<std::string> errors;
  const auto short_timeout = [](const CommOptions& o) {
    auto quick = o;
    quick.timeout_s = 1;
    return make_cpu_communicator(quick);
  };
  lf::comm::testing::run_ranks(
      2,
      [&](int rank, Communicator& c) {
        if (rank == 1) {  // joins the mesh, then issues nothing: a stopped (SIGSTOP) peer
          while (!checked) std::this_thread::sleep_for(std::chrono::milliseconds(10));
          return;
        }
        std::vector<at::Tensor> ts;
        std::vector<WorkPtr> works;
        for (int i = 0; i < 3; ++i) {
          ts.push_back(at::ones({1000}, at::kFloat));
          works.push_back(c.all_reduce(ts.back()));
        }
        for (auto& w : works) {
          try {
            w->wait();
            errors.push_back("no error");
          } catch (const lf::TimeoutError& e) {
            errors.push_back(e.what());
          } catch (const std::exception& e) {
            errors.push_back(std::string("not a TimeoutError: ") + e.what());
          }
        }
        checked = true;
      },
      short_timeout);
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_NE(errors[0].find("made no progress for 1000 ms"), std::string::npos) << errors[0];
  for (int i = 1; i < 3; ++i) {
    EXPECT_NE(errors[i].find("collective not run: an earlier collective failed"), std::string::npos) << errors[i];
    EXPECT_EQ(errors[i].find("not a TimeoutError"), std::string::npos) << errors[i];
  }
}

// Destroying a communicator with collectives pending (an error unwinding the trainer) cuts
// the running one short and fails the queued ones without running them, instead of waiting
// out one timeout each.
TEST(CpuComm, DestroyingWithPendingCollectivesDoesNotRunThem) {
  lf::comm::testing::LoopbackStore store;
  std::atomic<bool> done = false;
  std::vector<std::string> errors;
  auto options = [&](int rank) {
    CommOptions o;
    o.rank = rank;
    o.world_size = 2;
    o.store_addr = "127.0.0.1";
    o.store_port = store.port();
    o.timeout_s = 5;  // a drained queue: 5 s per collective, and the messages below say so
    return o;
  };
  std::thread idle_peer([&] {
    auto c = make_cpu_communicator(options(1));
    while (!done) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  });
  {
    auto c = make_cpu_communicator(options(0));
    std::vector<at::Tensor> ts;
    std::vector<WorkPtr> works;
    for (int i = 0; i < 3; ++i) works.push_back(c->all_reduce(ts.emplace_back(at::ones({1000}, at::kFloat))));
    c.reset();
    for (auto& w : works) {
      try {
        w->wait();
        errors.push_back("no error");
      } catch (const std::exception& e) {
        errors.push_back(e.what());
      }
    }
  }
  done = true;
  idle_peer.join();
  ASSERT_EQ(errors.size(), 3u);
  for (const auto& e : errors) EXPECT_EQ(e.find("made no progress"), std::string::npos) << e;
  for (int i = 1; i < 3; ++i)
    EXPECT_TRUE(errors[i].find("not run") != std::string::npos || errors[i].find("before this collective ran") !=
                                                                        std::string::npos)
        << errors[i];
}

TEST(CpuComm, RanksIssuingDifferentCollectivesFailWithAnErrorNamingBoth) {
  // Same count, different sizes (the DDP bug this guards: one rank exchanging embedding rows
  // the other did not), then a different kind: each fails on both ranks, before any payload.
  for (int variant = 0; variant < 2; ++variant) {
    std::vector<std::string> errors(2);
    run_ranks(2, [&](int rank, Communicator& c) {
      auto ok = at::ones({4}, at::kFloat);
      c.all_reduce(ok)->wait();  // collective #0 agrees
      try {
        if (variant == 0 || rank == 0) {
          auto t = at::ones({rank == 0 ? 10 : 12}, at::kFloat);
          c.all_reduce(t)->wait();
        } else {
          auto out = at::empty({20}, at::kFloat);
          c.all_gather(out, at::ones({10}, at::kFloat))->wait();
        }
      } catch (const lf::BackendError& e) {
        errors[static_cast<size_t>(rank)] = e.what();
      }
    });
    for (int r = 0; r < 2; ++r) {
      EXPECT_NE(errors[r].find("issued different collectives"), std::string::npos) << errors[r];
      EXPECT_NE(errors[r].find("collective #1"), std::string::npos) << errors[r];
      EXPECT_NE(errors[r].find(variant == 0 ? "of 12" : "all_gather"), std::string::npos) << errors[r];
    }
  }
}

TEST(CpuComm, AbortUnblocksAWaitingCollective) {
  run_ranks(2, [&](int rank, Communicator& c) {
    if (rank == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      return;
    }
    auto t = at::ones({10}, at::kFloat);
    auto w = c.all_reduce(t);
    std::thread aborter([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      c.abort();
    });
    EXPECT_THROW(w->wait(), lf::Error);
    aborter.join();
    EXPECT_THROW(c.all_reduce(t)->wait(), lf::BackendError);
  });
}

namespace {

// What the NCCL backend checks before ncclCommInitRank (the library's version), over the real store.
std::vector<std::string> agree(const std::vector<std::string>& values) {
  lf::comm::testing::LoopbackStore store;
  const int world = static_cast<int>(values.size());
  std::vector<std::string> errors(values.size());
  std::vector<std::thread> ts;
  for (int r = 0; r < world; ++r)
    ts.emplace_back([&, r] {
      lf::rdzv::StoreClient client("127.0.0.1", store.port(), "none", "");
      try {
        require_same_on_every_rank(client, "comm/g0", r, world, "NCCL version", values[static_cast<size_t>(r)],
                                   std::chrono::seconds(10));
      } catch (const lf::BackendError& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : ts) t.join();
  return errors;
}

}  // namespace

TEST(RankAgreement, AVersionMismatchFailsEveryRankAndNamesBoth) {
  auto errors = agree({"2.27.3", "2.27.3", "2.21.5"});
  for (const auto& e : errors)
    EXPECT_NE(e.find("NCCL version differs between ranks: rank 2 has 2.21.5, rank 0 has 2.27.3"), std::string::npos)
        << e;
  for (const auto& e : agree({"2.27.3", "2.27.3", "2.27.3"})) EXPECT_EQ(e, "");
}
