#pragma once
// DESIGN "Training semantics / Order": each epoch is one global permutation of the
// examples from (seed, epoch), torch.randperm(n, generator=manual_seed(seed + epoch))
// exactly as torch's DistributedSampler draws it, so Python tools reproduce it. An
// optimizer step takes the next global batch of micro_batch x accumulation x world
// examples; within it, micro-step k covers examples [k*mb*world, (k+1)*mb*world) and
// rank r takes [r*mb, (r+1)*mb) of those. The last global batch of an epoch may be
// short (HF: dataloaders keep the last partial batch, the last step accumulates fewer
// micro-batches). Pure functions; thread-safe.
#include <cstdint>
#include <vector>

namespace lf::train {

struct StepLayout {
  int64_t micro_batch = 1;
  int64_t accumulation = 1;
  int64_t world = 1;
  int64_t global_batch() const { return micro_batch * accumulation * world; }
};

std::vector<int64_t> epoch_permutation(int64_t num_examples, uint64_t seed, int64_t epoch);

// ceil(n / global_batch): HF's num_update_steps_per_epoch for world 1.
int64_t steps_per_epoch(int64_t num_examples, const StepLayout& layout);

// The example indices of rank `rank` for optimizer step `step_in_epoch`, one vector
// per micro-step (empty vectors are dropped at the end; a rank may get fewer
// micro-steps than another only in the epoch's last step).
std::vector<std::vector<int64_t>> rank_micro_batches(const std::vector<int64_t>& permutation,
                                                     int64_t step_in_epoch, const StepLayout& layout,
                                                     int64_t rank);

// All examples of the step (every rank), for counting its target tokens before any
// backward (the loss denominator).
std::vector<int64_t> step_examples(const std::vector<int64_t>& permutation, int64_t step_in_epoch,
                                   const StepLayout& layout);

}  // namespace lf::train
