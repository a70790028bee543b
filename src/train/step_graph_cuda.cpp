// CUDA graphs of the micro-step: capture, replay, and the fallbacks (see step_graph.h).
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime_api.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "lf/common/log.h"
#include "step_graph.h"

namespace lf::train {
namespace {

// What a captured graph is valid for: input_ids' [B,T] and which optional tensors exist.
struct BatchKey {
  std::vector<int64_t> shape;
  bool positions = false, segments = false;
  bool operator==(const BatchKey&) const = default;
};

BatchKey key_of(const Batch& b) {
  return {b.input_ids.sizes().vec(), b.position_ids.defined(), b.segment_ids.defined()};
}

// One captured graph and its output.
struct Captured {
  std::unique_ptr<at::cuda::CUDAGraph> graph;
  at::Tensor loss;
  int64_t replays = 0;
};

class CudaMicroStepGraph final : public MicroStepGraph {
 public:
  explicit CudaMicroStepGraph(StepGraphSetup s)
      : s_(std::move(s)), stream_(c10::cuda::getStreamFromPool(false, s_.device.index())) {}

  std::optional<at::Tensor> run(const Batch& b, double factor) override {
    if (failed_) return eager();
    const auto key = key_of(b);
    if (!grads_unset()) {  // a later micro-step of the step: it adds into the gradients
      if (!first_.graph || accumulate_failed_ || key != key_ || !grads_are_the_graphs()) return eager();
      return accumulate_.graph ? std::optional(replay(accumulate_, b, factor)) : capture(accumulate_, b, factor);
    }
    if (first_.graph) return key == key_ ? std::optional(replay(first_, b, factor)) : eager();
    if (!warmed_) return warm_up(b, factor, key);
    // Only the warm-up's shape is captured, when it comes again: with unpacked rows (a shape a
    // batch) that may be never, and every micro-step then runs eagerly at its usual cost.
    if (key != key_) return eager();
    return capture(first_, b, factor);
  }

  std::string describe() const override {
    if (failed_) return fmt::format("CUDA graphs: capture failed ({}); every micro-step eager", failure_);
    if (!first_.graph) return fmt::format("CUDA graphs: nothing captured; {} eager micro-steps", eager_);
    return fmt::format("CUDA graphs: shape [{}], {} first-micro-step replays, {} accumulation replays, {} eager "
                       "micro-steps",
                       fmt::join(key_.shape, ", "), first_.replays, accumulate_.replays, eager_);
  }

 private:
  std::nullopt_t eager() {
    ++eager_;
    return std::nullopt;
  }

  bool grads_unset() const {
    for (const auto* p : s_.trainable)
      if (p->grad().defined()) return false;
    return true;
  }

  DeviceBatch to_device(const Batch& b) const {
    const auto on = [&](const at::Tensor& t) { return t.defined() ? t.to(s_.device) : t; };
    return {on(b.input_ids), on(b.labels), on(b.position_ids), on(b.segment_ids)};
  }

  // The first micro-step of a shape runs eagerly on the capture stream: what a capture cannot
  // do (cuBLAS handles and workspaces, autograd's device thread, the kernels' lazy state)
  // happens here, on the stream that will capture.
  at::Tensor warm_up(const Batch& b, double factor, const BatchKey& key) {
    c10::cuda::device_synchronize();
    at::Tensor loss;
    {
      const c10::cuda::CUDAStreamGuard guard(stream_);
      loss = s_.step(to_device(b), at::full({}, factor, at::TensorOptions().dtype(at::kFloat).device(s_.device)));
    }
    c10::cuda::device_synchronize();  // once: the caller's stream reads what this one wrote
    // The blocks cached for this stream would not serve the caller's stream: an eager
    // accumulation micro-step before the capture would reserve a second set of activations.
    c10::cuda::CUDACachingAllocator::emptyCache();
    warmed_ = true;
    key_ = key;
    ++eager_;
    return loss;
  }

  void fill(const Batch& b, double factor) {
    static_.input_ids.copy_(b.input_ids);
    static_.labels.copy_(b.labels);
    if (b.position_ids.defined()) static_.position_ids.copy_(b.position_ids);
    if (b.segment_ids.defined()) static_.segment_ids.copy_(b.segment_ids);
    factor_.fill_(factor);
  }

  // The first micro-step's graph writes the gradients (they are its outputs, attached to .grad
  // after each replay); the accumulation graph, captured while they are attached, adds into
  // them in place and shares the first one's memory pool (never replayed at the same time).
  std::optional<at::Tensor> capture(Captured& g, const Batch& b, double factor) {
    const bool first = &g == &first_;
    if (first) {
      static_ = to_device(b);  // the graphs' input buffers: each replay's batch is copied into them
      factor_ = at::empty({}, at::TensorOptions().dtype(at::kFloat).device(s_.device));
    }
    fill(b, factor);
    c10::cuda::device_synchronize();
    c10::cuda::CUDACachingAllocator::emptyCache();  // the eager steps' cached blocks: the graph has its own pool
    g.graph = std::make_unique<at::cuda::CUDAGraph>();
    try {
      const c10::cuda::CUDAStreamGuard guard(stream_);
      if (first) g.graph->capture_begin();
      else g.graph->capture_begin(first_.graph->pool());
      try {
        g.loss = s_.step(static_, factor_);
      } catch (...) {
        abandon_capture();
        throw;
      }
      g.graph->capture_end();
    } catch (const std::exception& e) {
      return give_up(g, e.what());
    }
    if (first)
      for (auto* p : s_.trainable) grads_.push_back(p->grad());  // the graph's outputs (undefined: unused)
    spdlog::info("CUDA graphs: captured the {} micro-step of shape [{}]", first ? "first" : "accumulating",
                 fmt::join(key_.shape, ", "));
    return replay(g, b, factor);
  }

  at::Tensor replay(Captured& g, const Batch& b, double factor) {
    fill(b, factor);
    g.graph->replay();
    if (&g == &first_)
      for (size_t i = 0; i < grads_.size(); ++i)
        if (grads_[i].defined()) s_.trainable[i]->mutable_grad() = grads_[i];
    ++g.replays;
    return g.loss;
  }

  // Whether .grad holds exactly the first graph's outputs (the accumulation graph adds into
  // those addresses; after an eager first micro-step they are other tensors).
  bool grads_are_the_graphs() const {
    for (size_t i = 0; i < grads_.size(); ++i)
      if (s_.trainable[i]->grad().unsafeGetTensorImpl() != grads_[i].unsafeGetTensorImpl()) return false;
    return true;
  }

  // An op inside the capture threw (most likely one that syncs with the host): end the
  // stream's capture so the stream works again.
  void abandon_capture() {
    cudaGraph_t g = nullptr;
    (void)cudaStreamEndCapture(stream_.stream(), &g);
    if (g) (void)cudaGraphDestroy(g);
    (void)cudaGetLastError();
  }

  // This micro-step, of which nothing ran, runs eagerly, and so does every later one that
  // would have used this graph (a failed first graph: the whole run).
  std::nullopt_t give_up(Captured& g, const std::string& what) {
    const bool first = &g == &first_;
    const auto why = what.substr(0, what.find('\n'));
    // Kept, not destroyed: a pool a capture never finished is not handed back.
    (void)g.graph.release();
    if (first) {
      failed_ = true;
      failure_ = why;
      for (auto* p : s_.trainable) p->mutable_grad() = at::Tensor();  // what the capture attached
    } else {
      accumulate_failed_ = true;  // the gradients the first graph wrote stay: this step adds to them
    }
    c10::cuda::device_synchronize();
    spdlog::warn("CUDA graphs: the {} micro-step could not be captured ({}); it stays eager (LF_CUDA_GRAPHS=0 "
                 "turns graphs off up front)",
                 first ? "first" : "accumulating", why);
    return eager();
  }

  StepGraphSetup s_;
  c10::cuda::CUDAStream stream_;
  Captured first_, accumulate_;
  BatchKey key_;
  DeviceBatch static_;
  at::Tensor factor_;
  std::vector<at::Tensor> grads_;  // the first graph's gradient outputs, by s_.trainable's order
  bool warmed_ = false, failed_ = false, accumulate_failed_ = false;
  std::string failure_;
  int64_t eager_ = 0;
};

}  // namespace

std::unique_ptr<MicroStepGraph> make_micro_step_graph(StepGraphSetup setup) {
  if (!step_graph_refusal(setup).empty()) return nullptr;
  return std::make_unique<CudaMicroStepGraph>(std::move(setup));
}

}  // namespace lf::train
