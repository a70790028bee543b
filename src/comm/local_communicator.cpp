// The communicator of a world of one: every collective is a local copy (or nothing), done when
// issued. What lets a sharded strategy run unchanged on one process (ZeRO-3 at world size 1,
// host offload on one GPU): its shards are then the whole.
#include <ATen/ATen.h>

#include "lf/comm/communicator.h"
#include "lf/common/error.h"
#include "all_to_all_layout.h"

namespace lf::comm {
namespace {

class DoneWork final : public Work {
 public:
  void wait() override {}
  bool is_done() const override { return true; }
};

class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  const char* backend() const override { return "local"; }
  WorkPtr all_reduce(at::Tensor, ReduceOp) override { return done(); }
  WorkPtr broadcast(at::Tensor, int root) override {
    LF_CHECK(root == 0, BackendError, "broadcast from rank {} in a world of one", root);
    return done();
  }
  WorkPtr all_gather(at::Tensor output, at::Tensor input) override { return copy(output, input, "all_gather"); }
  WorkPtr reduce_scatter(at::Tensor output, at::Tensor input) override {
    return copy(output, input, "reduce_scatter");
  }
  WorkPtr all_to_all(at::Tensor output, at::Tensor input, std::vector<int64_t> output_splits,
                     std::vector<int64_t> input_splits) override {
    all_to_all_layout(output, input, output_splits, input_splits, 1);  // checks the splits
    return copy(output, input, "all_to_all");
  }
  void barrier() override {}
  void abort() override {}

 private:
  static WorkPtr done() { return std::make_shared<DoneWork>(); }
  static WorkPtr copy(at::Tensor& output, const at::Tensor& input, const char* what) {
    LF_CHECK(output.numel() == input.numel(), BackendError, "{}: output has {} elements, input {} (world 1)", what,
             output.numel(), input.numel());
    if (output.data_ptr() != input.data_ptr()) output.view({-1}).copy_(input.reshape({-1}));
    return done();
  }
};

}  // namespace

std::unique_ptr<Communicator> make_local_communicator() { return std::make_unique<LocalCommunicator>(); }

}  // namespace lf::comm
