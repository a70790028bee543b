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
#include "lf/model/host_copies.h"

namespace lf::train {
namespace {

// What a captured graph is valid for: input_ids' [B,T] and which optional tensors exist.
struct BatchKey {
  std::vector<int64_t> shape;
  bool positions = false, segments = false, mask = false;
  bool operator==(const BatchKey&) const = default;
};

BatchKey key_of(const Batch& b) {
  return {b.input_ids.sizes().vec(), b.position_ids.defined(), b.segment_ids.defined(), b.attention_mask.defined()};
}

// One captured graph and its output.
struct Captured {
  std::unique_ptr<at::cuda::CUDAGraph> graph;
  at::Tensor loss;
  int64_t replays = 0;
};

// The graphs of one batch shape: the first micro-step's and the accumulating one, and the
// input buffers each replay's batch is copied into.
struct Bucket {
  BatchKey key;
  DeviceBatch inputs;
  Captured first, accumulate;
};

// Shapes beyond this many run eagerly (rows are padded to graph_bucket_width(), so a run's
// shapes are the micro-batch sizes times cutoff_len / that width: 16 for 2048 / 128).
constexpr size_t kMaxBuckets = 32;

class CudaMicroStepGraph final : public MicroStepGraph {
 public:
  explicit CudaMicroStepGraph(StepGraphSetup s)
      : s_(std::move(s)), stream_(c10::cuda::getStreamFromPool(false, s_.device.index())) {}

  std::optional<at::Tensor> run(const Batch& b, double factor) override {
    if (failed_) return eager();
    const auto key = key_of(b);
    Bucket* k = find(key);
    if (!grads_unset()) {  // a later micro-step of the step: it adds into the gradients
      if (grads_.empty() || !grads_are_the_graphs()) return eager();
      if (!k && !(k = add(b, key))) return eager();
      if (k->accumulate.graph) return replay(*k, k->accumulate, b, factor);
      return accumulate_failed_ ? eager() : capture(*k, k->accumulate, b, factor);
    }
    if (k && k->first.graph) return replay(*k, k->first, b, factor);
    if (!warmed_) return warm_up(b, factor);
    if (!k && !(k = add(b, key))) return eager_first();
    return capture(*k, k->first, b, factor);
  }

  std::string describe() const override {
    if (failed_) return fmt::format("CUDA graphs: capture failed ({}); every micro-step eager", failure_);
    if (buckets_.empty()) return fmt::format("CUDA graphs: nothing captured; {} eager micro-steps", eager_);
    int64_t first = 0, accumulate = 0;
    std::vector<std::string> shapes;
    for (const auto& k : buckets_) {
      first += k->first.replays;
      accumulate += k->accumulate.replays;
      shapes.push_back(fmt::format("[{}]", fmt::join(k->key.shape, ", ")));
    }
    return fmt::format("CUDA graphs: {} shape{} {}, {} first-micro-step replays, {} accumulation replays, {} eager "
                       "micro-steps",
                       buckets_.size(), buckets_.size() == 1 ? "" : "s", fmt::join(shapes, " "), first, accumulate,
                       eager_);
  }

 private:
  std::nullopt_t eager() {
    ++eager_;
    return std::nullopt;
  }

  // A first micro-step the caller runs eagerly once graphs exist: it accumulates into the
  // graphs' gradient tensors, zeroed here (no second set of gradients in memory, and the
  // accumulation graph of its shape may still replay after it).
  std::nullopt_t eager_first() {
    lend_grads(/*zero=*/true);
    return eager();
  }

  void lend_grads(bool zero) {
    if (zero) zero_grads();
    for (size_t i = 0; i < grads_.size(); ++i)
      if (grads_[i].defined()) s_.trainable[i]->mutable_grad() = grads_[i];
  }

  void zero_grads() {  // one multi-tensor kernel
    std::vector<at::Tensor> defined;
    for (const auto& g : grads_)
      if (g.defined()) defined.push_back(g);
    if (!defined.empty()) at::_foreach_zero_(defined);
  }

  bool grads_unset() const {
    for (const auto* p : s_.trainable)
      if (p->grad().defined()) return false;
    return true;
  }

  Bucket* find(const BatchKey& key) {
    for (auto& k : buckets_)
      if (k->key == key) return k.get();
    return nullptr;
  }

  Bucket* add(const Batch& b, const BatchKey& key) {
    if (buckets_.size() >= kMaxBuckets) return nullptr;
    auto k = std::make_unique<Bucket>();
    k->key = key;
    k->inputs = to_device(b);
    buckets_.push_back(std::move(k));
    return buckets_.back().get();
  }

  DeviceBatch to_device(const Batch& b) const {
    const auto on = [&](const at::Tensor& t) { return model::to_device(t, s_.device); };
    return {on(b.input_ids), on(b.labels), on(b.position_ids), on(b.segment_ids), on(b.attention_mask)};
  }

  // The run's first micro-step runs eagerly on the capture stream: what a capture cannot do
  // (cuBLAS handles and workspaces, autograd's device thread, the kernels' lazy state) happens
  // here, on the stream that will capture. Later shapes are captured when first seen.
  at::Tensor warm_up(const Batch& b, double factor) {
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
    factor_ = at::empty({}, at::TensorOptions().dtype(at::kFloat).device(s_.device));
    ++eager_;
    return loss;
  }

  void fill(Bucket& k, const Batch& b, double factor) {
    model::copy_from_host(k.inputs.input_ids, b.input_ids);
    model::copy_from_host(k.inputs.labels, b.labels);
    if (b.position_ids.defined()) model::copy_from_host(k.inputs.position_ids, b.position_ids);
    if (b.segment_ids.defined()) model::copy_from_host(k.inputs.segment_ids, b.segment_ids);
    if (b.attention_mask.defined()) model::copy_from_host(k.inputs.attention_mask, b.attention_mask);
    factor_.fill_(factor);
  }

  // The run's first graph writes the gradients: they are its outputs, attached to .grad after
  // each replay. Every later graph adds into those tensors in place (a later shape's first
  // micro-step zeroes them inside its graph first), and all share the first graph's memory pool
  // (replays never overlap; the outputs that outlive a replay, losses and gradients, stay held).
  std::optional<at::Tensor> capture(Bucket& k, Captured& g, const Batch& b, double factor) {
    const bool first = &g == &k.first, writes_grads = first && grads_.empty();
    fill(k, b, factor);
    if (first && !writes_grads) lend_grads(/*zero=*/false);  // zeroed inside the graph
    c10::cuda::device_synchronize();
    c10::cuda::CUDACachingAllocator::emptyCache();  // the eager steps' cached blocks: the graphs have their own pool
    g.graph = std::make_unique<at::cuda::CUDAGraph>();
    try {
      const c10::cuda::CUDAStreamGuard guard(stream_);
      if (pool_) g.graph->capture_begin(*pool_);
      else g.graph->capture_begin();
      try {
        if (first && !writes_grads) zero_grads();
        g.loss = s_.step(k.inputs, factor_);
      } catch (...) {
        abandon_capture();
        throw;
      }
      g.graph->capture_end();
    } catch (const std::exception& e) {
      return give_up(first, e.what());
    }
    if (!pool_) pool_ = g.graph->pool();
    if (writes_grads)
      for (auto* p : s_.trainable) grads_.push_back(p->grad());  // the graph's outputs (undefined: unused)
    spdlog::info("CUDA graphs: captured the {} micro-step of shape [{}]", first ? "first" : "accumulating",
                 fmt::join(k.key.shape, ", "));
    return replay(k, g, b, factor);
  }

  at::Tensor replay(Bucket& k, Captured& g, const Batch& b, double factor) {
    fill(k, b, factor);
    g.graph->replay();
    if (&g == &k.first) lend_grads(/*zero=*/false);
    ++g.replays;
    return g.loss;
  }

  // Whether .grad holds exactly the graphs' gradient tensors (the accumulation graphs add into
  // those addresses; after an eager micro-step that did not borrow them they are other tensors).
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

  // This micro-step, of which nothing ran, runs eagerly. A failed first micro-step leaves the
  // whole run eager (the gradients the capture attached hold nothing); a failed accumulating
  // one, the accumulation micro-steps (the gradients the step's first micro-step wrote stay).
  std::nullopt_t give_up(bool first, const std::string& what) {
    const auto why = what.substr(0, what.find('\n'));
    if (first) {
      failed_ = true;
      failure_ = why;
      for (auto* p : s_.trainable) p->mutable_grad() = at::Tensor();
    } else {
      accumulate_failed_ = true;
    }
    c10::cuda::device_synchronize();
    spdlog::warn("CUDA graphs: the {} micro-step could not be captured ({}); it stays eager (LF_CUDA_GRAPHS=0 "
                 "turns graphs off up front)",
                 first ? "first" : "accumulating", why);
    return eager();
  }

  StepGraphSetup s_;
  c10::cuda::CUDAStream stream_;
  // Graphs are kept, failed captures too: a pool a capture never finished is not handed back.
  std::vector<std::unique_ptr<Bucket>> buckets_;
  std::optional<c10::MempoolId_t> pool_;  // the first graph's, shared by the others
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
