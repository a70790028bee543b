#pragma once
// The BPE model of HF `tokenizers` (models/bpe): turns one pre-tokenized piece
// into ids by applying merges lowest rank first, leftmost on ties, exactly as
// its Word::merge_all does, so ids match bit for bit.
//
// Threading: immutable after construction; tokenize() is safe from many
// threads. The word cache is per thread (no locks, no shared cache lines), keyed
// by a process-unique model id so a reused address never serves stale ids.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "string_map.h"

namespace lf {

struct BpeOptions {
  // Pieces arrive as raw bytes and the vocabulary is spelled in GPT-2's
  // byte-level chars (a ByteLevel pre-tokenizer is present).
  bool byte_level = false;
  bool byte_fallback = false;
  bool fuse_unk = false;
  bool ignore_merges = false;
  std::optional<std::string> unk_token;
  std::string continuing_subword_prefix;
  std::string end_of_word_suffix;
};

class BpeModel {
 public:
  BpeModel(Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges,
           BpeOptions options);

  // Appends the ids of one piece (raw bytes when options.byte_level).
  void tokenize(std::string_view piece, std::vector<int32_t>& out) const;
  // Same result, bypassing the cache and choosing the merge loop explicitly;
  // for tests that check the fast path against the heap path.
  void tokenize_uncached(std::string_view piece, std::vector<int32_t>& out, bool use_heap) const;

  const Vocab& vocab() const { return vocab_; }
  const BpeOptions& options() const { return options_; }

 private:
  struct Merge {
    uint64_t key;
    int32_t rank;
    int32_t new_id;
  };
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    int32_t len;  // 0 once merged into its left neighbour
  };
  static constexpr size_t kCacheCapacity = 1 << 17;  // entries per thread
  // HF caches only pieces shorter than this; longer ones are rare and unique.
  static constexpr size_t kMaxCachedLen = 256;
  // Below this many symbols a rescanning loop beats the heap; same order.
  static constexpr size_t kHeapThreshold = 24;

  const Merge* find_merge(int32_t a, int32_t b) const;
  void insert_merge(int32_t a, int32_t b, int32_t rank, int32_t new_id);
  void tokenize_word(std::string_view word, std::vector<int32_t>& out) const;
  void initial_symbols(std::string_view piece, std::vector<Symbol>& symbols) const;
  // The byte-level fast path of initial_symbols (no affixes); false (symbols cleared) when a
  // byte has no id.
  bool initial_byte_symbols(std::string_view piece, std::vector<Symbol>& symbols) const;
  static void add_symbol(std::vector<Symbol>& symbols, int32_t id, int32_t len) {
    const auto n = static_cast<int32_t>(symbols.size());
    symbols.push_back(Symbol{id, n - 1, n + 1, len});
  }
  void merge_heap(std::vector<Symbol>& symbols) const;
  void merge_scan(std::vector<Symbol>& symbols) const;

  Vocab vocab_;
  // Byte-level: raw-byte spelling -> id, for ignore_merges lookups.
  Vocab raw_vocab_;
  BpeOptions options_;
  std::vector<Merge> merges_;  // open addressing, power-of-two size
  uint64_t merge_mask_ = 0;
  std::array<int32_t, 256> byte_ids_{};      // byte-level: id of each byte's char
  std::array<int32_t, 256> fallback_ids_{};  // <0xXX> ids, -1 when absent
  std::array<int32_t, 128> ascii_ids_{};     // id of each 1-char ASCII token, -1 when absent
  std::optional<int32_t> unk_id_;
  // SentencePiece-style vocabularies without a pre-tokenizer hand us whole
  // sentences. When no token has a "▁" right after another char, no merge can
  // cross such a point, so cutting there is exact and makes words cacheable.
  bool split_at_metaspace_ = false;
  uint64_t instance_id_ = 0;
};

}  // namespace lf
