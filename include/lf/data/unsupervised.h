#pragma once
// The rows a predict run generates for, as LLaMA-Factory 0.9.5's UnsupervisedDatasetProcessor makes them (sft
// with predict_with_generate, its eval datasets): input_ids the prompt `<bos> X` (encode_oneturn of prompt +
// the response, or + an empty assistant turn when the example has no single response), labels the response
// `Y <eos>` (eos appended under efficient_eos templates), both cut by infer_seqlen's budget. Examples whose
// prompt count is even are dropped (LLaMA-Factory warns "Dropped invalid example"). Pure; thread-safe.
#include <cstdint>
#include <vector>

#include "lf/data/chat_template.h"
#include "lf/data/example.h"
#include "lf/data/supervised.h"

namespace lf {

// One row per kept example, in order: input_ids the prompt, labels the response (no -100).
std::vector<EncodedExample> encode_unsupervised(const std::vector<Example>& examples, const ChatTemplate& tmpl,
                                                int64_t cutoff_len);

}  // namespace lf
