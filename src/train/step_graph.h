#pragma once
// CUDA graphs for the micro-step (issue 15). Why: at world size 1 the small models are
// launch-bound — the 0.5B LoRA trace had 65% of the GPU span idle while the host walked
// autograd's ~thousands of small ops — and a replayed graph launches them all at once.
//
// What is captured: one micro-batch's forward, its loss (every position through the head,
// ignored ones masked: lm_head_loss_sum_all_rows, so shapes depend on [B,T] only) and its
// backward of loss x factor (the step's loss scale / target count, a device scalar refilled
// before each replay). The run's first micro-step runs eagerly on the graph's stream (warm-up:
// cuBLAS handles, autograd's device thread, lazy kernel state); after it each batch shape is
// captured when first seen and replayed from then on (unpacked rows are padded to
// the plan's kernels.cuda_graph_bucket, so the shapes are few). The run's first graph writes the gradients as
// its outputs: each replay writes them into the same tensors, which are put back into the
// parameters' .grad after it (the optimizer's zero_grad drops them). Every other graph adds
// into those tensors: another shape's first-micro-step graph zeroes them first, and a step's
// further micro-steps (gradient accumulation) replay an accumulating graph of their shape. All
// graphs share one memory pool (their replays never overlap).
//
// Where it applies (make_micro_step_graph returns nullptr elsewhere, and the CPU build
// always): a CUDA device, one process (no unit hooks, no gradient routes), no dropout (the
// generator would advance differently from the eager run's), no neat_packing (each batch's
// sequence offsets are read on the host and size the attention's launch), mixture-of-experts
// layers only on the grouped GEMM (routing, permutation and group offsets stay on the device; the
// load-balancing loss is captured with them, its value a second output), LF_CUDA_GRAPHS not
// 0. A capture that fails (an op that syncs with the host) leaves the run eager, with one warning.
// Threading: the training thread only.
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "lf/train/batch.h"

namespace lf::train {

// A micro-batch's tensors on the device (position_ids / segment_ids / attention_mask may be undefined;
// attention_mask: the load-balancing loss's real tokens, for mixture-of-experts models).
struct DeviceBatch {
  at::Tensor input_ids, labels, position_ids, segment_ids, attention_mask;
};

// Forward, loss and backward of one micro-batch: returns the loss sum (0-dim fp32; with the load-balancing
// loss on, [loss sum, load-balancing loss] in fp64) after backward of loss x factor (factor: a 0-dim fp32
// device tensor). What the graph records.
using MicroStepFn = std::function<at::Tensor(const DeviceBatch&, const at::Tensor& factor)>;

class MicroStepGraph {
 public:
  virtual ~MicroStepGraph() = default;
  // Runs micro-step `b` (graphed, or eagerly as the warm-up) and returns its loss sum, or
  // nullopt when the caller must run it eagerly itself (another shape, accumulation, no graph).
  virtual std::optional<at::Tensor> run(const Batch& b, double factor) = 0;
  // "CUDA graphs: 2 shapes [4, 2048] [2, 2048], 118 first-micro-step replays, ..." for the perf line.
  virtual std::string describe() const = 0;
};

struct StepGraphSetup {
  c10::Device device = c10::Device(c10::DeviceType::CPU);
  std::vector<at::Tensor*> trainable;  // the parameters whose .grad the graph writes
  bool single_process = false;         // world 1, no unit hooks, no gradient routes
  bool dropout = false;                // any dropout in training (LoRA's)
  bool neat_packing = false;           // per-batch sequence offsets (varlen attention)
  // Mixture-of-experts layers whose per-expert GEMMs read the routing on the host (no grouped GEMM: a CPU,
  // LF_GROUPED_MM=0, not bf16). The grouped GEMM reads its group offsets on the device: capturable.
  bool host_routed_experts = false;
  bool aux_under_scaler = false;       // the load-balancing loss under fp16's changing loss scale
  bool requested = true;               // the plan's kernels.cuda_graphs (LF_CUDA_GRAPHS=0: off, for comparison)
  MicroStepFn step;
};

// Why graphs do not apply to this run ("" when they do), for the log.
std::string step_graph_refusal(const StepGraphSetup& s);
std::unique_ptr<MicroStepGraph> make_micro_step_graph(StepGraphSetup setup);

}  // namespace lf::train
