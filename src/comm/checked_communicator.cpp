// with_collective_check: every collective agreed through the job's store before it is
// issued. Keys: <prefix>/check/<seq>/<rank> = what that rank issues as its seq-th
// collective. A rank erases its key of seq-1 once every rank has posted seq (they have all
// read seq-1 by then), so the store holds about two keys per rank however long the job.
#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>

#include "comm_store.h"
#include "lf/comm/communicator.h"
#include "lf/common/env.h"
#include "lf/common/env_knobs.h"
#include "lf/common/error.h"
#include "lf/common/log.h"

namespace lf::comm {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

const char* op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAvg: return "avg";
    case ReduceOp::kMax: return "max";
  }
  return "?";
}

std::string shape(const at::Tensor& t) { return fmt::format("{}[{}]", c10::toString(t.scalar_type()), t.numel()); }

class CheckedCommunicator : public Communicator {
 public:
  CheckedCommunicator(std::unique_ptr<Communicator> inner, const CommOptions& o, milliseconds warn_every)
      : inner_(std::move(inner)),
        store_(connect_store(o)),
        prefix_(o.key_prefix + "/check"),
        timeout_(static_cast<int64_t>(o.timeout_s * 1000)),
        warn_every_(warn_every) {
    spdlog::info("collective check on (LF_COMM_CHECK): every collective is agreed across ranks through the store "
                 "first; slow, for finding a hang");
  }

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  const char* backend() const override { return inner_->backend(); }

  WorkPtr all_reduce(at::Tensor tensor, ReduceOp op) override {
    agree(fmt::format("all_reduce({}) {}", op_name(op), shape(tensor)));
    return inner_->all_reduce(std::move(tensor), op);
  }
  WorkPtr broadcast(at::Tensor tensor, int root) override {
    agree(fmt::format("broadcast from rank {} {}", root, shape(tensor)));
    return inner_->broadcast(std::move(tensor), root);
  }
  WorkPtr all_gather(at::Tensor output, at::Tensor input) override {
    agree(fmt::format("all_gather {} into [{}]", shape(input), output.numel()));
    return inner_->all_gather(std::move(output), std::move(input));
  }
  WorkPtr reduce_scatter(at::Tensor output, at::Tensor input) override {
    agree(fmt::format("reduce_scatter {} into [{}]", shape(input), output.numel()));
    return inner_->reduce_scatter(std::move(output), std::move(input));
  }
  // The row counts differ by rank: what must agree is the dtype and a row's width.
  WorkPtr all_to_all(at::Tensor output, at::Tensor input, std::vector<int64_t> output_splits,
                     std::vector<int64_t> input_splits) override {
    int64_t width = 1;  // a row's elements (a tensor of no rows still has its trailing dims)
    for (int64_t d = 1; d < input.dim(); ++d) width *= input.size(d);
    agree(fmt::format("all_to_all {} rows of {}", c10::toString(input.scalar_type()), width));
    return inner_->all_to_all(std::move(output), std::move(input), std::move(output_splits), std::move(input_splits));
  }
  void barrier() override {
    agree("barrier");
    inner_->barrier();
  }
  void abort() override {
    aborted_ = true;  // a rank waiting in agree() fails within one wait slice
    inner_->abort();
  }

 private:
  std::string key(int64_t seq, int r) const { return fmt::format("{}/{}/{}", prefix_, seq, r); }

  // The ranks whose key for seq is not in the store yet.
  std::vector<int> missing(int64_t seq) {
    std::vector<int> out;
    for (int r = 0; r < world_size(); ++r)
      if (!store_.get(key(seq, r))) out.push_back(r);
    return out;
  }

  void agree(const std::string& what) {
    std::lock_guard lock(mu_);  // one store connection; seq in issue order
    const int64_t seq = next_seq_++;
    store_.set(key(seq, rank()), what);
    std::vector<std::string> keys;
    for (int r = 0; r < world_size(); ++r) keys.push_back(key(seq, r));
    const auto start = Clock::now(), deadline = start + timeout_;
    auto next_warning = start + warn_every_;
    for (;;) {
      LF_CHECK(!aborted_, AbortedError, "collective #{} ({}): the communicator was aborted [LF_COMM_CHECK]", seq, what);
      const auto now = Clock::now();
      // Short slices, so that abort() is seen within one.
      const auto slice = std::clamp(std::chrono::duration_cast<milliseconds>(std::min(deadline, next_warning) - now),
                                    milliseconds(1), milliseconds(500));
      try {
        store_.wait(keys, slice);
        break;
      } catch (const TimeoutError&) {
        if (Clock::now() < std::min(deadline, next_warning)) continue;
        const auto ranks = missing(seq);
        if (ranks.empty()) break;
        const double waited = std::chrono::duration<double>(Clock::now() - start).count();
        const std::string since =
            seq == 0 ? "it is the job's first" : fmt::format("this rank's previous was #{}: {}", seq - 1, previous_);
        LF_CHECK(Clock::now() < deadline, TimeoutError,
                 "collective #{} ({}): rank(s) {} did not issue it within {:.0f} s ({}). A rank that skips a "
                 "collective, runs a different number of steps or is stuck outside collectives hangs every other "
                 "rank; see rank(s) {}'s own log [LF_COMM_CHECK]",
                 seq, what, fmt::join(ranks, ","), waited, since, fmt::join(ranks, ","));
        spdlog::warn("collective #{} ({}) has waited {:.0f} s for rank(s) {} [LF_COMM_CHECK]", seq, what, waited,
                     fmt::join(ranks, ","));
        next_warning += warn_every_;
      }
    }
    std::map<std::string, std::vector<int>> ranks_of;
    for (int r = 0; r < world_size(); ++r) ranks_of[r == rank() ? what : store_.get(keys[r]).value_or("?")].push_back(r);
    if (ranks_of.size() > 1) {
      std::vector<std::string> each;
      for (const auto& [issued, ranks] : ranks_of)
        each.push_back(fmt::format("rank(s) {}: {}", fmt::join(ranks, ","), issued));
      LF_THROW(BackendError,
               "collective #{}: the ranks issued different collectives ({}). Every rank must issue the same "
               "collectives in the same order (same model, trainable set, steps and DDP options on every rank) "
               "[LF_COMM_CHECK]",
               seq, fmt::join(each, "; "));
    }
    if (seq > 0) store_.erase(key(seq - 1, rank()));  // every rank has posted seq, so has read seq-1
    previous_ = what;
  }

  std::unique_ptr<Communicator> inner_;
  rdzv::StoreClient store_;
  std::string prefix_;
  milliseconds timeout_, warn_every_;
  std::mutex mu_;
  std::atomic<bool> aborted_ = false;
  int64_t next_seq_ = 0;
  std::string previous_;
};

}  // namespace

std::unique_ptr<Communicator> with_collective_check(std::unique_ptr<Communicator> inner, const CommOptions& options,
                                                    milliseconds warn_every) {
  return std::make_unique<CheckedCommunicator>(std::move(inner), options, warn_every);
}

bool collective_check_requested() {
  if (const auto v = knob_bool("LF_COMM_CHECK")) return *v;
  return env_string("TORCH_DISTRIBUTED_DEBUG").value_or("") == "DETAIL";
}

}  // namespace lf::comm
