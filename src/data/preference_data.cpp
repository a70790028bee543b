// The preference stages' rows from converted examples (pairwise.h), on the tokenizer threads.
#include <fmt/ranges.h>

#include <algorithm>

#include "lf/common/log.h"
#include "lf/data/data_args.h"
#include "lf/data/pairwise.h"
#include "lf/data/tokenized_dataset.h"
#include "parallel.h"
#include "tokenize_progress.h"

namespace lf {

bool pairwise_stage(const std::string& stage) { return stage == "dpo" || stage == "rm"; }
bool feedback_stage(const std::string& stage) { return stage == "kto"; }

TokenizedDataset encode_preference_examples(const std::vector<Example>& examples, const ChatTemplate& tmpl,
                                            const DataArgs& args) {
  spdlog::info("tokenizing {} examples on {} tokenizer threads", examples.size(),
               parallel_threads(examples.size(), args.preprocessing_num_workers, 16));
  std::vector<EncodedExample> rows;
  std::vector<int32_t> tags;
  if (pairwise_stage(args.stage)) {
    std::vector<EncodedExample> chosen(examples.size()), rejected(examples.size());
    std::vector<uint8_t> kept(examples.size(), 0);
    TokenizeProgress progress(examples.size(), "tokenizing");
    parallel_for(examples.size(), args.preprocessing_num_workers, [&](size_t i) {
      kept[i] = encode_pairwise(examples[i], tmpl, args.cutoff_len, chosen[i], rejected[i]) ? 1 : 0;
      progress.tick();
    }, 16);
    for (size_t i = 0; i < examples.size(); ++i) {
      if (!kept[i]) continue;
      rows.push_back(std::move(chosen[i]));
      rows.push_back(std::move(rejected[i]));
    }
    return TokenizedDataset::from_pairs(rows);
  }
  // KTO: the KL pairs are made within each preprocessing batch, as LLaMA-Factory's map batches.
  const size_t batch = static_cast<size_t>(std::max<int64_t>(1, args.preprocessing_batch_size));
  const size_t n_batches = (examples.size() + batch - 1) / batch;
  std::vector<std::vector<FeedbackRows>> parts(n_batches);
  parallel_for(n_batches, args.preprocessing_num_workers, [&](size_t b) {
    const std::vector<Example> slice(examples.begin() + static_cast<std::ptrdiff_t>(b * batch),
                                     examples.begin() + static_cast<std::ptrdiff_t>(std::min(examples.size(), (b + 1) * batch)));
    parts[b] = encode_feedback_batch(slice, tmpl, args.cutoff_len);
  }, 1);
  int64_t desirable = 0;
  for (auto& part : parts)
    for (auto& r : part) {
      rows.push_back(std::move(r.target));
      rows.push_back(std::move(r.kl));
      tags.push_back(r.desirable ? 1 : 0);
      desirable += r.desirable;
    }
  if (!tags.empty() && (desirable == 0 || desirable == static_cast<int64_t>(tags.size())))
    spdlog::warn("the KTO dataset {} holds only {} examples (as LLaMA-Factory warns: \"Your dataset only has one "
                 "preference type\")", fmt::join(args.dataset, ","), desirable == 0 ? "undesirable" : "desirable");
  return TokenizedDataset::from_pairs(rows, tags);
}

}  // namespace lf
