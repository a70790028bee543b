// One process, one device: nothing to communicate. The reference every other strategy equals.
#include <ATen/ATen.h>

#include "lf/parallel/make_strategy.h"
#include "replicated_optimizer.h"

namespace lf::parallel {
namespace {

class SingleStrategy final : public ParallelStrategy {
 public:
  explicit SingleStrategy(const StrategySetup& s) : ParallelStrategy(0, 1), opt_(s) {}

  std::string describe() const override { return "one process"; }
  void before_micro_step(bool) override {}
  void after_backward() override {}
  std::vector<double> all_reduce_sums(std::vector<double> values) override { return values; }
  at::Tensor all_gather_bytes(const at::Tensor& mine) override { return mine.cpu().unsqueeze(0); }
  bool unscale_gradients(double scale) override { return opt_.unscale(scale); }
  double clip_grad_norm(double max_norm) override { return opt_.clip(max_norm); }
  at::Tensor clip_grad_norm_on_device(double max_norm) override { return opt_.clip_on_device(max_norm); }
  void optimizer_step(double lr) override { opt_.step(lr); }
  void zero_grad() override { opt_.zero_grad(); }
  int64_t optimizer_steps() const override { return opt_.steps(); }
  int64_t num_trainable() const override { return opt_.numel(); }
  std::vector<std::string> save_optimizer_state(const std::filesystem::path& dir) override { return opt_.save(dir); }
  void load_optimizer_state(const std::filesystem::path& dir, int64_t steps) override { opt_.load(dir, steps); }
  at::Tensor full_parameter(const std::string& name) override { return opt_.full_parameter(name); }
  void load_full_parameter(const std::string& name, const at::Tensor& value) override {
    opt_.load_full_parameter(name, value);
  }

 private:
  ReplicatedOptimizer opt_;
};

}  // namespace

std::unique_ptr<ParallelStrategy> make_single_strategy(StrategySetup setup) {
  return std::make_unique<SingleStrategy>(setup);
}

}  // namespace lf::parallel
