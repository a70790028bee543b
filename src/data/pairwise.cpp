#include "lf/data/pairwise.h"

#include <algorithm>

namespace lf {
namespace {

// prompt + [response] through Template.encode_oneturn; eos appended under efficient_eos.
std::pair<std::vector<int32_t>, std::vector<int32_t>> encode_turn(const Example& ex, const Message& response,
                                                                  const ChatTemplate& tmpl) {
  std::vector<Message> messages = ex.prompt;
  messages.push_back(response);
  auto ids = tmpl.encode_oneturn(messages, ex.system, ex.tools, ex.origin);
  if (tmpl.spec().efficient_eos) ids.second.push_back(tmpl.eos_id());
  return ids;
}

// prompt[:source_len] + response[:target_len], labels -100 on the prompt.
EncodedExample join(const std::vector<int32_t>& prompt, const std::vector<int32_t>& response, int64_t source_len,
                    int64_t target_len) {
  EncodedExample e;
  const auto s = static_cast<size_t>(source_len), t = std::min(static_cast<size_t>(target_len), response.size());
  e.input_ids.assign(prompt.begin(), prompt.begin() + static_cast<std::ptrdiff_t>(s));
  e.labels.assign(s, kIgnoreIndex);
  e.input_ids.insert(e.input_ids.end(), response.begin(), response.begin() + static_cast<std::ptrdiff_t>(t));
  e.labels.insert(e.labels.end(), response.begin(), response.begin() + static_cast<std::ptrdiff_t>(t));
  return e;
}

bool valid(const Example& ex) { return ex.prompt.size() % 2 == 1 && ex.response.size() >= 2; }

// FeedbackDatasetProcessor._encode_data_example: the response (or KL response) is the non-empty one of
// the pair the converter made ([text, ""] desirable, ["", text] undesirable).
const Message& filled(const std::vector<Message>& response) {
  return !response[0].content.empty() ? response[0] : response[1];
}

EncodedExample encode_cut(const Example& ex, const Message& response, const ChatTemplate& tmpl, int64_t cutoff_len) {
  const auto [prompt, reply] = encode_turn(ex, response, tmpl);
  const auto [source_len, target_len] =
      infer_seqlen(static_cast<int64_t>(prompt.size()), static_cast<int64_t>(reply.size()), cutoff_len);
  return join(prompt, reply, source_len, target_len);
}

}  // namespace

bool encode_pairwise(const Example& example, const ChatTemplate& tmpl, int64_t cutoff_len, EncodedExample& chosen,
                     EncodedExample& rejected) {
  if (!valid(example)) return false;
  const auto [prompt, chosen_ids] = encode_turn(example, example.response[0], tmpl);
  const auto rejected_ids = encode_turn(example, example.response[1], tmpl).second;
  // "consider the response is more important": one budget for the prompt and the longer response.
  const auto [source_len, target_len] = infer_seqlen(
      static_cast<int64_t>(prompt.size()), static_cast<int64_t>(std::max(chosen_ids.size(), rejected_ids.size())),
      cutoff_len);
  chosen = join(prompt, chosen_ids, source_len, target_len);
  rejected = join(prompt, rejected_ids, source_len, target_len);
  return true;
}

std::vector<FeedbackRows> encode_feedback_batch(const std::vector<Example>& batch, const ChatTemplate& tmpl,
                                                int64_t cutoff_len) {
  std::vector<FeedbackRows> out;
  out.reserve(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!valid(batch[i])) continue;
    // kl_response = [responses[-1]] + responses[:-1]: the example before this one in the batch.
    const Example& other = batch[i == 0 ? batch.size() - 1 : i - 1];
    if (other.response.size() < 2) continue;  // LLaMA-Factory fails on such a batch; the converter refuses it
    FeedbackRows rows;
    rows.desirable = !batch[i].response[0].content.empty();
    rows.target = encode_cut(batch[i], filled(batch[i].response), tmpl, cutoff_len);
    rows.kl = encode_cut(batch[i], filled(other.response), tmpl, cutoff_len);
    out.push_back(std::move(rows));
  }
  return out;
}

}  // namespace lf
