#pragma once
// The reference model's log-probabilities for DPO and KTO, computed once before step 1 and kept per
// row (a few bytes an example), instead of a reference forward in every step:
//   - LoRA: the model with its adapters switched off (model/adapters_off.h): peft's disable_adapter(),
//     what LLaMA-Factory's trainers run when no ref_model is given; no second copy;
//   - full / freeze: the model as it starts, before any update (LLaMA-Factory loads the same weights
//     into a frozen copy); no second copy either, and it is sharded like the policy under ZeRO-3
//     because it is the policy's own forward (the strategy's unit hooks).
// The reference is fixed for the run, so its log-probabilities are too: one forward per example for
// the whole run instead of one per example per epoch, no reference weights held beside the policy.
// The training examples go in the first epoch's micro-batches, each rank its own (every rank running
// every round under ZeRO-3), and the results are summed over ranks: each row is computed exactly as the
// policy's first forward of it computes it (same rows, same padding, same weights), so the first
// step's rewards are 0 as LLaMA-Factory's are, to the last bit. Internal to lf_train.
#include <vector>

#include "objective.h"

namespace lf::train {

// Per row of `data` (the summed target log-probabilities of row r), over this rank's `batches` (example
// indices; an empty one: a round this rank has nothing in, run empty when the strategy needs every
// forward), collated as training collates them: pairwise, a pair's two rows together (chosen rows then
// rejected rows); otherwise (KTO) the target rows and the KL rows apart.
// `ref_model`: a separate reference (reference_model.h), whole on this rank: its forwards hold no
// collective, so a round this rank has nothing in is skipped.
std::vector<double> reference_logps(const ObjectiveContext& ctx, const TokenizedDataset& data,
                                    const std::vector<std::vector<int64_t>>& batches, bool pairwise,
                                    model::CausalLM* ref_model = nullptr);

// The examples in `batches`: what a rank's reference pass computes (the first epoch's steps that the run
// takes: fewer than the dataset's when max_steps ends the run inside it).
int64_t examples_in(const std::vector<std::vector<int64_t>>& batches);

// This rank's evaluation batches: `batch_examples` consecutive examples, batch k to rank k % world, the
// rounds padded with empty batches to the same count on every rank.
std::vector<std::vector<int64_t>> strided_batches(int64_t num_examples, int64_t batch_examples, int64_t rank,
                                                  int64_t world);

}  // namespace lf::train
