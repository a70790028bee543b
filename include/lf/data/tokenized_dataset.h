#pragma once
// Tokenized examples (input_ids + labels) in one flat buffer, and the cache
// file format shared by re-runs and all ranks:
//
//   header (64 bytes): magic "LFTOKDS1", version, cache key, n, total tokens
//   offsets  uint64[n + 1]   token offset of each example
//   ids      int32[total]
//   labels   int32[total]    (-100 where not trained)
//   segments int32[total]    only when header flag 1 is set (packed rows: supervised.h);
//                            flag 2: neat_packing (the sequences attend only within themselves)
//   tags     int32[n / 2]    only when header flag 8 is set (KTO: 1 desirable, 0 not);
//                            flag 4: the rows come in pairs, one example each (pairwise.h)
//
// Files are written to a temp name and renamed, so a reader never sees a
// partial file; load() maps the file read-only (mmap) and shares it.
// Threading: immutable after construction; safe to read from many threads.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "lf/data/supervised.h"

namespace lf {

class TokenizedDataset {
 public:
  TokenizedDataset() = default;
  // neat: the examples are neat_packing's packs (their segment_ids also bound the attention).
  static TokenizedDataset from_examples(const std::vector<EncodedExample>& examples, bool neat = false);
  // The preference stages' rows (pairwise.h): rows 2i and 2i+1 are example i; `tags` (KTO, one per
  // example, else empty) say whether it is desirable.
  static TokenizedDataset from_pairs(const std::vector<EncodedExample>& rows, const std::vector<int32_t>& tags = {});

  // Rows per training example: 1, or 2 for the preference stages (a pair is one example).
  size_t group_size() const { return paired_ ? 2 : 1; }
  size_t num_examples() const { return size_ / group_size(); }
  bool has_tags() const { return tags_ != nullptr; }
  int32_t tag(size_t example) const { return tags_[example]; }

  size_t size() const { return size_; }  // rows
  size_t num_tokens() const { return size_ == 0 ? 0 : offsets_[size_]; }
  std::span<const int32_t> input_ids(size_t i) const {
    return {ids_ + offsets_[i], static_cast<size_t>(offsets_[i + 1] - offsets_[i])};
  }
  std::span<const int32_t> labels(size_t i) const {
    return {labels_ + offsets_[i], static_cast<size_t>(offsets_[i + 1] - offsets_[i])};
  }
  // Packed rows: each token's sequence within its pack (1, 2, ...; 0 for padding), where the
  // positions restart (LLaMA-Factory's packed position_ids).
  bool has_segments() const { return segments_ != nullptr; }
  // neat_packing: the sequences of a pack attend only within themselves (else across the row).
  bool neat() const { return neat_; }
  std::span<const int32_t> segment_ids(size_t i) const {
    return {segments_ + offsets_[i], static_cast<size_t>(offsets_[i + 1] - offsets_[i])};
  }

  void save(const std::filesystem::path& file, uint64_t key) const;
  // nullopt when the file is absent or was written under another key.
  // Throws ConfigError for a truncated or foreign file.
  static std::optional<TokenizedDataset> load(const std::filesystem::path& file, uint64_t key);

 private:
  std::shared_ptr<const void> storage_;  // owned vectors or the mapping
  const uint64_t* offsets_ = nullptr;
  const int32_t* ids_ = nullptr;
  const int32_t* labels_ = nullptr;
  const int32_t* segments_ = nullptr;
  const int32_t* tags_ = nullptr;
  size_t size_ = 0;
  bool neat_ = false;
  bool paired_ = false;
};

}  // namespace lf
