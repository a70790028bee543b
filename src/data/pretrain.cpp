#include "lf/data/pretrain.h"

#include <algorithm>

#include "lf/common/error.h"
#include "lf/common/log.h"
#include "parallel.h"
#include "tokenize_progress.h"

namespace lf {
namespace {

// The collator's labels: the ids, except the pad token's (DataCollatorForLanguageModeling masks every
// token equal to pad_token_id, also one inside the text, as LLaMA-Factory's pt run trains).
EncodedExample with_labels(std::vector<int32_t> ids, int32_t pad_id) {
  EncodedExample e;
  e.labels.resize(ids.size());
  std::transform(ids.begin(), ids.end(), e.labels.begin(), [pad_id](int32_t t) { return t == pad_id ? -100 : t; });
  e.input_ids = std::move(ids);
  return e;
}

std::string text_of(const Example& ex) { return ex.prompt.empty() ? std::string() : ex.prompt.front().content; }

}  // namespace

std::vector<EncodedExample> encode_pretrain(const std::vector<Example>& examples, const ChatTemplate& tmpl,
                                            const DataArgs& args) {
  const Tokenizer& tok = tmpl.tokenizer();
  const std::string eos = args.template_name == "llama3" ? "<|end_of_text|>" : tok.id_to_token(tmpl.eos_id());
  // No bos step: PretrainDatasetProcessor prepends / writes bos when getattr(tokenizer, "add_bos_token")
  // is true, and transformers 5 (the pinned stack) drops tokenizer_config.json's add_bos_token whenever
  // it loads a tokenizer.json (tokenization_utils_base: init_kwargs.pop), which every tokenizer lf-train
  // loads has: the attribute reads False, for Llama-2/Mistral-style tokenizers too (the fixture's mistral).
  std::vector<std::vector<int32_t>> ids(examples.size());
  {
    spdlog::info("tokenizing {} examples on {} tokenizer threads", examples.size(),
                 parallel_threads(examples.size(), args.preprocessing_num_workers, 64));
    TokenizeProgress progress(examples.size(), "tokenizing");
    parallel_for(examples.size(), args.preprocessing_num_workers, [&](size_t i) {
      ids[i] = tok.encode(text_of(examples[i]) + eos, /*add_special=*/false);
      progress.tick();
    }, 64);
  }
  std::vector<EncodedExample> out;
  if (!args.packing) {
    for (auto& t : ids) {
      if (static_cast<int64_t>(t.size()) > args.cutoff_len) t.resize(static_cast<size_t>(args.cutoff_len));
      out.push_back(with_labels(std::move(t), tmpl.pad_id()));
    }
    return out;
  }
  const size_t block = static_cast<size_t>(args.cutoff_len);
  const size_t batch_size = static_cast<size_t>(args.preprocessing_batch_size);
  for (size_t b = 0; b < ids.size(); b += batch_size) {
    std::vector<int32_t> all;
    for (size_t i = b; i < std::min(ids.size(), b + batch_size); ++i) all.insert(all.end(), ids[i].begin(), ids[i].end());
    for (size_t at = 0; at + block <= all.size(); at += block) {
      std::vector<int32_t> t(all.begin() + static_cast<std::ptrdiff_t>(at),
                             all.begin() + static_cast<std::ptrdiff_t>(at + block));
      out.push_back(with_labels(std::move(t), tmpl.pad_id()));
    }
  }
  return out;
}

}  // namespace lf
