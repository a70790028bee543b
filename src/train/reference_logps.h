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
// The examples are spread over the ranks (batch k to rank k % world, every rank running every round
// under ZeRO-3) and the results summed over ranks. Internal to lf_train.
#include <vector>

#include "objective.h"

namespace lf::train {

// Per row of `data` (rows_logps[r]: the summed target log-probabilities of row r), batches of
// `batch_examples` examples collated as training collates them: pairwise, a pair's two rows together
// (chosen rows then rejected rows); otherwise (KTO) the target rows and the KL rows apart.
std::vector<double> reference_logps(const ObjectiveContext& ctx, const TokenizedDataset& data,
                                    int64_t batch_examples, bool pairwise);

}  // namespace lf::train
