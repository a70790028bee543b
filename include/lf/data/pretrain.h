#pragma once
// `stage: pt` (continued pre-training on plain text) as LLaMA-Factory 0.9.5 prepares it:
// PretrainDatasetProcessor on the converted examples (the text is the first prompt message's
// content: a dataset declared `columns: {prompt: text}`), then the pt workflow's collator
// (DataCollatorForLanguageModeling, mlm=False) for the labels.
//   - each text gets the eos token appended as text ("<|end_of_text|>" under template llama3,
//     else the tokenizer's eos after the template's fix), then is tokenized without special tokens;
//   - packing (pt's default): the texts of each batch of preprocessing_batch_size (LLaMA-Factory's
//     datasets.map batch) are concatenated and cut into blocks of cutoff_len tokens, the batch's
//     remainder dropped;
//   - no packing: each text alone, truncated to cutoff_len;
//   - no bos: the processor's add_bos_token step never fires under transformers 5 for a tokenizer.json
//     (pretrain.cpp says why);
//   - labels = input_ids, -100 where a token is the pad token (the collator's rule).
#include <vector>

#include "lf/data/chat_template.h"
#include "lf/data/data_args.h"
#include "lf/data/example.h"
#include "lf/data/supervised.h"

namespace lf {

std::vector<EncodedExample> encode_pretrain(const std::vector<Example>& examples, const ChatTemplate& tmpl,
                                            const DataArgs& args);

}  // namespace lf
