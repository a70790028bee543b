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

// The batch's targets: the flat indices b*(T-1)+j of its shifted labels that are not ignored [M] (host), their
// tokens [M] and the batch's position ids (undefined: none), both on the model's device.
struct BatchTargets {
  at::Tensor flat, targets, position_ids;
};
BatchTargets batch_targets(const ObjectiveContext& ctx, const Batch& b);

// The model's forward (through the strategy's unit hooks) up to its head unit, where `loss` gets the final-norm
// rows at the targets [M,C] and the head's weight [V,C] and returns the 0-dim fp32 loss. A batch without targets
// gives a zero that keeps the graph (a rank's idle micro-step still runs the collectives).
using RowsLoss = std::function<at::Tensor(const at::Tensor& rows, const at::Tensor& w)>;
at::Tensor loss_at_targets(const ObjectiveContext& ctx, const Batch& b, const BatchTargets& t, const RowsLoss& loss);

}  // namespace lf::train
