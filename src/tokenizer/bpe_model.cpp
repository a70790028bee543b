#include "bpe_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>

#include "byte_level.h"
#include "lf/common/error.h"
#include "utf8.h"

namespace lf {
namespace {

constexpr uint64_t kEmptyKey = ~0ull;
std::atomic<uint64_t> g_next_instance_id{1};

struct WordCache {
  uint64_t owner = 0;
  StringMap<std::vector<int32_t>> map;
};

WordCache& thread_word_cache() {
  thread_local WordCache cache;
  return cache;
}

constexpr std::string_view kMetaspace = "\xE2\x96\x81";  // U+2581

uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

uint64_t mix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  return k;
}

// HF's heap entry: lowest rank first, then lowest position.
struct QueueEntry {
  int32_t rank;
  int32_t pos;
  int32_t new_id;
  bool operator<(const QueueEntry& o) const {
    return rank != o.rank ? rank > o.rank : pos > o.pos;
  }
};

}  // namespace

BpeModel::BpeModel(Vocab vocab, const std::vector<std::pair<std::string, std::string>>& merges,
                   BpeOptions options)
    : vocab_(std::move(vocab)), options_(std::move(options)), instance_id_(g_next_instance_id++) {
  size_t cap = 1;
  while (cap < merges.size() * 2 + 16) cap <<= 1;
  merges_.assign(cap, Merge{kEmptyKey, 0, 0});
  merge_mask_ = cap - 1;
  const std::string& prefix = options_.continuing_subword_prefix;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    auto ia = vocab_.find(a), ib = vocab_.find(b);
    LF_CHECK(ia != vocab_.end() && ib != vocab_.end(), ConfigError,
             "tokenizer merge #{} ('{}' '{}') uses a token missing from the vocabulary; "
             "the tokenizer.json is inconsistent: re-export it with `tokenizers`",
             rank, a, b);
    std::string merged = a;
    if (!prefix.empty() && b.starts_with(prefix))
      merged += b.substr(prefix.size());
    else
      merged += b;
    auto im = vocab_.find(merged);
    LF_CHECK(im != vocab_.end(), ConfigError,
             "tokenizer merge #{} produces '{}', which is not in the vocabulary; "
             "the tokenizer.json is inconsistent",
             rank, merged);
    insert_merge(ia->second, ib->second, static_cast<int32_t>(rank), im->second);
  }
  byte_ids_.fill(-1);
  fallback_ids_.fill(-1);
  ascii_ids_.fill(-1);
  for (int c = 0; c < 128; ++c)
    if (auto it = vocab_.find(std::string(1, static_cast<char>(c))); it != vocab_.end()) ascii_ids_[c] = it->second;
  for (int b = 0; b < 256; ++b) {
    if (auto it = vocab_.find(byte_level::byte_to_char(static_cast<unsigned char>(b)));
        it != vocab_.end())
      byte_ids_[b] = it->second;
    if (auto it = vocab_.find(fmt::format("<0x{:02X}>", b)); it != vocab_.end())
      fallback_ids_[b] = it->second;
  }
  if (options_.unk_token) {
    auto it = vocab_.find(*options_.unk_token);
    LF_CHECK(it != vocab_.end(), ConfigError,
             "tokenizer unk_token '{}' is not in the vocabulary", *options_.unk_token);
    unk_id_ = it->second;
  }
  if (!options_.byte_level && options_.continuing_subword_prefix.empty() &&
      options_.end_of_word_suffix.empty() && vocab_.count(kMetaspace)) {
    split_at_metaspace_ = true;
    for (const auto& [tok, id] : vocab_) {
      for (size_t at = tok.find(kMetaspace, 1); at != std::string::npos; at = tok.find(kMetaspace, at + 1)) {
        if (at < 3 || tok.compare(at - 3, 3, kMetaspace) != 0) {
          split_at_metaspace_ = false;
          break;
        }
      }
      if (!split_at_metaspace_) break;
    }
  }
  if (options_.byte_level) {
    for (const auto& [tok, id] : vocab_)
      if (auto raw = byte_level::unmap(tok)) raw_vocab_.emplace(std::move(*raw), id);
  }
}

void BpeModel::insert_merge(int32_t a, int32_t b, int32_t rank, int32_t new_id) {
  uint64_t key = pair_key(a, b);
  for (uint64_t i = mix(key) & merge_mask_;; i = (i + 1) & merge_mask_) {
    Merge& m = merges_[i];
    // A later duplicate overwrites, as HF's HashMap collect does.
    if (m.key == kEmptyKey || m.key == key) {
      m = Merge{key, rank, new_id};
      return;
    }
  }
}

const BpeModel::Merge* BpeModel::find_merge(int32_t a, int32_t b) const {
  uint64_t key = pair_key(a, b);
  for (uint64_t i = mix(key) & merge_mask_;; i = (i + 1) & merge_mask_) {
    const Merge& m = merges_[i];
    if (m.key == key) return &m;
    if (m.key == kEmptyKey) return nullptr;
  }
}

// Byte-level without affixes: every byte is one char of the byte-level spelling, one lookup.
bool BpeModel::initial_byte_symbols(std::string_view piece, std::vector<Symbol>& symbols) const {
  for (unsigned char c : piece) {
    if (byte_ids_[c] < 0) {
      symbols.clear();
      return false;
    }
    add_symbol(symbols, byte_ids_[c], 1);
  }
  if (!symbols.empty()) symbols.back().next = -1;
  return true;
}

void BpeModel::initial_symbols(std::string_view piece, std::vector<Symbol>& symbols) const {
  symbols.clear();
  auto add = [&](int32_t id, int32_t len) { add_symbol(symbols, id, len); };
  const bool affixes =
      !options_.continuing_subword_prefix.empty() || !options_.end_of_word_suffix.empty();
  if (options_.byte_level && !affixes && initial_byte_symbols(piece, symbols)) return;
  std::string spelled_storage;
  std::string_view s = piece;
  if (options_.byte_level) {
    spelled_storage = byte_level::map(piece);
    s = spelled_storage;
  }
  // A pending unk (id, byte length), held back so fuse_unk can extend it.
  bool unk_pending = false;
  int32_t unk_len = 0;
  std::string key;
  size_t i = 0;
  while (i < s.size()) {
    size_t start = i;
    utf8::next(s, i);
    std::string_view ch = s.substr(start, i - start);
    std::string_view lookup = ch;
    if (affixes) {
      key.clear();
      if (start > 0) key += options_.continuing_subword_prefix;
      key += ch;
      if (i == s.size()) key += options_.end_of_word_suffix;
      lookup = key;
    }
    int32_t byte_len = static_cast<int32_t>(ch.size());
    int32_t id = -1;
    if (!affixes && ch.size() == 1 && static_cast<unsigned char>(ch[0]) < 128) {
      id = ascii_ids_[static_cast<unsigned char>(ch[0])];  // skips hashing for ASCII
    } else if (auto it = vocab_.find(lookup); it != vocab_.end()) {
      id = it->second;
    }
    if (id >= 0) {
      if (unk_pending) {
        add(*unk_id_, unk_len);
        unk_pending = false;
      }
      add(id, byte_len);
      continue;
    }
    if (options_.byte_fallback) {
      bool ok = std::all_of(lookup.begin(), lookup.end(), [&](char c) {
        return fallback_ids_[static_cast<unsigned char>(c)] >= 0;
      });
      if (ok) {
        // HF flushes no pending unk here; it is emitted later, out of order, as HF does.
        for (char c : lookup) add(fallback_ids_[static_cast<unsigned char>(c)], 1);
        continue;
      }
    }
    if (unk_id_) {
      if (unk_pending && options_.fuse_unk) {
        unk_len += byte_len;
      } else {
        if (unk_pending) add(*unk_id_, unk_len);
        unk_pending = true;
        unk_len = byte_len;
      }
    }
  }
  if (unk_pending) add(*unk_id_, unk_len);
  if (!symbols.empty()) symbols.back().next = -1;
}

void BpeModel::merge_heap(std::vector<Symbol>& symbols) const {
  // A max-heap under QueueEntry::operator< (lowest rank on top); the buffer is
  // per thread so long words do not reallocate it.
  thread_local std::vector<QueueEntry> queue;
  queue.clear();
  auto push = [&](QueueEntry e) {
    queue.push_back(e);
    std::push_heap(queue.begin(), queue.end());
  };
  for (size_t i = 0; i + 1 < symbols.size(); ++i)
    if (const Merge* m = find_merge(symbols[i].id, symbols[i + 1].id))
      queue.push_back(QueueEntry{m->rank, static_cast<int32_t>(i), m->new_id});
  std::make_heap(queue.begin(), queue.end());
  const int32_t n = static_cast<int32_t>(symbols.size());
  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end());
    QueueEntry top = queue.back();
    queue.pop_back();
    Symbol& cur = symbols[top.pos];
    if (cur.len == 0 || cur.next == -1) continue;
    int32_t next_pos = cur.next;
    Symbol right = symbols[next_pos];
    const Merge* m = find_merge(cur.id, right.id);
    if (m == nullptr || m->new_id != top.new_id) continue;  // stale entry
    cur.id = top.new_id;
    cur.len += right.len;
    cur.next = right.next;
    symbols[next_pos].len = 0;
    if (right.next > -1 && right.next < n) symbols[right.next].prev = top.pos;
    if (cur.prev >= 0) {
      if (const Merge* pm = find_merge(symbols[cur.prev].id, cur.id))
        push(QueueEntry{pm->rank, cur.prev, pm->new_id});
    }
    if (cur.next > -1 && cur.next < n) {
      if (const Merge* nm = find_merge(cur.id, symbols[cur.next].id))
        push(QueueEntry{nm->rank, top.pos, nm->new_id});
    }
  }
}

void BpeModel::merge_scan(std::vector<Symbol>& symbols) const {
  // Symbols stay compacted; choosing the lowest (rank, position) each round
  // is the order the heap produces.
  thread_local std::vector<int32_t> ids;
  ids.clear();
  for (const Symbol& s : symbols) ids.push_back(s.id);
  while (ids.size() > 1) {
    int32_t best_rank = INT32_MAX, best_pos = -1, best_id = 0;
    for (size_t i = 0; i + 1 < ids.size(); ++i) {
      const Merge* m = find_merge(ids[i], ids[i + 1]);
      if (m != nullptr && m->rank < best_rank) {
        best_rank = m->rank;
        best_pos = static_cast<int32_t>(i);
        best_id = m->new_id;
      }
    }
    if (best_pos < 0) break;
    ids[best_pos] = best_id;
    ids.erase(ids.begin() + best_pos + 1);
  }
  symbols.resize(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) symbols[i] = Symbol{ids[i], 0, 0, 1};
}

void BpeModel::tokenize_uncached(std::string_view piece, std::vector<int32_t>& out,
                                 bool use_heap) const {
  thread_local std::vector<Symbol> symbols;
  initial_symbols(piece, symbols);
  if (use_heap)
    merge_heap(symbols);
  else
    merge_scan(symbols);
  for (const Symbol& s : symbols)
    if (s.len != 0) out.push_back(s.id);
}

void BpeModel::tokenize(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (options_.ignore_merges) {
    const Vocab& v = options_.byte_level ? raw_vocab_ : vocab_;
    if (auto it = v.find(piece); it != v.end()) {
      out.push_back(it->second);
      return;
    }
  }
  if (!split_at_metaspace_) {
    tokenize_word(piece, out);
    return;
  }
  size_t start = 0;
  for (size_t at = piece.find(kMetaspace, 1); at != std::string_view::npos;
       at = piece.find(kMetaspace, at + 1)) {
    if (at >= 3 && piece.compare(at - 3, 3, kMetaspace) == 0) continue;  // inside a ▁ run
    tokenize_word(piece.substr(start, at - start), out);
    start = at;
  }
  tokenize_word(piece.substr(start), out);
}

void BpeModel::tokenize_word(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (piece.size() >= kMaxCachedLen) {
    tokenize_uncached(piece, out, true);
    return;
  }
  WordCache& cache = thread_word_cache();
  if (cache.owner != instance_id_) {
    cache.map.clear();
    cache.owner = instance_id_;
  }
  if (auto it = cache.map.find(piece); it != cache.map.end()) {
    out.insert(out.end(), it->second.begin(), it->second.end());
    return;
  }
  size_t before = out.size();
  tokenize_uncached(piece, out, piece.size() > kHeapThreshold);
  if (cache.map.size() < kCacheCapacity)
    cache.map.emplace(std::string(piece), std::vector<int32_t>(out.begin() + before, out.end()));
}

}  // namespace lf
