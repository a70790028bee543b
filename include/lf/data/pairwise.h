#pragma once
// The preference stages' data as LLaMA-Factory 0.9.5 prepares it (stage dpo and rm: a ranking dataset
// through PairwiseDatasetProcessor; stage kto: a dataset with a kto_tag column through
// FeedbackDatasetProcessor). Each example becomes two rows of the tokenized dataset
// (TokenizedDataset::group_size() == 2), in this order:
//   dpo / rm   row 2i: prompt + chosen,   row 2i+1: prompt + rejected
//   kto        row 2i: prompt + response, row 2i+1: the KL row (this prompt with the response of the
//              example before it in its preprocessing batch: TRL's mismatched pair), tag(i): desirable
// Labels are -100 on the prompt. Cutoff rules (processor_utils.infer_seqlen):
//   pairwise   one budget for the prompt and the longer response; both responses cut to it
//   feedback   the target and the KL row each get their own budget
// Efficient-eos templates append eos to each response. Pure functions; thread-safe.
#include <cstdint>
#include <string>
#include <vector>

#include "lf/data/chat_template.h"
#include "lf/data/example.h"
#include "lf/data/supervised.h"

namespace lf {

// False (nothing encoded) for the examples LLaMA-Factory drops: an even prompt count or fewer than
// two responses (the converter refuses those with an error first).
bool encode_pairwise(const Example& example, const ChatTemplate& tmpl, int64_t cutoff_len, EncodedExample& chosen,
                     EncodedExample& rejected);

struct FeedbackRows {
  EncodedExample target, kl;
  bool desirable = true;
};

// FeedbackDatasetProcessor.preprocess_dataset over one preprocessing batch (preprocessing_batch_size
// examples, as datasets.map hands them): example i's KL response is example i-1's response (the first
// takes the batch's last). Dropped examples leave no entry.
std::vector<FeedbackRows> encode_feedback_batch(const std::vector<Example>& batch, const ChatTemplate& tmpl,
                                                int64_t cutoff_len);

}  // namespace lf

namespace lf {

struct DataArgs;
class TokenizedDataset;

// Whether `stage` trains on pairs (dpo, rm: ranking datasets) or on tagged examples (kto).
bool pairwise_stage(const std::string& stage);
bool feedback_stage(const std::string& stage);

// The converted examples of a preference stage as its rows (the header above); preprocessing_batch_size
// bounds KTO's KL pairing as LLaMA-Factory's datasets.map batches do. Tokenizes on
// preprocessing_num_workers threads.
TokenizedDataset encode_preference_examples(const std::vector<Example>& examples, const ChatTemplate& tmpl,
                                            const DataArgs& args);

}  // namespace lf
