// UnsupervisedDatasetProcessor._encode_data_example and preprocess_dataset (lf/data/unsupervised.h).
#include "lf/data/unsupervised.h"

namespace lf {

std::vector<EncodedExample> encode_unsupervised(const std::vector<Example>& examples, const ChatTemplate& tmpl,
                                                int64_t cutoff_len) {
  std::vector<EncodedExample> out;
  out.reserve(examples.size());
  for (const auto& ex : examples) {
    if (ex.prompt.size() % 2 != 1) continue;
    std::vector<Message> messages = ex.prompt;
    if (ex.response.size() == 1)
      messages.push_back(ex.response[0]);
    else
      messages.push_back({Role::kAssistant, ""});
    auto [prompt, response] = tmpl.encode_oneturn(messages, ex.system, ex.tools, ex.origin);
    if (tmpl.spec().efficient_eos) response.push_back(tmpl.eos_id());
    const auto [source_len, target_len] =
        infer_seqlen(static_cast<int64_t>(prompt.size()), static_cast<int64_t>(response.size()), cutoff_len);
    EncodedExample e;
    e.input_ids.assign(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(source_len));
    e.labels.assign(response.begin(), response.begin() + static_cast<std::ptrdiff_t>(target_len));
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace lf
