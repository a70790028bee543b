#pragma once
// A Hugging Face tokenizer loaded from disk (tokenizer.json, or GPT-2's
// encoder.json + vocab.bpe), producing the same ids as the `tokenizers` Rust core.
//
// Threading: a loaded Tokenizer is immutable; every const method may be called
// from any number of threads at once (the word cache is internally locked).
// Copies are cheap and share the loaded state.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace lf {

// Which Python stack's ids to reproduce. They differ for Llama-2/Mistral-style
// tokenizers: transformers 5 (what LLaMA-Factory 0.9.5 installs) rebuilds
// LlamaTokenizer without tokenizer.json's normalizer and with a Metaspace
// pre-tokenizer, so spaces next to special tokens encode differently.
enum class TokenizerFlavor {
  kTokenizers,    // tokenizer.json exactly as HF `tokenizers` runs it
  kTransformers,  // as transformers 5's AutoTokenizer runs it (data pipeline)
};

class Tokenizer {
 public:
  // `path` is a folder holding tokenizer.json (+ optional tokenizer_config.json
  // for bos/eos/pad), a folder holding encoder.json + vocab.bpe, or a
  // tokenizer.json file. Throws ConfigError naming the missing file or the
  // unsupported component.
  static Tokenizer load(const std::filesystem::path& path,
                        TokenizerFlavor flavor = TokenizerFlavor::kTokenizers);

  // `add_special` applies the post-processor (e.g. Mistral's leading <s>).
  // Added/special tokens written in the text are always matched, as HF does.
  std::vector<int32_t> encode(std::string_view text, bool add_special = false) const;
  // Encodes on `num_threads` threads (0: all cores); results are in input order.
  std::vector<std::vector<int32_t>> encode_batch(std::span<const std::string> texts,
                                                 bool add_special = false,
                                                 int num_threads = 0) const;
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::string id_to_token(int32_t id) const;  // "" for an unknown id
  bool is_special(int32_t id) const;
  int32_t vocab_size() const;  // largest id + 1, added tokens included

  // From tokenizer_config.json (bos_token/eos_token/pad_token), when present.
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  std::optional<int32_t> pad_id() const;
  // tokenizer_config.json's add_bos_token (HF's slow-tokenizer flag), default false.
  bool add_bos_token() const;
  // tokenizer_config.json carries a Jinja chat_template (LLaMA-Factory would
  // derive a template from it when `template:` is unset).
  bool has_chat_template() const;
  // That Jinja text (chat_template.jinja beside tokenizer_config.json wins, as in transformers), when it
  // is one string; nullopt for none and for a list of named templates.
  const std::optional<std::string>& chat_template() const;

  // Stable hash of the files that define the ids (for cache keys).
  uint64_t fingerprint() const;
  const std::filesystem::path& source() const;

  struct Impl;

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<const Impl> impl_;
};

}  // namespace lf
