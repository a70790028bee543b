#pragma once
// The loaded state behind lf::Tokenizer: HF's pipeline stages in order
// (added tokens -> normalizer -> pre-tokenizer -> BPE model -> post-processor;
// decoder for the way back). Built once by the loader, then read-only.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "added_vocab.h"
#include "bpe_model.h"
#include "decoder.h"
#include "lf/tokenizer/tokenizer.h"
#include "normalizer.h"
#include "pre_tokenizer.h"

namespace lf {

struct Tokenizer::Impl {
  std::filesystem::path source;
  uint64_t fingerprint = 0;
  AddedVocab added;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<BpeModel> model;
  std::unique_ptr<Decoder> decoder;
  // Single-sequence post-processing: ids around the encoded text.
  std::vector<int32_t> post_prefix;
  std::vector<int32_t> post_suffix;
  std::vector<std::string> id_to_token;  // model and added tokens; "" where unused
  std::vector<uint8_t> special;          // per id
  std::optional<int32_t> bos_id, eos_id, pad_id;
  bool add_bos_token = false;
  // From tokenizer_config.json, for TokenizerFlavor::kTransformers.
  std::string tokenizer_class;
  bool legacy = true;
  bool has_chat_template = false;
  std::optional<std::string> chat_template;  // the Jinja text, when it is one string (a list: none)
  std::optional<bool> add_prefix_space;

  void encode_into(std::string_view text, std::vector<int32_t>& ids) const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
};

// Loader entry points (loader.cpp).
std::shared_ptr<Tokenizer::Impl> load_tokenizer_json(const std::filesystem::path& file);
std::shared_ptr<Tokenizer::Impl> load_gpt2_files(const std::filesystem::path& dir);
void load_tokenizer_config(const std::filesystem::path& file, Tokenizer::Impl& impl);
void apply_transformers_flavor(Tokenizer::Impl& impl);

}  // namespace lf
