// all_to_all (expert parallelism's token dispatch) on the CPU backend: ranks as threads, each with
// its own communicator over real sockets and the real store; the local and checked wrappers too.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "lf/comm/communicator.h"
#include "lf/common/error.h"
#include "test_ranks.h"

using namespace lf::comm;
using lf::comm::testing::run_ranks;

namespace {

// Rows rank `from` sends rank `to`: uneven, some zero (an expert rank no token chose).
int64_t rows(int from, int to) { return (from * 3 + to * 2 + 1) % 4; }

// Row i of what `from` sends `to`, `width` elements: every element names (from, to, i, column).
at::Tensor payload(int from, int to, int64_t width, at::ScalarType dtype) {
  const int64_t n = rows(from, to);
  auto base = at::arange(n * width, at::kDouble).view({n, width});
  return (base + 1000.0 * from + 100.0 * to).to(dtype);
}

// What rank `me` must hold after the exchange: every rank's rows for it, in rank order.
at::Tensor expected(int me, int world, int64_t width, at::ScalarType dtype) {
  std::vector<at::Tensor> parts;
  for (int from = 0; from < world; ++from) parts.push_back(payload(from, me, width, dtype));
  return at::cat(parts);
}

void exchange_and_check(int rank, Communicator& c, int64_t width, at::ScalarType dtype) {
  const int world = c.world_size();
  std::vector<at::Tensor> parts;
  std::vector<int64_t> send, recv;
  for (int to = 0; to < world; ++to) {
    parts.push_back(payload(rank, to, width, dtype));
    send.push_back(rows(rank, to));
    recv.push_back(rows(to, rank));
  }
  const auto input = at::cat(parts);
  auto want = expected(rank, world, width, dtype);
  auto output = at::full_like(want, -7);
  c.all_to_all(output, input, recv, send)->wait();
  EXPECT_TRUE(at::equal(output, want)) << "rank " << rank << " width " << width;
}

}  // namespace

TEST(AllToAll, UnevenSplitsIncludingEmptyOnesReachEveryRankInRankOrder) {
  for (const int world : {2, 3}) {
    run_ranks(world, [&](int rank, Communicator& c) {
      exchange_and_check(rank, c, 5, at::kFloat);
      exchange_and_check(rank, c, 1, at::kLong);     // the token counts travel as int64
      exchange_and_check(rank, c, 7, at::kBFloat16);
    });
  }
}

TEST(AllToAll, EmptySplitsCutDimZeroEquallyAndRunInIssueOrderWithOtherCollectives) {
  run_ranks(3, [&](int rank, Communicator& c) {
    auto input = (at::arange(3 * 4, at::kFloat).view({3, 4}) + 10 * rank).contiguous();
    auto output = at::empty({3, 4}, at::kFloat);
    auto sum = at::full({2}, static_cast<float>(rank + 1));
    auto w1 = c.all_reduce(sum);
    auto w2 = c.all_to_all(output, input, {}, {});
    auto sum2 = at::ones({2});
    auto w3 = c.all_reduce(sum2);
    w3->wait();
    w2->wait();
    w1->wait();
    EXPECT_TRUE(at::equal(sum, at::full({2}, 6.0f)));
    EXPECT_TRUE(at::equal(sum2, at::full({2}, 3.0f)));
    for (int from = 0; from < 3; ++from)  // from's row `rank`
      EXPECT_TRUE(at::equal(output[from], at::arange(4, at::kFloat) + 4 * rank + 10 * from)) << rank << from;
  });
}

TEST(AllToAll, SplitsThatDisagreeWithAPeerFailNamingBothRanks) {
  std::vector<std::string> errors(2);
  run_ranks(2, [&](int rank, Communicator& c) {
    // Rank 0 sends rank 1 two rows; rank 1 expects three.
    auto input = at::zeros({rank == 0 ? 3 : 2, 4});
    auto output = at::zeros({rank == 0 ? 2 : 4, 4});
    std::vector<int64_t> send = rank == 0 ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{1, 1};
    std::vector<int64_t> recv = rank == 0 ? std::vector<int64_t>{1, 1} : std::vector<int64_t>{3, 1};
    try {
      c.all_to_all(output, input, recv, send)->wait();
    } catch (const lf::BackendError& e) {
      errors[static_cast<size_t>(rank)] = e.what();
    }
  });
  EXPECT_NE(errors[1].find("expects 3 rows from rank 0, which sends 2"), std::string::npos) << errors[1];
  EXPECT_FALSE(errors[0].empty());  // the mesh is shut after rank 1's failure
}

TEST(AllToAll, BadSplitsAreRefusedWhenIssued) {
  auto local = make_local_communicator();
  auto out = at::empty({4, 2});
  local->all_to_all(out, at::ones({4, 2}), {4}, {4})->wait();
  EXPECT_TRUE(at::equal(out, at::ones({4, 2})));
  try {
    local->all_to_all(out, at::ones({4, 2}), {3}, {4});
    FAIL() << "splits summing to 3 for 4 rows were accepted";
  } catch (const lf::BackendError& e) {
    EXPECT_NE(std::string(e.what()).find("sum to 3, but the tensor has 4 rows"), std::string::npos) << e.what();
  }
  EXPECT_THROW(local->all_to_all(out, at::ones({4, 3}), {}, {}), lf::BackendError);  // row widths differ
}

TEST(AllToAll, TheCollectiveCheckAgreesOnDtypeAndRowWidthNotRowCounts) {
  run_ranks(2, [&](int rank, Communicator& c) { exchange_and_check(rank, c, 3, at::kFloat); },
            [](const CommOptions& o) { return with_collective_check(make_cpu_communicator(o), o); });
}
