#include "lf/data/preview_samples.h"

#include <nlohmann/json.hpp>

#include "lf/data/chat_template.h"
#include "lf/data/pairwise.h"
#include "lf/data/sft_dataset.h"
#include "lf/data/supervised.h"
#include "preview.h"

namespace lf {

namespace {

PreviewSample sample_of(const Tokenizer& tok, const EncodedExample& ex, std::string origin, int64_t cutoff_len) {
  PreviewSample s;
  s.origin = std::move(origin);
  s.tokens = static_cast<int64_t>(ex.input_ids.size());
  for (int32_t l : ex.labels) s.trained += l != kIgnoreIndex;
  s.truncated = s.tokens >= cutoff_len;
  for (auto& [text, masked] : masked_segments(tok, ex)) s.segments.push_back({std::move(text), masked});
  return s;
}

PreviewSample dropped(std::string origin) {
  PreviewSample s;
  s.origin = std::move(origin);
  s.dropped = true;
  return s;
}

// The preference stages' rows, as `lf-train preview` prints them: each pair's chosen and rejected
// rows (dpo, rm), or each KTO example's row with its tag (not its KL row, which `lf-train preview` adds).
void preference_samples(const Tokenizer& tok, const ChatTemplate& tmpl, const DataArgs& args,
                        const std::vector<Example>& examples, std::vector<PreviewSample>& out) {
  if (pairwise_stage(args.stage)) {
    for (const auto& example : examples) {
      EncodedExample chosen, rejected;
      if (!encode_pairwise(example, tmpl, args.cutoff_len, chosen, rejected)) {
        out.push_back(dropped(example.origin));
        continue;
      }
      out.push_back(sample_of(tok, chosen, example.origin + " (chosen)", args.cutoff_len));
      out.push_back(sample_of(tok, rejected, example.origin + " (rejected)", args.cutoff_len));
    }
    return;
  }
  // One example a batch: its row is the same in any batch (only its KL row, not shown, pairs it with
  // another example), and a dropped example keeps its place.
  for (const auto& example : examples) {
    const auto rows = encode_feedback_batch({example}, tmpl, args.cutoff_len);
    if (rows.empty()) {
      out.push_back(dropped(example.origin));
      continue;
    }
    const std::string tag = rows[0].desirable ? " (desirable)" : " (undesirable)";
    out.push_back(sample_of(tok, rows[0].target, example.origin + tag, args.cutoff_len));
  }
}

}  // namespace

std::vector<PreviewSample> preview_samples(const DataArgs& args, int n, std::string* template_name) {
  Tokenizer tok = load_tokenizer_for(args);
  ChatTemplate tmpl = resolve_template(args, tok);
  if (template_name) *template_name = tmpl.spec().name;
  DataArgs small = args;
  small.max_samples = std::max<int64_t>(n, 0);
  small.packing = false;  // examples, not packs
  auto examples = load_examples(small, args.dataset);
  if (examples.size() > static_cast<size_t>(std::max(n, 0))) examples.resize(static_cast<size_t>(std::max(n, 0)));
  std::vector<PreviewSample> out;
  if (pairwise_stage(args.stage) || feedback_stage(args.stage)) {
    preference_samples(tok, tmpl, args, examples, out);
    return out;
  }
  const SupervisedOptions opts{args.cutoff_len, args.train_on_prompt, args.mask_history};
  for (const auto& example : examples) {
    EncodedExample ex;
    if (!encode_supervised(example, tmpl, opts, ex))
      out.push_back(dropped(example.origin));
    else
      out.push_back(sample_of(tok, ex, example.origin, args.cutoff_len));
  }
  return out;
}

std::string preview_samples_json(const DataArgs& args, int n) {
  std::string tmpl;
  const auto samples = preview_samples(args, n, &tmpl);
  nlohmann::json list = nlohmann::json::array();
  for (const auto& s : samples) {
    nlohmann::json segs = nlohmann::json::array();
    for (const auto& seg : s.segments) segs.push_back({{"text", seg.text}, {"masked", seg.masked}});
    list.push_back({{"origin", s.origin},
                    {"tokens", s.tokens},
                    {"trained", s.trained},
                    {"truncated", s.truncated},
                    {"dropped", s.dropped},
                    {"segments", segs}});
  }
  nlohmann::json j = {{"state", "ready"},
                      {"template", tmpl},
                      {"cutoff_len", args.cutoff_len},
                      {"train_on_prompt", args.train_on_prompt},
                      {"datasets", args.dataset},
                      {"samples", list}};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace lf
