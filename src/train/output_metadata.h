#pragma once
// The files HF Trainer and LLaMA-Factory write beside the weights, carrying what tools read from
// them (vLLM, generate(), chat front ends): the tokenizer as the template fixed it, its chat
// template, and a full model's special-token ids. Internal to lf_train; rank 0 writes.
#include <filesystem>

#include "lf/train/trainer.h"

namespace lf::train {

// The tokenizer files of `src` (model::kModelSideFiles' tokenizer files, encoder.json, vocab.bpe)
// into `dst`, not over files already there. With `tok`, as HF's tokenizer.save_pretrained
// leaves them under LLaMA-Factory: tokenizer_config.json with the fixed eos_token / pad_token and
// no inline chat_template, the chat template in chat_template.jinja.
void save_tokenizer_files(const std::filesystem::path& src, const std::filesystem::path& dst,
                          const OutputTokenizer* tok);

// A full model's config.json and generation_config.json in `dst` (as save_causal_lm wrote and
// copied them) made what HF writes after align_special_tokens(model, tokenizer): bos / eos / pad
// ids the tokenizer's (generation_config keeps the old eos ids after the new one), and
// LLaMA-Factory's use_cache: false in config.json. No generation_config.json in the source: HF's
// from_model_config one.
void align_model_metadata(const std::filesystem::path& dst, const OutputTokenizer& tok);

}  // namespace lf::train
