#include "lf/data/preview_samples.h"

#include <nlohmann/json.hpp>

#include "lf/data/chat_template.h"
#include "lf/data/sft_dataset.h"
#include "lf/data/supervised.h"
#include "preview.h"

namespace lf {

std::vector<PreviewSample> preview_samples(const DataArgs& args, int n, std::string* template_name) {
  Tokenizer tok = load_tokenizer_for(args);
  ChatTemplate tmpl = resolve_template(args, tok);
  if (template_name) *template_name = tmpl.spec().name;
  DataArgs small = args;
  small.max_samples = std::max<int64_t>(n, 0);
  small.packing = false;  // examples, not packs
  auto examples = load_examples(small, args.dataset);
  if (examples.size() > static_cast<size_t>(std::max(n, 0))) examples.resize(static_cast<size_t>(std::max(n, 0)));
  const SupervisedOptions opts{args.cutoff_len, args.train_on_prompt, args.mask_history};
  std::vector<PreviewSample> out;
  for (const auto& example : examples) {
    PreviewSample s;
    s.origin = example.origin;
    EncodedExample ex;
    if (!encode_supervised(example, tmpl, opts, ex)) {
      s.dropped = true;
      out.push_back(std::move(s));
      continue;
    }
    s.tokens = static_cast<int64_t>(ex.input_ids.size());
    for (int32_t l : ex.labels) s.trained += l != kIgnoreIndex;
    s.truncated = s.tokens >= args.cutoff_len;
    for (auto& [text, masked] : masked_segments(tok, ex)) s.segments.push_back({std::move(text), masked});
    out.push_back(std::move(s));
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
