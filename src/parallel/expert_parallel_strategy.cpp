// Expert parallelism (expert_model_parallel_size = ep = the world size): a ParallelStrategy
// around data parallelism. Rank r keeps experts [r·E/ep, (r+1)·E/ep) of every sparse layer (its
// slices of experts.gate_up_proj [E, 2I, C] and experts.down_proj [E, C, I]) and the whole of
// every other parameter; each MoeBlock gets the all-to-all dispatch (expert_dispatch.h), so the
// model code stays single-device. Gradients:
//   non-expert parameters: DDP over the world (ddp_strategy.cpp, given only those);
//   expert slices: stay local. The dispatch's backward already summed every rank's tokens into
//     the owner's gradient, which is what DDP's all-reduce would have made of them.
// The gradient norm joins the two (the expert slices' squares summed over ranks); clipping scales
// both by the one factor. Optimizer: DDP's over the dense parameters, a second ReplicatedOptimizer
// over this rank's expert slices (checkpointed as element ranges, ckpt/optimizer_state.h, so a
// run resumes at any layout). Saving gathers each expert tensor whole (all_gather, collective).
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <fmt/format.h>

#include <cmath>
#include <set>

#include "expert_dispatch.h"
#include "host_sums.h"
#include "lf/comm/communicator.h"
#include "lf/common/error.h"
#include "lf/model/causal_lm.h"
#include "lf/model/moe_block.h"
#include "lf/parallel/make_strategy.h"
#include "replicated_optimizer.h"

namespace lf::parallel {
namespace {

std::vector<model::MoeBlock*> moe_blocks(model::CausalLM& m) {
  std::vector<model::MoeBlock*> out;
  for (auto& layer : m.layers())
    if (auto* b = dynamic_cast<model::MoeBlock*>(layer.mlp_.get())) out.push_back(b);
  return out;
}

// Rank 0's experts everywhere (every rank must start equal), then this rank's slice of dim 0 kept.
void keep_my_experts(at::Tensor& slot, comm::Communicator& comm) {
  c10::NoGradGuard no_grad;
  const int64_t ep = comm.world_size(), local = slot.size(0) / ep;
  auto whole = slot.detach().contiguous();
  comm.broadcast(whole, 0)->wait();
  auto mine = whole.narrow(0, comm.rank() * local, local).clone();
  mine.set_requires_grad(slot.requires_grad());
  slot = mine;
}

class ExpertParallelStrategy final : public ParallelStrategy {
 public:
  ExpertParallelStrategy(const config::ParallelSection& c, StrategySetup s, const StrategyContext& ctx)
      : ParallelStrategy(s.rank, s.world), comm_(*s.communicator), dispatch_(make_all_to_all_dispatch(comm_)) {
    const auto blocks = moe_blocks(*s.model);
    LF_CHECK(!blocks.empty(), ConfigError,
             "expert_model_parallel_size {}: the model has no mixture-of-experts layer (experts to place); remove "
             "the key",
             s.world);
    std::set<const at::Tensor*> expert_slots;
    for (auto* b : blocks) {
      LF_CHECK(b->spec.experts % s.world == 0, ConfigError,
               "expert_model_parallel_size {}: a layer's {} experts do not split evenly over it", s.world,
               b->spec.experts);
      keep_my_experts(b->gate_up_, comm_);
      keep_my_experts(b->down_, comm_);
      b->dispatch_ = dispatch_.get();
      expert_slots.insert(&b->gate_up_);
      expert_slots.insert(&b->down_);
      experts_per_rank_ = b->spec.experts / s.world;
      experts_ = b->spec.experts;
    }
    blocks_ = blocks;
    // What this rank holds once its experts are sliced (`lf-train plan`'s per_rank counts).
    for (const auto& p : s.model->named_parameters()) held_ += p.tensor->numel();
    for (const auto& p : s.trainable) held_trainable_ += p.tensor->numel();
    StrategySetup dense = s, local = s;
    dense.trainable.clear();
    local.trainable.clear();
    for (const auto& p : s.trainable) (expert_slots.count(p.tensor) ? local : dense).trainable.push_back(p);
    for (const auto& p : local.trainable) expert_names_.insert(p.name);
    for (const auto& p : dense.trainable) dense_tensors_.push_back(*p.tensor);
    dense_ = make_ddp_strategy(c, std::move(dense), ctx);
    if (!local.trainable.empty()) local_ = std::make_unique<ReplicatedOptimizer>(local);
  }
  ~ExpertParallelStrategy() override {
    for (auto* b : blocks_) b->dispatch_ = nullptr;
  }

  std::string describe() const override {
    return fmt::format("{}; expert parallel over {} ranks: experts {}-{} of {} a layer on this rank ({}), tokens "
                       "dispatched by all_to_all; {} parameters on this rank, {} trainable",
                       dense_->describe(), world(), rank() * experts_per_rank_, (rank() + 1) * experts_per_rank_ - 1,
                       experts_, local_ ? "trained here, gradients local" : "frozen", held_, held_trainable_);
  }
  // The dispatch's all-to-alls live in every forward and backward: a rank without examples runs one.
  bool needs_every_forward() const override { return true; }
  model::UnitHooks* unit_hooks() override { return dense_->unit_hooks(); }
  void before_micro_step(bool last) override { dense_->before_micro_step(last); }
  void after_backward() override { dense_->after_backward(); }
  std::vector<double> all_reduce_sums(std::vector<double> values) override {
    return dense_->all_reduce_sums(std::move(values));
  }
  at::Tensor all_gather_bytes(const at::Tensor& mine) override { return dense_->all_gather_bytes(mine); }

  bool unscale_gradients(double scale) override {
    const bool dense = dense_->unscale_gradients(scale);
    const bool mine = local_ && local_->unscale(scale);
    return dense || all_reduce_sum(mine ? 1.0 : 0.0) > 0;  // an expert's overflow is its owner's alone
  }
  double clip_grad_norm(double max_norm) override;
  void optimizer_step(double lr) override {
    dense_->optimizer_step(lr);
    if (local_) local_->step(lr);
  }
  void zero_grad() override {
    dense_->zero_grad();
    if (local_) local_->zero_grad();
  }
  int64_t optimizer_steps() const override { return dense_->optimizer_steps(); }
  int64_t num_trainable() const override { return dense_->num_trainable() + (local_ ? local_->numel() * world() : 0); }

  std::vector<std::string> save_optimizer_state(const std::filesystem::path& dir) override {
    auto files = dense_->save_optimizer_state(dir);
    if (local_)
      for (auto& f : local_->save_slice(dir, rank())) files.push_back(std::move(f));
    return files;
  }
  void load_optimizer_state(const std::filesystem::path& dir, int64_t steps) override {
    dense_->load_optimizer_state(dir, steps);
    if (local_) local_->load_slice(dir, steps, rank());
  }
  at::Tensor full_parameter(const std::string& name) override;
  bool saving_is_collective() const override { return true; }
  void load_full_parameter(const std::string& name, const at::Tensor& value) override;

 private:
  comm::Communicator& comm_;
  std::unique_ptr<model::ExpertDispatch> dispatch_;
  std::vector<model::MoeBlock*> blocks_;
  std::unique_ptr<ParallelStrategy> dense_;
  std::unique_ptr<ReplicatedOptimizer> local_;  // this rank's expert slices; null when they are frozen
  std::set<std::string> expert_names_;
  std::vector<at::Tensor> dense_tensors_;
  int64_t experts_per_rank_ = 0, experts_ = 0;
  int64_t held_ = 0, held_trainable_ = 0;  // elements of the model's parameters / the trained ones, this rank's
};

// torch's clip_grad_norm_ over every parameter: the dense norm (replicated after DDP's all-reduce)
// and the expert slices' squares summed over their owners, one factor for both.
double ExpertParallelStrategy::clip_grad_norm(double max_norm) {
  const double dense = dense_->clip_grad_norm(0.0);  // the norm only
  const double mine = local_ ? local_->clip(0.0) : 0.0;
  const double total = std::sqrt(dense * dense + all_reduce_sum(mine * mine));
  const double factor = max_norm / (total + 1e-6);
  if (max_norm > 0 && factor < 1.0) {
    c10::NoGradGuard no_grad;
    const auto scale = [&](const at::Tensor& t) {
      if (auto g = t.grad(); g.defined()) g.mul_(factor);
    };
    for (const auto& t : dense_tensors_) scale(t);
    if (local_)
      for (const auto& [name, t] : local_->params()) scale(t);
  }
  return total;
}

at::Tensor ExpertParallelStrategy::full_parameter(const std::string& name) {
  if (!expert_names_.count(name)) return dense_->full_parameter(name);
  const auto mine = local_->full_parameter(name).detach().contiguous();
  auto sizes = mine.sizes().vec();
  sizes[0] *= world();
  auto whole = at::empty(sizes, mine.options());
  comm_.all_gather(whole, mine)->wait();  // dim-0 blocks in rank order: experts in order
  return whole;
}

void ExpertParallelStrategy::load_full_parameter(const std::string& name, const at::Tensor& value) {
  if (!expert_names_.count(name)) return dense_->load_full_parameter(name, value);
  LF_CHECK(value.dim() >= 1 && value.size(0) == experts_, ConfigError,
           "resume: {} holds {} experts in the checkpoint, the model {}", name, value.dim() ? value.size(0) : 0,
           experts_);
  local_->load_full_parameter(name, value.narrow(0, rank() * experts_per_rank_, experts_per_rank_));
}

}  // namespace

std::unique_ptr<ParallelStrategy> make_expert_parallel_strategy(const config::ParallelSection& config,
                                                                StrategySetup setup, const StrategyContext& context) {
  LF_CHECK(setup.communicator != nullptr && setup.world > 1, ConfigError,
           "expert parallelism needs a communicator and more than one rank (world {})", setup.world);
  LF_CHECK(config.expert_parallel_size == setup.world, ConfigError,
           "expert_model_parallel_size {} on {} ranks: lf-train places the experts over the whole world (the expert "
           "data-parallel groups of ep < world are not built yet); set it to {}",
           config.expert_parallel_size, setup.world, setup.world);
  return std::make_unique<ExpertParallelStrategy>(config, std::move(setup), context);
}

}  // namespace lf::parallel
