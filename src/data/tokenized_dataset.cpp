#include "lf/data/tokenized_dataset.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "lf/common/error.h"

namespace lf {
namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'L', 'F', 'T', 'O', 'K', 'D', 'S', '1'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kHasSegments = 1;  // Header::flags
constexpr uint32_t kNeat = 2;
constexpr uint32_t kPaired = 4;
constexpr uint32_t kTagged = 8;

struct Header {
  char magic[8];
  uint32_t version;
  uint32_t flags;  // was reserved (0): caches without segments read as before
  uint64_t key;
  uint64_t size;
  uint64_t tokens;
  uint64_t pad[3];
};
static_assert(sizeof(Header) == 64);

struct Owned {
  std::vector<uint64_t> offsets;
  std::vector<int32_t> ids;
  std::vector<int32_t> labels;
  std::vector<int32_t> segments;
  std::vector<int32_t> tags;
};

struct Mapping {
  void* addr = MAP_FAILED;
  size_t len = 0;
  ~Mapping() {
    if (addr != MAP_FAILED) munmap(addr, len);
  }
};

}  // namespace

TokenizedDataset TokenizedDataset::from_examples(const std::vector<EncodedExample>& examples, bool neat) {
  auto owned = std::make_shared<Owned>();
  owned->offsets.reserve(examples.size() + 1);
  owned->offsets.push_back(0);
  size_t total = 0;
  for (const auto& e : examples) total += e.input_ids.size();
  owned->ids.reserve(total);
  owned->labels.reserve(total);
  const bool segments = !examples.empty() && !examples.front().segment_ids.empty();
  if (segments) owned->segments.reserve(total);
  for (const auto& e : examples) {
    owned->ids.insert(owned->ids.end(), e.input_ids.begin(), e.input_ids.end());
    owned->labels.insert(owned->labels.end(), e.labels.begin(), e.labels.end());
    LF_CHECK(e.segment_ids.size() == (segments ? e.input_ids.size() : 0), ConfigError,
             "tokenized dataset: every example needs segment ids (packed rows) or none: {} for {} tokens",
             e.segment_ids.size(), e.input_ids.size());
    owned->segments.insert(owned->segments.end(), e.segment_ids.begin(), e.segment_ids.end());
    owned->offsets.push_back(owned->ids.size());
  }
  TokenizedDataset d;
  d.offsets_ = owned->offsets.data();
  d.ids_ = owned->ids.data();
  d.labels_ = owned->labels.data();
  if (segments) d.segments_ = owned->segments.data();
  LF_CHECK(!neat || segments || examples.empty(), ConfigError,
           "tokenized dataset: neat_packing needs packed rows with segment ids, got unpacked examples");
  d.neat_ = neat && segments;
  d.size_ = examples.size();
  d.storage_ = std::move(owned);
  return d;
}

TokenizedDataset TokenizedDataset::from_pairs(const std::vector<EncodedExample>& rows, const std::vector<int32_t>& tags) {
  LF_CHECK(rows.size() % 2 == 0 && (tags.empty() || tags.size() * 2 == rows.size()), ConfigError,
           "tokenized dataset: {} rows and {} tags do not make pairs", rows.size(), tags.size());
  TokenizedDataset d = from_examples(rows);
  d.paired_ = true;
  if (!tags.empty()) {
    auto owned = std::make_shared<std::pair<std::shared_ptr<const void>, std::vector<int32_t>>>(d.storage_, tags);
    d.tags_ = owned->second.data();
    d.storage_ = std::move(owned);
  }
  return d;
}

void TokenizedDataset::save(const fs::path& file, uint64_t key) const {
  fs::create_directories(file.parent_path());
  const fs::path tmp = file.string() + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    LF_CHECK(out.good(), ConfigError, "cannot write tokenized cache {}: {}", tmp.string(),
             std::strerror(errno));
    Header h{};
    std::memcpy(h.magic, kMagic, 8);
    h.version = kVersion;
    h.flags = (segments_ ? kHasSegments : 0) | (neat_ ? kNeat : 0) | (paired_ ? kPaired : 0) | (tags_ ? kTagged : 0);
    h.key = key;
    h.size = size_;
    h.tokens = num_tokens();
    out.write(reinterpret_cast<const char*>(&h), sizeof(h));
    static const uint64_t kZero = 0;
    const uint64_t* offsets = size_ == 0 ? &kZero : offsets_;
    out.write(reinterpret_cast<const char*>(offsets), static_cast<std::streamsize>((size_ + 1) * 8));
    out.write(reinterpret_cast<const char*>(ids_), static_cast<std::streamsize>(h.tokens * 4));
    out.write(reinterpret_cast<const char*>(labels_), static_cast<std::streamsize>(h.tokens * 4));
    if (segments_) out.write(reinterpret_cast<const char*>(segments_), static_cast<std::streamsize>(h.tokens * 4));
    if (tags_) out.write(reinterpret_cast<const char*>(tags_), static_cast<std::streamsize>(size_ / 2 * 4));
    out.flush();
    LF_CHECK(out.good(), ConfigError, "writing tokenized cache {} failed (disk full?)", tmp.string());
  }
  fs::rename(tmp, file);  // atomic: readers see the old file or the whole new one
}

std::optional<TokenizedDataset> TokenizedDataset::load(const fs::path& file, uint64_t key) {
  int fd = ::open(file.c_str(), O_RDONLY);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  ::fstat(fd, &st);
  auto map = std::make_shared<Mapping>();
  map->len = static_cast<size_t>(st.st_size);
  if (map->len >= sizeof(Header)) map->addr = ::mmap(nullptr, map->len, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  LF_CHECK(map->addr != MAP_FAILED, ConfigError,
           "tokenized cache {} is truncated or unreadable; delete it to re-tokenize", file.string());
  const auto* h = static_cast<const Header*>(map->addr);
  LF_CHECK(std::memcmp(h->magic, kMagic, 8) == 0 && h->version == kVersion, ConfigError,
           "{} is not an lf-train tokenized cache (version {}); delete it or change tokenized_path",
           file.string(), kVersion);
  if (h->key != key) return std::nullopt;
  const bool segments = (h->flags & kHasSegments) != 0;
  const bool tagged = (h->flags & kTagged) != 0;
  const size_t need = sizeof(Header) + (h->size + 1) * 8 + h->tokens * (segments ? 12 : 8) + (tagged ? h->size / 2 * 4 : 0);
  LF_CHECK(map->len >= need, ConfigError,
           "tokenized cache {} is truncated ({} of {} bytes); delete it to re-tokenize",
           file.string(), map->len, need);
  const char* base = static_cast<const char*>(map->addr) + sizeof(Header);
  TokenizedDataset d;
  d.size_ = h->size;
  d.offsets_ = reinterpret_cast<const uint64_t*>(base);
  d.ids_ = reinterpret_cast<const int32_t*>(base + (h->size + 1) * 8);
  d.labels_ = d.ids_ + h->tokens;
  if (segments) d.segments_ = d.labels_ + h->tokens;
  if (tagged) d.tags_ = d.labels_ + h->tokens * (segments ? 2 : 1);
  d.neat_ = segments && (h->flags & kNeat) != 0;
  d.paired_ = (h->flags & kPaired) != 0;
  d.storage_ = std::move(map);
  return d;
}

}  // namespace lf
