#include "lf/data/supervised.h"

#include <algorithm>
#include <map>

namespace lf {

std::pair<int64_t, int64_t> infer_seqlen(int64_t source_len, int64_t target_len, int64_t cutoff_len) {
  int64_t max_target_len;
  if (target_len * 2 < cutoff_len) {
    max_target_len = cutoff_len;
  } else if (source_len * 2 < cutoff_len) {
    max_target_len = cutoff_len - source_len;
  } else {
    // Python: int(cutoff_len * (target_len / (source_len + target_len))), float math.
    max_target_len = static_cast<int64_t>(static_cast<double>(cutoff_len) *
                                          (static_cast<double>(target_len) /
                                           static_cast<double>(source_len + target_len)));
  }
  int64_t new_target_len = std::min(max_target_len, target_len);
  int64_t max_source_len = std::max<int64_t>(cutoff_len - new_target_len, 0);
  int64_t new_source_len = std::min(max_source_len, source_len);
  return {new_source_len, new_target_len};
}

bool encode_supervised(const Example& example, const ChatTemplate& tmpl,
                       const SupervisedOptions& options, EncodedExample& out) {
  out.input_ids.clear();
  out.labels.clear();
  if (example.prompt.size() % 2 != 1 || example.response.size() != 1) return false;
  std::vector<Message> messages = example.prompt;
  messages.push_back(example.response[0]);
  auto pairs = tmpl.encode_multiturn(messages, example.system, example.tools, example.origin,
                                     options.mask_history);
  const bool efficient_eos = tmpl.spec().efficient_eos;
  int64_t total_length = efficient_eos ? 1 : 0;
  if (options.mask_history) std::reverse(pairs.begin(), pairs.end());
  // With mask_history turns are built back to front and prepended.
  std::vector<std::vector<int32_t>> ids_parts, label_parts;
  for (size_t turn = 0; turn < pairs.size(); ++turn) {
    if (total_length >= options.cutoff_len) break;
    auto& [source, target] = pairs[turn];
    auto [source_len, target_len] = infer_seqlen(static_cast<int64_t>(source.size()),
                                                 static_cast<int64_t>(target.size()),
                                                 options.cutoff_len - total_length);
    source.resize(source_len);
    target.resize(target_len);
    total_length += source_len + target_len;

    std::vector<int32_t> source_label;
    if (options.train_on_prompt) {
      source_label = source;
    } else if (efficient_eos && turn != 0) {
      source_label.assign(source_len, kIgnoreIndex);
      if (source_len > 0) source_label[0] = tmpl.eos_id();
    } else {
      source_label.assign(source_len, kIgnoreIndex);
    }
    std::vector<int32_t> target_label =
        options.mask_history && turn != 0 ? std::vector<int32_t>(target_len, kIgnoreIndex) : target;

    std::vector<int32_t> ids = std::move(source);
    ids.insert(ids.end(), target.begin(), target.end());
    source_label.insert(source_label.end(), target_label.begin(), target_label.end());
    ids_parts.push_back(std::move(ids));
    label_parts.push_back(std::move(source_label));
  }
  if (options.mask_history) {
    std::reverse(ids_parts.begin(), ids_parts.end());
    std::reverse(label_parts.begin(), label_parts.end());
  }
  for (size_t k = 0; k < ids_parts.size(); ++k) {
    out.input_ids.insert(out.input_ids.end(), ids_parts[k].begin(), ids_parts[k].end());
    out.labels.insert(out.labels.end(), label_parts[k].begin(), label_parts[k].end());
  }
  if (efficient_eos) {
    out.input_ids.push_back(tmpl.eos_id());
    out.labels.push_back(tmpl.eos_id());
  }
  return true;
}

std::vector<EncodedExample> pack_examples(std::vector<EncodedExample> examples, int64_t cutoff_len,
                                          int32_t pad_id) {
  // greedy_knapsack over lengths; equal lengths are taken last-in first-out,
  // as length2indexes[length].pop() does.
  std::vector<int64_t> lengths;
  std::map<int64_t, std::vector<size_t>> by_length;
  std::vector<size_t> kept;
  for (size_t i = 0; i < examples.size(); ++i) {
    int64_t len = static_cast<int64_t>(examples[i].input_ids.size());
    if (len > cutoff_len) continue;  // "Dropped lengthy example"
    by_length[len].push_back(i);
    lengths.push_back(len);
  }
  std::sort(lengths.begin(), lengths.end());
  std::vector<EncodedExample> packs;
  while (!lengths.empty()) {
    EncodedExample pack;
    int64_t remaining = cutoff_len;
    int32_t segment = 0;
    while (true) {
      auto it = std::upper_bound(lengths.begin(), lengths.end(), remaining);
      if (it == lengths.begin()) break;
      --it;
      int64_t len = *it;
      remaining -= len;
      lengths.erase(it);
      auto& idx = by_length[len];
      const EncodedExample& ex = examples[idx.back()];
      idx.pop_back();
      pack.input_ids.insert(pack.input_ids.end(), ex.input_ids.begin(), ex.input_ids.end());
      pack.labels.insert(pack.labels.end(), ex.labels.begin(), ex.labels.end());
      pack.segment_ids.insert(pack.segment_ids.end(), ex.input_ids.size(), ++segment);
    }
    int64_t pad = cutoff_len + 1 - static_cast<int64_t>(pack.input_ids.size());
    if (pad > 0) {
      pack.input_ids.insert(pack.input_ids.end(), pad, pad_id);
      pack.labels.insert(pack.labels.end(), pad, kIgnoreIndex);
      pack.segment_ids.insert(pack.segment_ids.end(), pad, 0);
    }
    packs.push_back(std::move(pack));
  }
  return packs;
}

}  // namespace lf
