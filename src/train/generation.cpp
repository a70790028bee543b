// transformers' GenerationMixin._sample for num_beams 1 (lf/train/generation.h), over the key/value cache.
#include "lf/train/generation.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <limits>

#include "lf/common/error.h"
#include "lf/model/kv_decode.h"

namespace lf::train {

void process_logits(at::Tensor& scores, const at::Tensor& seen, const GenerationConfig& c) {
  const double inf = std::numeric_limits<double>::infinity();
  if (c.repetition_penalty != 1.0) {  // RepetitionPenaltyLogitsProcessor
    auto s = scores.gather(1, seen);
    s = at::where(s < 0, s * c.repetition_penalty, s / c.repetition_penalty);
    scores.scatter_(1, seen, s);
  }
  if (!c.do_sample) return;
  if (c.temperature != 1.0) scores.div_(c.temperature);  // TemperatureLogitsWarper
  if (c.top_k > 0) {                                     // TopKLogitsWarper (min_tokens_to_keep 1)
    const int64_t k = std::min<int64_t>(c.top_k, scores.size(-1));
    const auto kth = std::get<0>(at::topk(scores, k)).narrow(-1, k - 1, 1);
    scores.masked_fill_(scores < kth, -inf);
  }
  if (c.top_p < 1.0) {  // TopPLogitsWarper: drop the low tail whose mass is <= 1 - top_p, keep the top token
    auto [sorted, order] = at::sort(scores, /*dim=*/-1, /*descending=*/false);
    auto remove = sorted.softmax(-1).cumsum(-1) <= (1 - c.top_p);
    remove.narrow(-1, remove.size(-1) - 1, 1).fill_(false);
    scores.masked_fill_(remove.scatter(1, order, remove), -inf);
  }
}

std::vector<std::vector<int32_t>> generate(const model::CausalLM& model, const std::vector<std::vector<int32_t>>& prompts,
                                           const GenerationConfig& c, at::Generator* gen) {
  c10::NoGradGuard no_grad;
  const int64_t b = static_cast<int64_t>(prompts.size());
  if (b == 0) return {};
  int64_t longest = 0;
  for (const auto& p : prompts) {
    LF_CHECK(!p.empty(), ConfigError, "generate: an empty prompt");
    longest = std::max<int64_t>(longest, static_cast<int64_t>(p.size()));
  }
  const auto device = model.lm_head_weight().device();
  const auto cpu_long = at::TensorOptions().dtype(at::kLong);
  // Left padding: [B,P] ids and the mask of real tokens.
  auto ids = at::full({b, longest}, c.pad_id, cpu_long);
  auto real = at::zeros({b, longest}, cpu_long.dtype(at::kBool));
  for (int64_t r = 0; r < b; ++r) {
    const auto& p = prompts[static_cast<size_t>(r)];
    const int64_t off = longest - static_cast<int64_t>(p.size());
    for (size_t j = 0; j < p.size(); ++j) ids[r][off + static_cast<int64_t>(j)] = p[j];
    real[r].narrow(0, off, static_cast<int64_t>(p.size())).fill_(true);
  }
  // HF: position_ids = attention_mask.cumsum(-1) - 1, 1 where masked.
  auto positions = (real.to(at::kLong).cumsum(-1) - 1).masked_fill_(real.logical_not(), 1);
  model::KvCache cache(model, b, longest + c.max_new_tokens);
  auto key_mask = real.to(device);
  auto seen = ids.to(device);                                   // [B,S]: prompt and generated ids (repetition penalty)
  auto next_pos = positions.narrow(1, longest - 1, 1).to(device) + 1;  // [B,1]
  auto unfinished = at::ones({b}, at::TensorOptions().dtype(at::kBool).device(device));
  const auto eos = at::tensor(std::vector<int64_t>(c.eos_ids.begin(), c.eos_ids.end()), cpu_long).to(device);
  std::vector<at::Tensor> out;
  at::Tensor logits = model::decode_step(model, ids, positions, key_mask, cache);  // [B,V]
  for (int64_t step = 0; step < c.max_new_tokens; ++step) {
    auto scores = logits.clone();
    process_logits(scores, seen, c);
    at::Tensor next = c.do_sample ? at::multinomial(scores.softmax(-1), 1, false, gen ? std::optional<at::Generator>(*gen) : std::nullopt).squeeze(1)
                                  : scores.argmax(-1);
    next = at::where(unfinished, next, at::full_like(next, c.pad_id));
    out.push_back(next);
    seen = at::cat({seen, next.unsqueeze(1)}, 1);
    if (eos.numel() > 0) unfinished = unfinished & at::isin(next, eos).logical_not();
    if (!unfinished.any().item<bool>() || step + 1 == c.max_new_tokens) break;
    key_mask = at::cat({key_mask, at::ones({b, 1}, key_mask.options())}, 1);
    logits = model::decode_step(model, next.unsqueeze(1), next_pos, key_mask, cache);
    next_pos = next_pos + 1;
  }
  const auto tokens = at::stack(out, 1).to(at::kCPU).to(at::kInt).contiguous();  // [B,N]
  std::vector<std::vector<int32_t>> result(static_cast<size_t>(b));
  for (int64_t r = 0; r < b; ++r) {
    const int32_t* row = tokens[r].data_ptr<int32_t>();
    result[static_cast<size_t>(r)].assign(row, row + tokens.size(1));
  }
  return result;
}

}  // namespace lf::train
