#pragma once
// The micro-steps of an objective whose loss is one function of the collated micro-batch (sft's ASFT, DFT and
// EAFT: asft_objective.cpp, token_weighted_objective.cpp): collate the examples, the loss, the backward of
// loss * factor. The idle micro-step runs the same loss on a batch without targets (batch.h no_target_batch), so
// a rank with no example left still runs the forward's and backward's collectives (ZeRO-3's gathers).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "lf/train/batch.h"
#include "objective.h"

namespace lf::train {

class PhaseClock;

// The micro-batch's loss: 0-dim fp32 on the device, with grad (the step divides it, `factor`).
using BatchLoss = std::function<at::Tensor(const Batch&)>;

// Collate `examples` of ctx.train, `loss` of them (the forward phase), backward of loss * factor (the backward
// phase); the MicroStep carries the detached, unscaled loss and the batch's sizes.
MicroStep batch_loss_micro_step(const ObjectiveContext& ctx, const std::vector<int64_t>& examples, double factor,
                                PhaseClock& phases, const BatchLoss& loss);

// `loss` of a batch without targets, and its backward when it has a graph (zero gradients).
void batch_loss_idle_micro_step(const ObjectiveContext& ctx, const BatchLoss& loss);

}  // namespace lf::train
