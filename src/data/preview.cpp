#include "preview.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <ostream>

#include "lf/data/chat_template.h"
#include "lf/data/data_args.h"
#include "lf/data/pairwise.h"
#include "lf/data/sft_dataset.h"

namespace lf {

std::vector<std::pair<std::string, bool>> masked_segments(const Tokenizer& tok, const EncodedExample& ex) {
  std::vector<std::pair<std::string, bool>> out;
  size_t i = 0;
  const size_t n = ex.input_ids.size();
  while (i < n) {
    const bool masked = ex.labels[i] == kIgnoreIndex;
    size_t j = i;
    while (j < n && (ex.labels[j] == kIgnoreIndex) == masked) ++j;
    out.emplace_back(tok.decode(std::span<const int32_t>(ex.input_ids.data() + i, j - i)), masked);
    i = j;
  }
  return out;
}

std::string render_masked(const Tokenizer& tok, const EncodedExample& ex, const std::string& mask_open,
                          const std::string& mask_close) {
  std::string out;
  for (const auto& [text, masked] : masked_segments(tok, ex)) out += masked ? mask_open + text + mask_close : text;
  return out;
}

namespace {

void show_row(const Tokenizer& tok, const EncodedExample& row, const std::string& what, const std::string& open,
              const std::string& close, std::ostream& out) {
  size_t trained = 0;
  for (int32_t l : row.labels) trained += l != kIgnoreIndex;
  out << fmt::format("--- {}: {} tokens, {} trained ---\n", what, row.input_ids.size(), trained);
  out << render_masked(tok, row, open, close) << "\n";
}

// The preference stages' samples: each pair's chosen and rejected rows (dpo, rm), or each KTO example's
// row, its tag and its KL row (another example's response to this prompt).
void preview_preference(const Tokenizer& tok, const ChatTemplate& tmpl, const DataArgs& args,
                        const std::vector<Example>& examples, const std::string& open, const std::string& close,
                        std::ostream& out) {
  if (pairwise_stage(args.stage)) {
    for (size_t k = 0; k < examples.size(); ++k) {
      EncodedExample chosen, rejected;
      if (!encode_pairwise(examples[k], tmpl, args.cutoff_len, chosen, rejected)) continue;
      out << fmt::format("\n=== sample {} ({}) ===\n", k, examples[k].origin);
      show_row(tok, chosen, "chosen", open, close, out);
      show_row(tok, rejected, "rejected", open, close, out);
    }
    return;
  }
  const auto rows = encode_feedback_batch(examples, tmpl, args.cutoff_len);
  for (size_t k = 0; k < rows.size(); ++k) {
    out << fmt::format("\n=== sample {} ({}): {} ===\n", k, examples[k].origin,
                       rows[k].desirable ? "desirable" : "undesirable");
    show_row(tok, rows[k].target, "response", open, close, out);
    show_row(tok, rows[k].kl, "KL pair (the previous example's response)", open, close, out);
  }
}

}  // namespace

void run_preview(const DataArgs& args, int n, std::ostream& out, bool color) {
  Tokenizer tok = load_tokenizer_for(args);
  ChatTemplate tmpl = resolve_template(args, tok);
  const std::string tmpl_name = tmpl.spec().name;
  // What training would refuse, preview refuses too: the whole dataset read, converted,
  // split and tokenized as the trainer does (no cache written), before any sample is shown.
  DataArgs check = args;
  check.tokenized_path.clear();
  const SftData all = load_sft_data(check, tok);
  DataArgs small = args;
  small.max_samples = std::max<int64_t>(n, 0);
  small.packing = false;  // show examples, not packs
  auto examples = load_examples(small, args.dataset);
  if (examples.size() > static_cast<size_t>(std::max(n, 0))) examples.resize(static_cast<size_t>(std::max(n, 0)));
  const std::string open = color ? "\x1b[2;9m" : "[[MASKED]]";
  const std::string close = color ? "\x1b[0m" : "[[/MASKED]]";
  out << fmt::format("template '{}', cutoff_len {}, train_on_prompt {}, mask_history {}\n", tmpl_name,
                     args.cutoff_len, args.train_on_prompt, args.mask_history);
  out << fmt::format("dataset {}: {} training and {} evaluation example(s) after preprocessing, {} training tokens\n",
                     fmt::join(args.dataset, ","), all.train.num_examples(), all.eval.num_examples(), all.train.num_tokens());
  // The counts training reports (lf/data/drop_report.h), from the same records.
  if (all.dropped.dropped) out << all.dropped.text(fmt::format("{}", fmt::join(args.dataset, ","))) << "\n";
  out << (color ? "struck-through dim text is masked (label -100): the model is not trained on it\n"
                : "text inside [[MASKED]]...[[/MASKED]] has label -100: the model is not trained on it\n");
  if (pairwise_stage(args.stage) || feedback_stage(args.stage)) {
    preview_preference(tok, tmpl, args, examples, open, close, out);
    return;
  }
  SupervisedOptions opts{args.cutoff_len, args.train_on_prompt, args.mask_history};
  for (size_t k = 0; k < examples.size(); ++k) {
    EncodedExample ex;
    if (!encode_supervised(examples[k], tmpl, opts, ex)) {
      out << fmt::format("\n=== sample {} ({}) dropped: not a prompt/response pair ===\n", k,
                         examples[k].origin);
      continue;
    }
    size_t trained = 0;
    for (int32_t l : ex.labels) trained += l != kIgnoreIndex;
    out << fmt::format("\n=== sample {} ({}): {} tokens, {} trained{} ===\n", k, examples[k].origin,
                       ex.input_ids.size(), trained,
                       static_cast<int64_t>(ex.input_ids.size()) >= args.cutoff_len
                           ? fmt::format(", truncated to cutoff_len {}", args.cutoff_len)
                           : "");
    out << render_masked(tok, ex, open, close) << "\n";
  }
}

}  // namespace lf
