// Data parallel (DDP): every rank holds the whole model, its gradient and its optimizer
// state; gradients are summed over ranks by comm::DdpReducer's buckets while backward runs,
// so every rank's optimizer step is the same and clipping and fp16 unscaling stay local.
// Under bf16/fp16 over fp32 master weights the layers' gradients go straight into the
// buckets through the parameters' gradient routes (model/grad_sink.h), and a trainable
// embedding's lookup gradient travels as rows when that is fewer bytes.
#include <ATen/ATen.h>

#include <algorithm>

#include "lf/comm/ddp_reducer.h"
#include "lf/common/error.h"
#include "lf/common/log.h"
#include "lf/config/train_config.h"
#include "lf/model/causal_lm.h"
#include "lf/model/grad_sink.h"
#include "lf/parallel/make_strategy.h"
#include "host_sums.h"
#include "replicated_optimizer.h"

namespace lf::parallel {
namespace {

// The reducer's options. The embedding's lookup gradient travels as rows (at most micro-batch
// x longest row per micro-step from every rank, in the compute dtype) instead of a dense [V,C]
// fp32 all-reduce at the end of backward, when that is fewer bytes (long rows on many GPUs:
// dense); an untied embedding, which has no dense part, then skips the all-reduce. The rows
// come through the sink. LF_DDP_SPARSE_EMBEDDING=1 forces rows, 0 forbids them (comparison).
comm::DdpOptions ddp_options(const config::ParallelSection& c, const model::CausalLM& model, const StrategyContext& ctx,
                             int64_t world, const std::vector<std::string>& names, bool sink_on) {
  comm::DdpOptions o;
  o.bucket_cap_mb = c.ddp_bucket_cap_mb;
  o.first_bucket_mb = std::min(1.0, c.ddp_bucket_cap_mb);
  o.reduce_dtype = c.ddp_reduce_dtype == "bf16" ? at::kBFloat16 : at::kFloat;
  const auto& rows_env = c.ddp_sparse_embedding;
  const auto embedding = std::find(names.begin(), names.end(), "model.embed_tokens.weight");
  if (!sink_on || rows_env == "0" || embedding == names.end()) return o;
  const int64_t bound = ctx.micro_batch * ctx.longest_row;
  const int64_t rows_a_step = world * ctx.accumulation * bound;
  const int64_t vocab = model.config().vocab_size;
  const double rows_bytes = static_cast<double>(rows_a_step) * static_cast<double>(at::elementSize(ctx.compute_dtype));
  const double dense_bytes = static_cast<double>(vocab) * static_cast<double>(at::elementSize(at::kFloat));
  if (rows_env == "auto" && rows_bytes >= dense_bytes) {
    spdlog::info("DDP: the embedding's gradient is all-reduced densely: up to {} rows of {}-byte values a step "
                 "from all ranks would outweigh its {} fp32 vocabulary rows",
                 rows_a_step, at::elementSize(ctx.compute_dtype), vocab);
    return o;
  }
  o.sparse_rows_bound = bound;
  o.sparse_rows_dtype = ctx.compute_dtype;
  o.row_params = {static_cast<int64_t>(embedding - names.begin())};
  if (!model.config().tie_word_embeddings) o.rows_only_params = o.row_params;
  return o;
}

// The model::GradSink face of the reducer: cast weights' gradients go into its buckets.
struct BucketGradSink final : model::GradSink {
  explicit BucketGradSink(comm::DdpReducer& r) : reducer(r) {}
  bool expect(const at::Tensor& param) override { return reducer.expect_external(param); }
  void take(const at::Tensor& param, const at::Tensor& grad) override { reducer.take_external(param, grad); }
  bool expect_rows(const at::Tensor& param) override { return reducer.expect_rows(param); }
  void take_rows(const at::Tensor& param, const at::Tensor& ids, const at::Tensor& rows) override {
    reducer.take_rows(param, ids, rows);
  }
  comm::DdpReducer& reducer;
};

class DdpStrategy final : public ParallelStrategy {
 public:
  DdpStrategy(const config::ParallelSection& c, const StrategySetup& s, const StrategyContext& ctx)
      : ParallelStrategy(s.rank, s.world), comm_(*s.communicator), opt_(s) {
    std::vector<at::Tensor> trainable;
    std::vector<std::string> names;
    for (const auto& p : s.trainable) {
      trainable.push_back(*p.tensor);
      names.push_back(p.name);
    }
    // LF_DDP_GRAD_SINK=0 restores the copy path (and the dense embedding; for comparison).
    const bool sink_on = c.ddp_grad_sink;
    reducer_ = std::make_unique<comm::DdpReducer>(comm_, trainable, ddp_options(c, *s.model, ctx, s.world, names, sink_on));
    reducer_->broadcast_parameters(0);  // rank 0's weights everywhere before step 1
    if (sink_on) {
      sink_ = std::make_unique<BucketGradSink>(*reducer_);
      for (const auto& t : trainable) model::set_grad_route(t, sink_.get());
      routed_ = trainable;
    }
  }
  ~DdpStrategy() override {
    for (const auto& t : routed_) model::set_grad_route(t, nullptr);
  }

  std::string describe() const override {
    return fmt::format("data parallel: rank {} of {} ({} backend, {} gradient buckets)", rank(), world(),
                       comm_.backend(), reducer_->num_buckets());
  }
  void before_micro_step(bool last) override { reducer_->prepare_backward(last); }
  void after_backward() override { reducer_->finish_backward(); }

  std::vector<double> all_reduce_sums(std::vector<double> values) override {
    return sum_over_ranks(comm_, std::move(values), device());
  }
  at::Tensor all_gather_bytes(const at::Tensor& mine) override {
    auto in = mine.to(device());
    auto out = at::empty({comm_.world_size() * in.numel()}, in.options());
    comm_.all_gather(out, in)->wait();
    return out.view({comm_.world_size(), in.numel()}).cpu();
  }
  // After the all-reduce every rank holds the same gradients: local answers are global.
  bool unscale_gradients(double scale) override { return opt_.unscale(scale); }
  double clip_grad_norm(double max_norm) override { return opt_.clip(max_norm); }
  void optimizer_step(double lr) override { opt_.step(lr); }
  void zero_grad() override { opt_.zero_grad(); }
  int64_t optimizer_steps() const override { return opt_.steps(); }
  int64_t num_trainable() const override { return opt_.numel(); }
  // Every rank's state is the same: rank 0 writes the one copy.
  std::vector<std::string> save_optimizer_state(const std::filesystem::path& dir) override {
    return rank() == 0 ? opt_.save(dir) : std::vector<std::string>{};
  }
  void load_optimizer_state(const std::filesystem::path& dir, int64_t steps) override { opt_.load(dir, steps); }
  at::Tensor full_parameter(const std::string& name) override { return opt_.full_parameter(name); }
  void load_full_parameter(const std::string& name, const at::Tensor& value) override {
    opt_.load_full_parameter(name, value);
  }

  const comm::DdpReducer& reducer() const { return *reducer_; }

 private:
  c10::Device device() const { return opt_.params().front().second.device(); }

  comm::Communicator& comm_;
  ReplicatedOptimizer opt_;
  std::unique_ptr<comm::DdpReducer> reducer_;
  std::unique_ptr<BucketGradSink> sink_;
  std::vector<at::Tensor> routed_;
};

}  // namespace

std::unique_ptr<ParallelStrategy> make_ddp_strategy(const config::ParallelSection& config, StrategySetup setup,
                                                    const StrategyContext& context) {
  LF_CHECK(setup.communicator != nullptr && setup.world > 1, ConfigError,
           "data parallel needs a communicator and more than one rank (world {})", setup.world);
  return std::make_unique<DdpStrategy>(config, setup, context);
}

}  // namespace lf::parallel
